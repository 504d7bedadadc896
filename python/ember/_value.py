"""em.Value: a traced value (a handle to an IR node) with NumPy-like operators, indexing and
shape; em.Var: a mutable traced value (em.var) read and written through `.val`."""
import numpy as np

from . import _ember as _C
from . import _dtypes as D
from . import _tracing as T

Op = _C.Op


def _bin(op, a, b):
    tr = T.tracer()
    na, nb = T.nodes(tr, a, b)
    return Value(tr.binary(op, na, nb))


def _truediv(a, b):
    tr = T.tracer()
    na, nb = T.nodes(tr, a, b)
    if na.dtype != "f32":  # true division of integers is f32, as in NumPy
        na = tr.cast(na, D.f32._c)
    if nb.dtype != "f32":
        nb = tr.cast(nb, D.f32._c)
    return Value(tr.binary(Op.div, na, nb))


def _floordiv(a, b):
    tr = T.tracer()
    na, nb = T.nodes(tr, a, b)
    if D.promote(na.dtype, nb.dtype) == "f32":
        return Value(tr.unary(Op.floor, tr.binary(Op.div, na, nb)))
    return Value(tr.binary(Op.div, na, nb))  # integer div has floor semantics


def _index_items(tr, x, key):
    """Converts a Python index expression into Tracer index items (nodes, slices, None, ...)."""
    if not isinstance(key, tuple):
        key = (key,)
    rank = x.node.rank
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    dims = x.node.dims
    items, axis = [], 0
    for k in key:
        if k is Ellipsis:
            items.append(Ellipsis)
            axis += max(rank - consumed, 0)
        elif k is None:
            items.append(None)
        elif isinstance(k, slice):
            for b in (k.start, k.stop, k.step):
                if b is not None and (not isinstance(b, (int, np.integer)) or isinstance(b, (bool, np.bool_))):
                    raise T.error(_C.TypeError, f"slice bounds must be Python ints or None, got {b!r}")
            items.append(slice(*(None if b is None else int(b) for b in (k.start, k.stop, k.step))))
            axis += 1
        elif isinstance(k, Value):
            items.append(k.node)
            axis += 1
        elif isinstance(k, (bool, np.bool_)):
            raise T.error(_C.TypeError, "a bool cannot be used as an index")
        elif isinstance(k, (int, np.integer)):
            items.append(_int_index(tr, int(k), dims[axis] if axis < rank else None, axis))
            axis += 1
        elif isinstance(k, (float, np.floating)):
            raise T.error(_C.TypeError, f"index {k!r} is a float; indices must be integers")
        else:
            raise T.error(_C.TypeError, f"unsupported index of type {type(k).__name__}; use ints, slices, "
                                        "None, ... or integer traced values")
    return items


def _int_index(tr, k, dim, axis):
    """A constant index; negative ones count from the end as in NumPy."""
    if dim is None:
        return tr.constant(float(k), D.i32._c)
    n = dim.const_value
    if n is not None:
        if not -n <= k < n:
            raise T.error(_C.ShapeError, f"index {k} is out of range for axis {axis} of size {n}")
        return tr.constant(float(k + n if k < 0 else k), D.i32._c)
    if k < 0:
        return tr.binary(Op.add, dim, tr.constant(float(k), D.i32._c))
    return tr.constant(float(k), D.i32._c)


