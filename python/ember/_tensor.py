"""em.Tensor (the runtime tensor, bound from C++ HostTensor) and its constructors em.tensor and
em.zeros (outside a trace). `t.dtype` is an em dtype object (em.f32, ...), which also compares
equal to its name ('f32')."""
import numpy as np

from . import _ember as _C
from . import _dtypes as D

Tensor = _C.Tensor

_I32 = np.iinfo(np.int32)
_U32 = np.iinfo(np.uint32)
_F32_MAX = float(np.finfo(np.float32).max)
MAX_ELEMENTS = 2 ** 31 - 1  # flat indices and dimensions are 32-bit (kMaxTensorElements in C++)


def _check_size(what, shape):
    """ember.ShapeError when `shape` has a dimension or a number of elements above 2^31 - 1,
    before anything is copied or allocated."""
    shape = tuple(int(d) for d in shape)
    for k, d in enumerate(shape):
        if d > MAX_ELEMENTS:
            raise _C.ShapeError(f"{what}: shape {shape} has dimension {k} = {d}; a dimension is at most "
                                f"{MAX_ELEMENTS} (2^31 - 1)")
    n = 1
    for d in shape:
        n *= d
    if n > MAX_ELEMENTS:
        raise _C.ShapeError(f"{what}: shape {shape} has {n} elements; a tensor holds at most {MAX_ELEMENTS} "
                            "(2^31 - 1)")


def _check_fits(a, dt):
    """Raises ember.TypeError when the values of `a` do not fit in `dt` (explicit conversion)."""
    if a.size == 0 or dt is D.bool:
        return
    if dt is D.f32:
        if a.dtype.kind == "f" and a.dtype.itemsize > 4:
            finite = a[np.isfinite(a)]
            if finite.size and float(np.max(np.abs(finite))) > _F32_MAX:
                raise _C.TypeError("em.tensor: values overflow float32")
        return
    lo, hi = (_I32.min, _I32.max) if dt is D.i32 else (_U32.min, _U32.max)
    if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        raise _C.TypeError(f"em.tensor: non-finite values cannot convert to {dt.name}")
    mn, mx = a.min(), a.max()
    if mn < lo or mx > hi:
        raise _C.TypeError(f"em.tensor: values in [{mn}, {mx}] do not fit in {dt.name}")


def _default_dtype(a):
    k = a.dtype.kind
    if k == "f":
        return D.f32
    if k == "b":
        return D.bool
    if k == "u" and a.dtype.itemsize >= 4:
        return D.u32
    if k in "iu":
        return D.i32
    raise _C.TypeError(f"em.tensor: unsupported NumPy dtype {a.dtype}; expected a float, integer or bool array")


def tensor(data, dtype=None):
    """tensor(data, dtype=None) -> em.Tensor

    A new em.Tensor holding a copy of `data` (an array-like, or another em.Tensor). The dtype is
    `dtype` when given, else derived from the data: floats become f32, integers i32 (u32 for
    uint32/uint64), bools bool. Converting is explicit and checked: a value that does not fit the
    dtype is an ember.TypeError, never silently wrapped.

    >>> a = np.random.default_rng(0).normal(size=(2, 3))
    >>> t = em.tensor(a)
    >>> t.dtype, t.shape, bool(np.array_equal(t.numpy(), a.astype(np.float32)))
    (em.f32, (2, 3), True)
    >>> em.tensor([1, 2, 3], em.u32).numpy().dtype
    dtype('uint32')
    """
    if isinstance(data, Tensor):
        data = data.numpy()
    a = np.asarray(data)
    _check_size("em.tensor", a.shape)
    dt = _default_dtype(a) if dtype is None else D.as_dtype(dtype)
    if a.dtype != dt.np:
        _check_fits(a, dt)
    words = np.array(a, dtype=np.uint32 if dt is D.bool else dt.np, order="C", copy=True)
    return Tensor._from_numpy(words, dt._c, False)


def from_numpy_arg(a, dt):
    """A tensor viewing NumPy array `a` (of dtype `dt` exactly) without a copy when possible: a
    copy is made only for bool (one word per element), non-contiguous or read-only arrays."""
    if dt is D.bool:
        return Tensor._from_numpy(np.ascontiguousarray(a, dtype=np.uint32), dt._c, False)
    if not a.flags.c_contiguous or not a.flags.writeable:
        a = np.array(a, order="C", copy=True)
    return Tensor._from_numpy(a, dt._c, False)


def zeros_tensor(shape, dt):
    """A runtime em.Tensor of zeros."""
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    try:
        dims = [int(d) for d in shape]
    except TypeError:
        raise _C.TypeError(f"em.zeros outside a traced function needs int dimensions, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise _C.ShapeError(f"em.zeros: negative dimension in {tuple(dims)}")
    _check_size("em.zeros", tuple(dims))
    return Tensor._zeros(dims, dt._c)


def _dtype(self):
    """The element type: em.f32, em.i32, em.u32 or em.bool (it compares equal to its name too).

    >>> em.tensor(np.arange(4)).dtype
    em.i32
    """
    return D.from_name(self._dtype_name)


def _array(self, dtype=None, copy=None):
    a = self.numpy()
    return a if dtype is None else a.astype(dtype, copy=False)


def _repr(self):
    body = np.array2string(self.numpy(), separator=", ", threshold=64, prefix="em.Tensor(")
    return f"em.Tensor({body}, dtype={self._dtype_name})"


def _item(self):
    """item() -> float | int | bool

    The value of a one-element tensor as a Python number; ember.ShapeError for any other size.

    >>> @em.compile
    ... def total(x: em.f32["N"]):
    ...     return em.sum(x)
    >>> x = np.random.default_rng(0).normal(size=5).astype(np.float32)
    >>> abs(total(x).item() - float(x.sum())) < 1e-5
    True
    """
    if self.size != 1:
        raise _C.ShapeError(f"only a tensor of one element converts to a Python scalar, got shape {self.shape}")
    return self.numpy().reshape(()).item()


def _tolist(self):
    """tolist() -> list

    The elements as (nested) Python lists of numbers, as numpy.ndarray.tolist.

    >>> em.tensor(np.arange(6, dtype=np.int32).reshape(2, 3)).tolist()
    [[0, 1, 2], [3, 4, 5]]
    """
    return self.numpy().tolist()


def _len(self):
    if not self.shape:
        raise TypeError("len() of a 0-d em.Tensor")
    return self.shape[0]


Tensor.dtype = property(_dtype)
Tensor.__array__ = _array
Tensor.__repr__ = _repr
Tensor.__len__ = _len
Tensor.item = _item
Tensor.tolist = _tolist
Tensor.__float__ = lambda self: float(_item(self))
Tensor.__int__ = lambda self: int(_item(self))
Tensor.__bool__ = lambda self: bool(_item(self))
