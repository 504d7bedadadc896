"""Traced functions: elementwise math, casts, reductions, index tensors and shape helpers.

All of them take traced values or Python numbers (typed weakly against the values, as NumPy
does) and return em.Value. They can only be called while a function is being traced.
"""
import builtins

import numpy as np

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


def norm(x, axis=None, keepdims=False):
    """sqrt(sum(x * x)) over the axes (all when None), f32: the 2-norm of vectors and the
    Frobenius norm of matrices (numpy.linalg.norm's default)."""
    tr = T.tracer("em.norm")
    n = T.node_of(tr, x)
    axes = [] if axis is None else [int(a) for a in (axis if isinstance(axis, (tuple, list)) else [axis])]
    if axis is not None and not axes:  # axis=() reduces nothing: |x|
        return Value(tr.unary(Op.abs, tr.cast(n, D.f32._c)))
    return Value(tr.norm(n, axes, keepdims))


def _arg_reduce(kind, x, axis, keepdims, what):
    if axis is not None and (isinstance(axis, builtins.bool) or not hasattr(axis, "__index__")):
        raise T.error(_C.TypeError, f"{what}: axis must be an int or None (flattened), got {axis!r}")
    return _reduce(kind, x, axis, keepdims, what)


def argmax(x, axis=None, keepdims=False):
    """Index (i32) of the first maximum along `axis`, or in the flattened x when None, as
    numpy.argmax (a NaN counts as the maximum, so the first NaN wins)."""
    return _arg_reduce(RK.argmax, x, axis, keepdims, "em.argmax")


def argmin(x, axis=None, keepdims=False):
    """Index (i32) of the first minimum along `axis`, or in the flattened x when None, as
    numpy.argmin (a NaN counts as the minimum, so the first NaN wins)."""
    return _arg_reduce(RK.argmin, x, axis, keepdims, "em.argmin")


def prefix_sum(x, axis=-1):
    """Inclusive running sum along `axis` (as numpy.cumsum with an axis; bool sums as i32). Runs as
    a blocked parallel scan: per-block scans, a scan of the block totals, then block offsets."""
    tr = T.tracer("em.prefix_sum")
    if isinstance(axis, builtins.bool) or not hasattr(axis, "__index__"):
        raise T.error(_C.TypeError, f"em.prefix_sum: axis must be an int, got {axis!r}")
    return Value(tr.prefix_sum(T.node_of(tr, x), int(axis)))


def matmul(a, b):
    """Matrix product as numpy.matmul (the @ operator): 1-D operands are promoted to a row/column
    and the added axis removed; leading (batch) dims broadcast. A sum over the shared axis of a
    broadcast product, which fuses into one loop."""
    tr = T.tracer("em.matmul")
    na, nb = T.nodes(tr, a, b)
    return Value(tr.matmul(na, nb))


def dot(a, b):
    """numpy.dot: the inner product of vectors, the matrix product of 2-D arrays, a product with a
    scalar, and for N-D operands a sum over the last axis of a and the second-to-last of b."""
    tr = T.tracer("em.dot")
    na, nb = T.nodes(tr, a, b)
    return Value(tr.dot(na, nb))


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
    n = T.node_of(tr, x)
    dims = T.shape_nodes(tr, shape)
    if n.rank == 0 and dims:  # a scalar takes the shape too (as in NumPy), not only its values
        return Value(tr.spread(n, dims))
    return Value(tr.broadcast_to(n, dims))


def _axes(axis):
    """An axis argument (None, an int or a sequence of ints) as a list of ints (None: [])."""
    if axis is None:
        return []
    if isinstance(axis, (tuple, list)):
        return [_axis(a) for a in axis]
    return [_axis(axis)]


def _axis(a):
    if isinstance(a, builtins.bool) or not isinstance(a, (int, np.integer)):
        raise T.error(_C.TypeError, f"an axis must be an int, got {a!r}")
    return int(a)


def reshape(x, shape):
    """x with a new shape of the same size, in row-major order (as numpy.reshape). One dimension
    may be -1 (inferred); dimensions may be symbolic (scalar integer Values such as X.shape[0])."""
    tr = T.tracer("em.reshape")
    n = T.node_of(tr, x)
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    dims = [None if isinstance(d, (int, np.integer)) and not isinstance(d, builtins.bool) and d == -1
            else T.shape_nodes(tr, d)[0] for d in shape]
    return Value(tr.reshape(n, dims))


def transpose(x, axes=None):
    """Permutes the axes (reverses them when `axes` is None), as numpy.transpose."""
    tr = T.tracer("em.transpose")
    n = T.node_of(tr, x)
    if axes is not None and len(_axes(axes)) != n.rank:
        raise T.error(_C.ShapeError, f"em.transpose: {len(_axes(axes))} axes for a value of rank {n.rank}")
    return Value(tr.transpose(n, _axes(axes)))  # [] reverses the axes


def unsqueeze(x, axis):
    """x with a new axis of size 1 at `axis` (x[:, None] for axis=1), as numpy.expand_dims."""
    tr = T.tracer("em.unsqueeze")
    n = T.node_of(tr, x)
    return Value(tr.unsqueeze(n, _axis(axis)))


def squeeze(x, axis=None):
    """x without its axes of (fixed) size 1, or only the given one(s), as numpy.squeeze."""
    tr = T.tracer("em.squeeze")
    n = T.node_of(tr, x)
    axes = _axes(axis)
    if axis is not None and not axes:
        return Value(n)  # axis=() squeezes nothing
    return Value(tr.squeeze(n, axes))


def concat(xs, axis=0):
    """Joins tensors along an existing axis (as numpy.concatenate; axis=None joins them
    flattened). The other dimensions must match; dtypes promote."""
    tr = T.tracer("em.concat")
    ns = T.nodes(tr, *xs)
    if axis is None:
        ns = [tr.reshape(n, [None]) for n in ns]
        axis = 0
    return Value(tr.concat(ns, _axis(axis)))


def stack(xs, axis=0):
    """Joins tensors of equal shape along a new axis (as numpy.stack)."""
    tr = T.tracer("em.stack")
    return Value(tr.stack(T.nodes(tr, *xs), _axis(axis)))


def repeat(x, repeats, axis=None):
    """Repeats each element `repeats` times along `axis` (as numpy.repeat with an int count;
    axis None repeats the flattened x)."""
    tr = T.tracer("em.repeat")
    n = T.node_of(tr, x)
    if isinstance(repeats, builtins.bool) or not isinstance(repeats, (int, np.integer)):
        raise T.error(_C.TypeError, f"em.repeat needs an int count, got {type(repeats).__name__}")
    return Value(tr.repeat(n, int(repeats), None if axis is None else _axis(axis)))


def flip(x, axis=None):
    """Reverses the order of elements along the axes (all when None), as numpy.flip."""
    tr = T.tracer("em.flip")
    n = T.node_of(tr, x)
    axes = _axes(axis)
    if axis is not None and not axes:
        return Value(n)
    return Value(tr.flip(n, axes))