class Value(T.Traced):
    """Value(node)

    A traced tensor or scalar value: what the arguments of a compiled function are while it is
    traced, and what every em operation returns. It supports Python's arithmetic, comparison and
    bitwise operators with NumPy promotion and broadcasting, ``@``, indexing (``A[i, j]`` gathers
    with clamped indices, ``A[i, j] = v`` scatters), ``.shape``, ``.dtype`` and ``.T``. It has no
    Python value at trace time, so ``if v:`` is an error: use ``em.if_`` or em.where. You never make
    one yourself.

    >>> @em.compile
    ... def f(x: em.f32["N", 3]):
    ...     assert isinstance(x, em.Value)
    ...     return (x * 2 + 1)[:, 0]
    >>> x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), x[:, 0] * 2 + 1))
    True
    """

    __slots__ = ()
    __array_ufunc__ = None  # numpy_array + value defers to Value.__radd__
    __array_priority__ = 1000

    @property
    def shape(self):
        """The shape: a tuple with ints for fixed dimensions and scalar i32 values for symbolic ones (use
        them in em.zeros, em.indices, em.loop, ...).

        >>> @em.compile
        ... def f(x: em.f32["N", 3]):
        ...     n, c = x.shape
        ...     assert c == 3 and isinstance(n, em.Value)
        ...     return em.zeros((n,)) + c
        >>> f(np.ones((5, 3), np.float32)).numpy().tolist()
        [3.0, 3.0, 3.0, 3.0, 3.0]
        """
        return tuple(d.const_value if d.const_value is not None else Value(d) for d in self.node.dims)

    @property
    def dtype(self):
        """The element type, an em dtype (em.f32, em.i32, em.u32 or em.bool); it compares equal to its name.

        >>> @em.compile
        ... def f(x: em.i32["N"]):
        ...     assert x.dtype == em.i32 and (x / 2).dtype == "f32"
        ...     return x / 2
        >>> f(np.array([1, 2, 3], np.int32)).numpy().tolist()
        [0.5, 1.0, 1.5]
        """
        return D.from_name(self.node.dtype)

    @property
    def ndim(self):
        """The number of axes (0 for a scalar).

        >>> @em.compile
        ... def f(x: em.f32["N", 3]):
        ...     return em.zeros((x.ndim,))
        >>> f(np.ones((2, 3), np.float32)).shape
        (2,)
        """
        return self.node.rank

    @property
    def T(self):
        """The transpose: the axes reversed (em.transpose(x)).

        >>> @em.compile
        ... def f(x: em.f32["M", "N"]):
        ...     return x.T @ x
        >>> x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
        >>> bool(np.allclose(f(x).numpy(), x.T @ x, atol=1e-5))
        True
        """
        from ._ops import transpose
        return transpose(self)

    def reshape(self, *shape):
        """reshape(*shape) -> em.Value

        em.reshape(self, shape): ``x.reshape(2, -1)`` and ``x.reshape((2, -1))`` both work.

        >>> @em.compile
        ... def f(x: em.f32[6]):
        ...     return x.reshape(2, -1)
        >>> f(np.arange(6, dtype=np.float32)).numpy().tolist()
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        """
        from ._ops import reshape
        return reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    def transpose(self, *axes):
        """transpose(*axes) -> em.Value

        em.transpose(self, axes): ``x.transpose(1, 0)`` and ``x.transpose((1, 0))`` both work; no axes
        reverses them.

        >>> @em.compile
        ... def f(x: em.f32[2, 3, 4]):
        ...     return x.transpose(1, 2, 0)
        >>> f(np.zeros((2, 3, 4), np.float32)).shape
        (3, 4, 2)
        """
        from ._ops import transpose
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        return transpose(self, axes if axes else None)

    def __repr__(self):
        dims = ", ".join(str(d) for d in self.node.shape)
        return f"<em.Value {self.node.dtype}[{dims}] (%{self.node.id} {self.node.op})>"

    def __bool__(self):
        raise T.error(_C.TypeError, "a traced value has no Python truth value at trace time: use "
                                    "`with em.if_(cond):` for control flow or em.where(cond, a, b) to select")

    def __iter__(self):
        raise T.error(_C.TypeError, "cannot iterate over a traced value; use `with em.loop(n) as i:`")

    def __float__(self):
        raise T.error(_C.TypeError, "a traced value has no Python value at trace time; use em.f32(x) to cast")

    __int__ = __index__ = __float__
    __hash__ = object.__hash__

    # Arithmetic.
    def __add__(self, o): return _bin(Op.add, self, o)
    def __radd__(self, o): return _bin(Op.add, o, self)
    def __sub__(self, o): return _bin(Op.sub, self, o)
    def __rsub__(self, o): return _bin(Op.sub, o, self)
    def __mul__(self, o): return _bin(Op.mul, self, o)
    def __rmul__(self, o): return _bin(Op.mul, o, self)
    def __truediv__(self, o): return _truediv(self, o)
    def __rtruediv__(self, o): return _truediv(o, self)
    def __floordiv__(self, o): return _floordiv(self, o)
    def __rfloordiv__(self, o): return _floordiv(o, self)
    def __mod__(self, o): return _bin(Op.mod, self, o)
    def __rmod__(self, o): return _bin(Op.mod, o, self)
    def __pow__(self, o): return _bin(Op.pow, self, o)
    def __rpow__(self, o): return _bin(Op.pow, o, self)
    # Comparisons (elementwise, bool results).
    def __eq__(self, o): return _bin(Op.eq, self, o)
    def __ne__(self, o): return _bin(Op.ne, self, o)
    def __lt__(self, o): return _bin(Op.lt, self, o)
    def __le__(self, o): return _bin(Op.le, self, o)
    def __gt__(self, o): return _bin(Op.gt, self, o)
    def __ge__(self, o): return _bin(Op.ge, self, o)
    # Bitwise (logical on bool).
    def __and__(self, o): return _bin(Op.band, self, o)
    def __rand__(self, o): return _bin(Op.band, o, self)
    def __or__(self, o): return _bin(Op.bor, self, o)
    def __ror__(self, o): return _bin(Op.bor, o, self)
    def __xor__(self, o): return _bin(Op.bxor, self, o)
    def __rxor__(self, o): return _bin(Op.bxor, o, self)
    def __lshift__(self, o): return _bin(Op.shl, self, o)
    def __rlshift__(self, o): return _bin(Op.shl, o, self)
    def __rshift__(self, o): return _bin(Op.shr, self, o)
    def __rrshift__(self, o): return _bin(Op.shr, o, self)
    # Matrix product (em.matmul).
    def __matmul__(self, o):
        from ._ops import matmul
        return matmul(self, o)

    def __rmatmul__(self, o):
        from ._ops import matmul
        return matmul(o, self)

    # Unary.
    def __neg__(self): return Value(T.tracer().unary(Op.neg, self.node))
    def __pos__(self): return self
    def __abs__(self): return Value(T.tracer().unary(Op.abs, self.node))
    def __invert__(self): return Value(T.tracer().unary(Op.bnot, self.node))

    # Indexing.
    def __getitem__(self, key):
        """Gathers (clamped indices); ints, slices, None, ... and integer Values work as in NumPy."""
        tr = T.tracer()
        return Value(tr.gather(self.node, _index_items(tr, self, key)))

    def __setitem__(self, key, value):
        """Scatters `value` into an argument or an em.zeros/em.buffer tensor."""
        tr = T.tracer()
        items = _index_items(tr, self, key)
        tr.scatter(self.node, items, T.node_of(tr, value, self.node.dtype))


class Var(Value):
    """Var(node)

    A mutable traced value made by em.var(init): read it with ``.val`` (or use it directly in
    expressions), assign with ``.val = ...`` or ``.val += ...``. Reading it gives its current value
    at that point of the program, so it carries state through em.loop and ``em.if_`` blocks.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     v = em.var(x)
    ...     assert isinstance(v, em.Var)
    ...     with em.loop(3):
    ...         v.val = v * 2.0
    ...     return v.val
    >>> x = np.random.default_rng(0).normal(size=4).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), 8 * x))
    True
    """

    __slots__ = ()

    @property
    def val(self):
        """The current value (read), or a new value for the rest of the program (assign; converted to
        the var's dtype, Python numbers weakly typed).

        >>> @em.compile
        ... def f(n: em.i32):
        ...     total = em.var(0)
        ...     with em.loop(1, n + 1) as k:
        ...         total.val += k
        ...     return total.val
        >>> f(10).item()
        55
        """
        return Value(self.node)

    @val.setter
    def val(self, value):
        tr = T.tracer()
        tr.set(self.node, T.node_of(tr, value, self.node.dtype))

    def __repr__(self):
        return "<em.Var" + super().__repr__()[len("<em.Value"):]
