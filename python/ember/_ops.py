"""Traced functions: elementwise math, casts, reductions, index tensors and shape helpers.

All of them take traced values or Python numbers (typed weakly against the values, as NumPy
does) and return em.Value. They can only be called while a function is being traced.
"""
import builtins

from . import _ember as _C
from . import _dtypes as D
from . import _tracing as T
from ._value import Value

Op = _C.Op
RK = _C.ReduceKind


def _unary_fn(op, name, doc):
    def fn(x):
        tr = T.tracer(f"em.{name}")
        return Value(tr.unary(op, T.node_of(tr, x)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _binary(op, a, b, what):
    tr = T.tracer(what)
    na, nb = T.nodes(tr, a, b)
    return Value(tr.binary(op, na, nb))


abs = _unary_fn(Op.abs, "abs", "Absolute value, elementwise.")
sign = _unary_fn(Op.sign, "sign", "-1, 0 or 1 by the sign of x, elementwise.")
floor = _unary_fn(Op.floor, "floor", "Rounds down, elementwise (integers unchanged).")
ceil = _unary_fn(Op.ceil, "ceil", "Rounds up, elementwise.")
round = _unary_fn(Op.round, "round", "Rounds to nearest, ties to even (as NumPy), elementwise.")
trunc = _unary_fn(Op.trunc, "trunc", "Rounds toward zero, elementwise.")
frac = _unary_fn(Op.frac, "frac", "x - floor(x), elementwise.")
exp = _unary_fn(Op.exp, "exp", "e**x, elementwise (integers convert to f32).")
exp2 = _unary_fn(Op.exp2, "exp2", "2**x, elementwise.")
log = _unary_fn(Op.log, "log", "Natural logarithm, elementwise.")
log2 = _unary_fn(Op.log2, "log2", "Base-2 logarithm, elementwise.")
sqrt = _unary_fn(Op.sqrt, "sqrt", "Square root, elementwise.")
rsqrt = _unary_fn(Op.rsqrt, "rsqrt", "1 / sqrt(x), elementwise.")
sin = _unary_fn(Op.sin, "sin", "Sine, elementwise.")
cos = _unary_fn(Op.cos, "cos", "Cosine, elementwise.")
tan = _unary_fn(Op.tan, "tan", "Tangent, elementwise.")
asin = _unary_fn(Op.asin, "asin", "Arcsine, elementwise.")
acos = _unary_fn(Op.acos, "acos", "Arccosine, elementwise.")
atan = _unary_fn(Op.atan, "atan", "Arctangent, elementwise.")
sinh = _unary_fn(Op.sinh, "sinh", "Hyperbolic sine, elementwise.")
cosh = _unary_fn(Op.cosh, "cosh", "Hyperbolic cosine, elementwise.")
tanh = _unary_fn(Op.tanh, "tanh", "Hyperbolic tangent, elementwise.")
isnan = _unary_fn(Op.isnan, "isnan", "Whether x is NaN, elementwise (bool).")
isinf = _unary_fn(Op.isinf, "isinf", "Whether x is +-infinity, elementwise (bool).")


def atan2(y, x):
    """Angle of (x, y), elementwise, as numpy.arctan2."""
    return _binary(Op.atan2, y, x, "em.atan2")


def pow(x, y):
    """x ** y, elementwise; the result is f32 (integers convert)."""
    return _binary(Op.pow, x, y, "em.pow")


def _reduce(kind, x, axis, keepdims, what):
    tr = T.tracer(what)
    n = T.node_of(tr, x)
    if axis is None:
        axes = []
    elif isinstance(axis, (tuple, list)):
        axes = [int(a) for a in axis]
        if not axes:
            return Value(n)  # axis=() reduces nothing, as in NumPy
    else:
        axes = [int(axis)]
    if kind is None:
        return Value(tr.mean(n, axes, keepdims))
    return Value(tr.reduce(kind, n, axes, keepdims))


def max(a, b=None, *, axis=None, keepdims=False):
    """em.max(a, b): elementwise maximum. em.max(x, axis=..., keepdims=...): reduction over the
    axes (all when None)."""
    if b is not None:
        if axis is not None:
            raise T.error(_C.TypeError, "em.max(a, b) is elementwise; use em.max(x, axis=...) to reduce")
        return _binary(Op.max, a, b, "em.max")
    return _reduce(RK.max, a, axis, keepdims, "em.max")


def min(a, b=None, *, axis=None, keepdims=False):
    """em.min(a, b): elementwise minimum. em.min(x, axis=..., keepdims=...): reduction."""
    if b is not None:
        if axis is not None:
            raise T.error(_C.TypeError, "em.min(a, b) is elementwise; use em.min(x, axis=...) to reduce")
        return _binary(Op.min, a, b, "em.min")
    return _reduce(RK.min, a, axis, keepdims, "em.min")


def sum(x, axis=None, keepdims=False):
    """Sum over the axes (an int, a tuple, or None for all); bool sums to i32."""
    return _reduce(RK.sum, x, axis, keepdims, "em.sum")


def prod(x, axis=None, keepdims=False):
    """Product over the axes."""
    return _reduce(RK.prod, x, axis, keepdims, "em.prod")


def mean(x, axis=None, keepdims=False):
    """Arithmetic mean over the axes (f32)."""
    return _reduce(None, x, axis, keepdims, "em.mean")


def any(x, axis=None, keepdims=False):
    """Whether any element over the axes is nonzero (bool)."""
    return _reduce(RK.any, x, axis, keepdims, "em.any")


def all(x, axis=None, keepdims=False):
    """Whether every element over the axes is nonzero (bool)."""
    return _reduce(RK.all, x, axis, keepdims, "em.all")


def where(cond, a, b):
    """a where cond else b, elementwise with broadcasting (as numpy.where with three arguments)."""
    tr = T.tracer("em.where")
    nc = T.node_of(tr, cond)
    na, nb = T.nodes(tr, a, b)
    return Value(tr.select(nc, na, nb))


def clamp(x, lo, hi):
    """min(max(x, lo), hi), elementwise."""
    return min(max(x, lo), hi)


def lerp(a, b, t):
    """a + (b - a) * t, elementwise."""
    return a + (b - a) * t


def smoothstep(edge0, edge1, x):
    """GLSL smoothstep: Hermite interpolation 0..1 of x between edge0 and edge1."""
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def step(edge, x):
    """GLSL step: 0.0 where x < edge, else 1.0 (f32)."""
    return where(x < edge, 0.0, 1.0)


def fma(a, b, c):
    """a * b + c, elementwise."""
    return a * b + c


def cast(x, dtype):
    """Converts x to `dtype` by value (em.f32(x) is the same). Outside a trace, converts a Python
    number, or makes an em.Tensor from an array."""
    dt = D.as_dtype(dtype)
    tr = T.active()
    if tr is None:
        if T.is_scalar(x):
            return builtins.bool(x) if dt is D.bool else (float(x) if dt is D.f32 else int(x))
        from ._tensor import tensor
        return tensor(x, dt)
    tr = T.tracer()
    if isinstance(x, Value):
        return x if x.node.dtype == dt.name else Value(tr.cast(x.node, dt._c))
    if T.is_scalar(x):
        if dt is D.f32:
            v = float(x)
        elif dt is D.bool:
            v = 1.0 if x else 0.0
        else:  # wraps to 32 bits like a C cast of an in-range value
            w = int(x) & 0xFFFFFFFF
            v = float(w - (1 << 32) if dt is D.i32 and w >= 1 << 31 else w)
        return Value(tr.constant(v, dt._c))
    return Value(tr.cast(T.node_of(tr, x), dt._c))


def bitcast(x, dtype):
    """Reinterprets the 32-bit words of x as `dtype` (e.g. f32 bits as u32); bool has no bits."""
    tr = T.tracer("em.bitcast")
    dt = D.as_dtype(dtype)
    return Value(tr.bitcast(T.node_of(tr, x), dt._c))


def indices(shape):
    """Index tensors of `shape`, one per axis (as numpy.indices, as a tuple of i32 values)."""
    tr = T.tracer("em.indices")
    dims = T.shape_nodes(tr, shape)
    return tuple(Value(tr.indices(dims, a)) for a in range(len(dims)))


def broadcast_to(x, shape):
    """x broadcast to `shape` (NumPy rules)."""
    tr = T.tracer("em.broadcast_to")
    return Value(tr.broadcast_to(T.node_of(tr, x), T.shape_nodes(tr, shape)))


def transpose(x, axes=None):
    """Permutes the axes (reverses them when `axes` is None), as numpy.transpose."""
    tr = T.tracer("em.transpose")
    n = T.node_of(tr, x)
    r = n.rank
    axes = list(builtins.range(r))[::-1] if axes is None else [int(a) + r if int(a) < 0 else int(a) for a in axes]
    if sorted(axes) != list(builtins.range(r)):
        raise T.error(_C.ShapeError, f"axes {axes} are not a permutation of the {r} axes of the value")
    if axes == list(builtins.range(r)):
        return Value(n)
    dims = n.dims
    out = [dims[a] for a in axes]
    idx = [None] * r
    for k, a in enumerate(axes):
        idx[a] = tr.indices(out, k)
    return Value(tr.gather(n, idx))


def unsqueeze(x, axis):
    """x with a new axis of size 1 at `axis` (x[:, None] for axis=1)."""
    tr = T.tracer("em.unsqueeze")
    n = T.node_of(tr, x)
    a = axis + n.rank + 1 if axis < 0 else axis
    if not 0 <= a <= n.rank:
        raise T.error(_C.ShapeError, f"axis {axis} out of range for a value of rank {n.rank}")
    return Value(tr.gather(n, [slice(None)] * a + [None]))


def squeeze(x, axis=None):
    """x without its axes of (fixed) size 1, or only the given one(s)."""
    tr = T.tracer("em.squeeze")
    n = T.node_of(tr, x)
    dims = [d.const_value for d in n.dims]
    if axis is None:
        axes = [a for a, d in enumerate(dims) if d == 1]
    else:
        axes = [int(a) + n.rank if int(a) < 0 else int(a) for a in (axis if isinstance(axis, (tuple, list)) else [axis])]
        for a in axes:
            if not 0 <= a < n.rank or dims[a] != 1:
                raise T.error(_C.ShapeError, f"cannot squeeze axis {a}: its size is not 1")
    if not axes:
        return Value(n)
    zero = tr.constant(0.0, D.i32._c)
    return Value(tr.gather(n, [zero if a in axes else slice(None) for a in builtins.range(n.rank)]))
