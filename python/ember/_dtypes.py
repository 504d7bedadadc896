"""Element types (em.f32, em.i32, em.u32, em.bool) and argument annotations (em.f32["N", 3]).

A dtype object compares equal to its name, so `t.dtype == em.f32` and `t.dtype == "f32"` both hold.
"""
import builtins

import numpy as np

from . import _ember as _C

_RANK = {"bool": 0, "u32": 1, "i32": 2, "f32": 3}


class DType:
    """DType(name, c, np_dtype)

    An element type: em.f32, em.i32, em.u32 and em.bool are its only instances. ``em.f32["N", 3]``
    is a tensor annotation for a compiled function's parameter (each dimension an int: fixed, a str:
    symbolic, equal names must be equal at call time, or None: free), bare ``em.f32`` a scalar
    annotation, and ``em.f32(x)`` casts (em.cast). A dtype compares equal to its name, and ``.np``
    is the matching NumPy dtype.

    >>> em.f32 == "f32", em.i32.np, em.f32["N", 3]
    (True, dtype('int32'), em.f32['N', 3])
    >>> @em.compile
    ... def scale(x: em.f32["N", 3], k: em.i32):
    ...     return x * em.f32(k)
    >>> x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    >>> bool(np.allclose(scale(x, 3).numpy(), 3 * x))
    True
    """

    __slots__ = ("name", "_c", "np")

    def __init__(self, name, c, np_dtype):
        self.name = name
        self._c = c
        self.np = np.dtype(np_dtype)

    def __getitem__(self, dims):
        """A tensor annotation: each dimension is an int (fixed), a str (symbolic) or None (free)."""
        if not isinstance(dims, tuple):
            dims = (dims,)
        for d in dims:
            ok = d is None or isinstance(d, str) or (isinstance(d, int) and not isinstance(d, builtins.bool) and d >= 0)
            if not ok:
                raise _C.TypeError(f"annotation {self.name}[...]: a dimension must be a non-negative int, "
                                   f"a str (symbolic) or None (free), got {d!r}")
        return TensorType(self, dims)

    def __call__(self, x):
        """Casts `x` to this dtype (a value conversion; see em.bitcast for reinterpreting bits)."""
        from ._ops import cast
        return cast(x, self)

    def __repr__(self):
        return f"em.{self.name}"

    def __str__(self):
        return self.name

    def __eq__(self, other):
        if isinstance(other, str):
            return other == self.name
        return other is self

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (from_name, (self.name,))


class TensorType:
    """TensorType(dtype, dims)

    The annotation of a tensor parameter, made by indexing a dtype: ``em.f32["N", 3]`` has
    ``.dtype`` em.f32 and ``.dims`` ("N", 3). Calls check arguments against it before anything runs.

    >>> t = em.u32["H", "W", 4]
    >>> t.dtype, t.dims, str(t)
    (em.u32, ('H', 'W', 4), 'u32[H, W, 4]')
    """

    __slots__ = ("dtype", "dims")

    def __init__(self, dtype, dims):
        self.dtype = dtype
        self.dims = tuple(dims)

    def __repr__(self):
        return f"em.{self.dtype.name}[{', '.join(repr(d) for d in self.dims)}]"

    def __str__(self):
        return f"{self.dtype.name}[{', '.join('?' if d is None else str(d) for d in self.dims)}]"

    def __eq__(self, other):
        return isinstance(other, TensorType) and other.dtype is self.dtype and other.dims == self.dims

    def __hash__(self):
        return hash((self.dtype.name, self.dims))


f32 = DType("f32", _C.DType.f32, np.float32)
i32 = DType("i32", _C.DType.i32, np.int32)
u32 = DType("u32", _C.DType.u32, np.uint32)
bool = DType("bool", _C.DType.bool, np.bool_)  # noqa: A001 (em.bool is the contract name)

_BY_NAME = {t.name: t for t in (f32, i32, u32, bool)}
_BY_NP = {t.np: t for t in (f32, i32, u32, bool)}


def from_name(name):
    """The dtype object for a name ('f32', 'i32', 'u32', 'bool')."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise _C.TypeError(f"unknown dtype {name!r}; expected one of f32, i32, u32, bool") from None


def as_dtype(x):
    """Accepts an em dtype, its name, a NumPy dtype or the Python types float/int/bool."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        return from_name(x)
    if x is builtins.float:
        return f32
    if x is builtins.int:
        return i32
    if x is builtins.bool:
        return bool
    try:
        return _BY_NP[np.dtype(x)]
    except (TypeError, KeyError):
        raise _C.TypeError(f"unsupported dtype {x!r}; expected em.f32, em.i32, em.u32 or em.bool") from None


def promote(a, b):
    """NumPy-like promotion of two dtype names: f32 > i32 > u32 > bool."""
    return a if _RANK[a] >= _RANK[b] else b
