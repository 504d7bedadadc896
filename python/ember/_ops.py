"""Traced functions: elementwise math, casts, reductions, index tensors and shape helpers.

All of them take traced values or Python numbers (typed weakly against the values, as NumPy
does) and return em.Value. They can only be called while a function is being traced.
"""
import builtins

import numpy as np

from . import _ember as _C
from . import _dtypes as D
from . import _tracing as T
from ._tensor import tensor as _tensor
from ._value import Value

Op = _C.Op
RK = _C.ReduceKind


_UNARY_EXAMPLE = """

>>> @em.compile
... def f(x: em.f32["N"]):
...     return em.{name}(x)
>>> x = {x}
>>> bool({check})
True
"""


def _unary_fn(op, name, doc, ref, lo=-2.0, hi=2.0, x=None):
    """An elementwise function em.<name>(x); its docstring gets a signature line and an example
    that checks it against the NumPy expression `ref` (of x) on random x in [lo, hi), or exactly
    on the array expression `x` (bool results)."""
    def fn(x):
        tr = T.tracer(f"em.{name}")
        return Value(tr.unary(op, T.node_of(tr, x)))
    fn.__name__ = fn.__qualname__ = name
    if x is None:
        x = f"np.random.default_rng(0).uniform({lo}, {hi}, 6).astype(np.float32)"
        check = f"np.allclose(f(x).numpy(), {ref}, rtol=1e-5, atol=1e-6)"
    else:
        check = f"np.array_equal(f(x).numpy(), {ref})"
    fn.__doc__ = f"{name}(x) -> em.Value\n\n{doc}" + _UNARY_EXAMPLE.format(name=name, x=x, check=check)
    return fn


def _binary(op, a, b, what):
    tr = T.tracer(what)
    na, nb = T.nodes(tr, a, b)
    return Value(tr.binary(op, na, nb))


abs = _unary_fn(Op.abs, "abs", "Absolute value, elementwise.", "np.abs(x)")
sign = _unary_fn(Op.sign, "sign", "-1, 0 or 1 by the sign of x, elementwise.", "np.sign(x)")
floor = _unary_fn(Op.floor, "floor", "Rounds down, elementwise (integers unchanged).", "np.floor(x)")
ceil = _unary_fn(Op.ceil, "ceil", "Rounds up, elementwise.", "np.ceil(x)")
round = _unary_fn(Op.round, "round", "Rounds to nearest, ties to even (as NumPy), elementwise.", "np.round(x)",
                  -5.0, 5.0)
trunc = _unary_fn(Op.trunc, "trunc", "Rounds toward zero, elementwise.", "np.trunc(x)", -5.0, 5.0)
frac = _unary_fn(Op.frac, "frac", "x - floor(x), elementwise.", "x - np.floor(x)", -5.0, 5.0)
exp = _unary_fn(Op.exp, "exp", "e**x, elementwise (integers convert to f32).", "np.exp(x)")
exp2 = _unary_fn(Op.exp2, "exp2", "2**x, elementwise.", "np.exp2(x)")
log = _unary_fn(Op.log, "log", "Natural logarithm, elementwise.", "np.log(x)", 0.1, 10.0)
log2 = _unary_fn(Op.log2, "log2", "Base-2 logarithm, elementwise.", "np.log2(x)", 0.1, 10.0)
sqrt = _unary_fn(Op.sqrt, "sqrt", "Square root, elementwise.", "np.sqrt(x)", 0.0, 4.0)
rsqrt = _unary_fn(Op.rsqrt, "rsqrt", "1 / sqrt(x), elementwise.", "1 / np.sqrt(x)", 0.1, 4.0)
sin = _unary_fn(Op.sin, "sin", "Sine, elementwise.", "np.sin(x)")
cos = _unary_fn(Op.cos, "cos", "Cosine, elementwise.", "np.cos(x)")
tan = _unary_fn(Op.tan, "tan", "Tangent, elementwise.", "np.tan(x)", -1.0, 1.0)
asin = _unary_fn(Op.asin, "asin", "Arcsine, elementwise.", "np.arcsin(x)", -1.0, 1.0)
acos = _unary_fn(Op.acos, "acos", "Arccosine, elementwise.", "np.arccos(x)", -1.0, 1.0)
atan = _unary_fn(Op.atan, "atan", "Arctangent, elementwise.", "np.arctan(x)", -4.0, 4.0)
sinh = _unary_fn(Op.sinh, "sinh", "Hyperbolic sine, elementwise.", "np.sinh(x)")
cosh = _unary_fn(Op.cosh, "cosh", "Hyperbolic cosine, elementwise.", "np.cosh(x)")
tanh = _unary_fn(Op.tanh, "tanh", "Hyperbolic tangent, elementwise.", "np.tanh(x)")
isnan = _unary_fn(Op.isnan, "isnan", "Whether x is NaN, elementwise (bool).", "np.isnan(x)",
                  x="np.array([1, np.nan, np.inf, -2], np.float32)")
isinf = _unary_fn(Op.isinf, "isinf", "Whether x is +-infinity, elementwise (bool).", "np.isinf(x)",
                  x="np.array([1, np.nan, np.inf, -np.inf], np.float32)")


def atan2(y, x):
    """atan2(y, x) -> em.Value

    The angle of the point (x, y) in radians, in [-pi, pi], elementwise with broadcasting, as
    numpy.arctan2 (note the order: y first).

    >>> @em.compile
    ... def angle(y: em.f32["N"], x: em.f32["N"]):
    ...     return em.atan2(y, x)
    >>> rng = np.random.default_rng(0)
    >>> y, x = rng.normal(size=(2, 6)).astype(np.float32)
    >>> bool(np.allclose(angle(y, x).numpy(), np.arctan2(y, x), atol=1e-6))
    True
    """
    return _binary(Op.atan2, y, x, "em.atan2")


def pow(x, y):
    """pow(x, y) -> em.Value

    x ** y, elementwise with broadcasting (the ``**`` operator); the result is f32 (integers convert).

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.pow(x, 1.5)
    >>> x = np.random.default_rng(0).uniform(0, 3, 6).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), x ** 1.5, rtol=1e-5))
    True
    """
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
    """max(a, b=None, *, axis=None, keepdims=False) -> em.Value

    Two forms: ``em.max(a, b)`` is the elementwise maximum (with broadcasting; Python numbers are
    typed after the other operand), ``em.max(x, axis=..., keepdims=...)`` the largest element over
    the given axes (an int, a tuple, or None for all of them).

    >>> @em.compile
    ... def f(x: em.f32["N", 4]):
    ...     return em.max(x, 0.0), em.max(x, axis=1)
    >>> x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    >>> relu, row_max = f(x)
    >>> bool(np.array_equal(relu.numpy(), np.maximum(x, 0))), bool(np.array_equal(row_max.numpy(), x.max(1)))
    (True, True)
    """
    if b is not None:
        if axis is not None:
            raise T.error(_C.TypeError, "em.max(a, b) is elementwise; use em.max(x, axis=...) to reduce")
        return _binary(Op.max, a, b, "em.max")
    return _reduce(RK.max, a, axis, keepdims, "em.max")


def min(a, b=None, *, axis=None, keepdims=False):
    """min(a, b=None, *, axis=None, keepdims=False) -> em.Value

    ``em.min(a, b)``: the elementwise minimum; ``em.min(x, axis=..., keepdims=...)``: the smallest
    element over the axes (all when None), as numpy.minimum / numpy.min.

    >>> @em.compile
    ... def f(x: em.f32["N", 4]):
    ...     return em.min(x, 1.0), em.min(x, axis=0, keepdims=True)
    >>> x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    >>> a, b = f(x)
    >>> bool(np.array_equal(a.numpy(), np.minimum(x, 1))), b.shape
    (True, (1, 4))
    """
    if b is not None:
        if axis is not None:
            raise T.error(_C.TypeError, "em.min(a, b) is elementwise; use em.min(x, axis=...) to reduce")
        return _binary(Op.min, a, b, "em.min")
    return _reduce(RK.min, a, axis, keepdims, "em.min")


def sum(x, axis=None, keepdims=False):
    """sum(x, axis=None, keepdims=False) -> em.Value

    The sum over the axes (an int, a tuple of ints, or None for every element); ``keepdims=True``
    keeps the reduced axes with size 1 so the result broadcasts against x. bool sums to i32.

    >>> @em.compile
    ... def f(x: em.f32["N", 3]):
    ...     return em.sum(x, axis=1), em.sum(x)
    >>> x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    >>> rows, total = f(x)
    >>> bool(np.allclose(rows.numpy(), x.sum(1), atol=1e-5)), bool(np.isclose(total.item(), x.sum(), atol=1e-5))
    (True, True)
    """
    return _reduce(RK.sum, x, axis, keepdims, "em.sum")


def prod(x, axis=None, keepdims=False):
    """prod(x, axis=None, keepdims=False) -> em.Value

    The product of the elements over the axes (all when None), as numpy.prod.

    >>> @em.compile
    ... def f(x: em.f32["N", 3]):
    ...     return em.prod(x, axis=0)
    >>> x = np.random.default_rng(0).uniform(0.5, 2, (4, 3)).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), x.prod(0), rtol=1e-5))
    True
    """
    return _reduce(RK.prod, x, axis, keepdims, "em.prod")


def mean(x, axis=None, keepdims=False):
    """mean(x, axis=None, keepdims=False) -> em.Value

    The arithmetic mean over the axes (all when None); always f32, also for integer x.

    >>> @em.compile
    ... def center(x: em.f32["N", 3]):
    ...     return x - em.mean(x, axis=0, keepdims=True)
    >>> x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    >>> bool(np.allclose(center(x).numpy().mean(0), 0, atol=1e-6))
    True
    """
    return _reduce(None, x, axis, keepdims, "em.mean")


def any(x, axis=None, keepdims=False):
    """any(x, axis=None, keepdims=False) -> em.Value

    Whether any element over the axes is nonzero (True), as numpy.any; a bool result.

    >>> @em.compile
    ... def f(x: em.f32["N", 3]):
    ...     return em.any(x > 1.0, axis=1)
    >>> x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), (x > 1).any(1)))
    True
    """
    return _reduce(RK.any, x, axis, keepdims, "em.any")


def all(x, axis=None, keepdims=False):
    """all(x, axis=None, keepdims=False) -> em.Value

    Whether every element over the axes is nonzero (True), as numpy.all; a bool result.

    >>> @em.compile
    ... def f(x: em.f32["N", 3]):
    ...     return em.all(x > -1.0, axis=1)
    >>> x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), (x > -1).all(1)))
    True
    """
    return _reduce(RK.all, x, axis, keepdims, "em.all")


def norm(x, axis=None, keepdims=False):
    """norm(x, axis=None, keepdims=False) -> em.Value

    sqrt(sum(x * x)) over the axes (all when None), f32: the 2-norm of vectors and the Frobenius
    norm of matrices (numpy.linalg.norm's default).

    >>> @em.compile
    ... def lengths(v: em.f32["N", 3]):
    ...     return em.norm(v, axis=1)
    >>> v = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    >>> bool(np.allclose(lengths(v).numpy(), np.linalg.norm(v, axis=1), rtol=1e-5))
    True
    """
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
    """argmax(x, axis=None, keepdims=False) -> em.Value

    The index (i32) of the first maximum along `axis`, or in the flattened x when None, as
    numpy.argmax (a NaN counts as the maximum, so the first NaN wins).

    >>> @em.compile
    ... def f(x: em.f32["N", 5]):
    ...     return em.argmax(x, axis=1)
    >>> x = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    >>> f(x).numpy().tolist() == x.argmax(1).tolist()
    True
    """
    return _arg_reduce(RK.argmax, x, axis, keepdims, "em.argmax")


def argmin(x, axis=None, keepdims=False):
    """argmin(x, axis=None, keepdims=False) -> em.Value

    The index (i32) of the first minimum along `axis`, or in the flattened x when None, as
    numpy.argmin (a NaN counts as the minimum, so the first NaN wins).

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.argmin(x)
    >>> x = np.random.default_rng(0).normal(size=7).astype(np.float32)
    >>> f(x).item() == int(x.argmin())
    True
    """
    return _arg_reduce(RK.argmin, x, axis, keepdims, "em.argmin")


def prefix_sum(x, axis=-1):
    """prefix_sum(x, axis=-1) -> em.Value

    The inclusive running sum along `axis`, as numpy.cumsum with an axis (bool sums as i32). It runs
    as a blocked parallel scan: per-block scans, a scan of the block totals, then block offsets.

    >>> @em.compile
    ... def f(x: em.i32["N"]):
    ...     return em.prefix_sum(x)
    >>> x = np.random.default_rng(0).integers(0, 10, 9).astype(np.int32)
    >>> bool(np.array_equal(f(x).numpy(), np.cumsum(x)))
    True
    """
    tr = T.tracer("em.prefix_sum")
    if isinstance(axis, builtins.bool) or not hasattr(axis, "__index__"):
        raise T.error(_C.TypeError, f"em.prefix_sum: axis must be an int, got {axis!r}")
    return Value(tr.prefix_sum(T.node_of(tr, x), int(axis)))


def matmul(a, b):
    """matmul(a, b) -> em.Value

    The matrix product, as numpy.matmul and the ``@`` operator: 1-D operands are promoted to a
    row/column and the added axis removed; leading (batch) dims broadcast. It is a sum over the
    shared axis of a broadcast product, which fuses into one loop.

    >>> @em.compile
    ... def f(a: em.f32["M", "K"], b: em.f32["K", "N"]):
    ...     return em.matmul(a, b)
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)
    >>> bool(np.allclose(f(a, b).numpy(), a @ b, atol=1e-5))
    True
    """
    tr = T.tracer("em.matmul")
    na, nb = T.nodes(tr, a, b)
    return Value(tr.matmul(na, nb))


def dot(a, b):
    """dot(a, b) -> em.Value

    numpy.dot: the inner product of vectors, the matrix product of 2-D arrays, a product with a
    scalar, and for N-D operands a sum over the last axis of a and the second-to-last of b.

    >>> @em.compile
    ... def f(a: em.f32["N"], b: em.f32["N"]):
    ...     return em.dot(a, b)
    >>> a, b = np.random.default_rng(0).normal(size=(2, 8)).astype(np.float32)
    >>> bool(np.isclose(f(a, b).item(), np.dot(a, b), atol=1e-5))
    True
    """
    tr = T.tracer("em.dot")
    na, nb = T.nodes(tr, a, b)
    return Value(tr.dot(na, nb))


def where(cond, a, b):
    """where(cond, a, b) -> em.Value

    a where cond is true, else b, elementwise with broadcasting, as numpy.where with three
    arguments. Both sides are computed; use ``em.if_`` to skip work instead.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.where(x > 0, x, 0.1 * x)
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), np.where(x > 0, x, 0.1 * x)))
    True
    """
    tr = T.tracer("em.where")
    nc = T.node_of(tr, cond)
    na, nb = T.nodes(tr, a, b)
    return Value(tr.select(nc, na, nb))


def clamp(x, lo, hi):
    """clamp(x, lo, hi) -> em.Value

    min(max(x, lo), hi), elementwise (GLSL clamp, numpy.clip); lo and hi broadcast.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.clamp(x, -0.5, 0.5)
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), np.clip(x, -0.5, 0.5)))
    True
    """
    return min(max(x, lo), hi)


def lerp(a, b, t):
    """lerp(a, b, t) -> em.Value

    Linear interpolation a + (b - a) * t, elementwise (GLSL mix): a at t = 0, b at t = 1.

    >>> @em.compile
    ... def f(a: em.f32["N"], b: em.f32["N"], t: em.f32):
    ...     return em.lerp(a, b, t)
    >>> a, b = np.random.default_rng(0).normal(size=(2, 5)).astype(np.float32)
    >>> bool(np.allclose(f(a, b, 0.25).numpy(), a + (b - a) * 0.25))
    True
    """
    return a + (b - a) * t


def smoothstep(edge0, edge1, x):
    """smoothstep(edge0, edge1, x) -> em.Value

    GLSL smoothstep: 0 below edge0, 1 above edge1, and the Hermite curve t * t * (3 - 2t) of
    t = (x - edge0) / (edge1 - edge0) in between, elementwise.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.smoothstep(0.0, 1.0, x)
    >>> x = np.random.default_rng(0).uniform(-0.5, 1.5, 6).astype(np.float32)
    >>> t = np.clip(x, 0, 1)
    >>> bool(np.allclose(f(x).numpy(), t * t * (3 - 2 * t), atol=1e-6))
    True
    """
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def step(edge, x):
    """step(edge, x) -> em.Value

    GLSL step: 0.0 where x < edge, else 1.0 (f32), elementwise.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.step(0.0, x)
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), (x >= 0).astype(np.float32)))
    True
    """
    return where(x < edge, 0.0, 1.0)


def fma(a, b, c):
    """fma(a, b, c) -> em.Value

    a * b + c, elementwise with broadcasting (the backends may fuse it into one instruction).

    >>> @em.compile
    ... def f(a: em.f32["N"], b: em.f32["N"]):
    ...     return em.fma(a, b, 1.0)
    >>> a, b = np.random.default_rng(0).normal(size=(2, 5)).astype(np.float32)
    >>> bool(np.allclose(f(a, b).numpy(), a * b + 1, atol=1e-6))
    True
    """
    return a * b + c


def cast(x, dtype):
    """cast(x, dtype) -> em.Value | em.Tensor | number

    Converts x to `dtype` by value (``em.f32(x)``, ``em.i32(x)`` ... are the same): f32 to i32
    rounds toward zero, as a C cast. Outside a traced function it converts a Python number, or makes
    an em.Tensor from an array.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.cast(x, em.i32)
    >>> x = np.random.default_rng(0).uniform(-9, 9, 6).astype(np.float32)
    >>> r = f(x)
    >>> r.dtype, bool(np.array_equal(r.numpy(), x.astype(np.int32)))
    (em.i32, True)
    """
    dt = D.as_dtype(dtype)
    tr = T.active()
    if tr is None:
        if T.is_scalar(x):
            return builtins.bool(x) if dt is D.bool else (float(x) if dt is D.f32 else int(x))
        return _tensor(x, dt)
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
    """bitcast(x, dtype) -> em.Value

    Reinterprets the 32-bit words of x as `dtype` (for example the bits of an f32 as u32), as
    numpy's ``.view``; bool has no bits and cannot be bitcast.

    >>> @em.compile
    ... def bits(x: em.f32["N"]):
    ...     return em.bitcast(x, em.u32)
    >>> x = np.random.default_rng(0).normal(size=4).astype(np.float32)
    >>> bool(np.array_equal(bits(x).numpy(), x.view(np.uint32)))
    True
    """
    tr = T.tracer("em.bitcast")
    dt = D.as_dtype(dtype)
    return Value(tr.bitcast(T.node_of(tr, x), dt._c))


def indices(shape):
    """indices(shape) -> tuple of em.Value

    Index tensors of `shape`, one i32 tensor per axis, as numpy.indices: the k-th holds each
    element's coordinate along axis k. Dimensions are ints or scalar integer values (X.shape[0]).

    >>> @em.compile
    ... def checker(img: em.f32["H", "W"]):
    ...     i, j = em.indices(img.shape)
    ...     return em.where((i + j) % 2 == 0, img, 0.0)
    >>> img = np.random.default_rng(0).random((3, 4), np.float32)
    >>> i, j = np.indices((3, 4))
    >>> bool(np.array_equal(checker(img).numpy(), np.where((i + j) % 2 == 0, img, 0)))
    True
    """
    tr = T.tracer("em.indices")
    dims = T.shape_nodes(tr, shape)
    return tuple(Value(tr.indices(dims, a)) for a in range(len(dims)))


def broadcast_to(x, shape):
    """broadcast_to(x, shape) -> em.Value

    x broadcast to `shape` by NumPy's rules (size-1 and missing leading axes repeat), as
    numpy.broadcast_to.

    >>> @em.compile
    ... def f(row: em.f32[4]):
    ...     return em.broadcast_to(row, (3, 4))
    >>> row = np.random.default_rng(0).normal(size=4).astype(np.float32)
    >>> bool(np.array_equal(f(row).numpy(), np.broadcast_to(row, (3, 4))))
    True
    """
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
    """reshape(x, shape) -> em.Value

    x with a new shape of the same size, in row-major order, as numpy.reshape. One dimension may
    be -1 (inferred); dimensions may be symbolic (scalar integer values such as X.shape[0]).

    >>> @em.compile
    ... def f(x: em.f32["N", 6]):
    ...     return em.reshape(x, (-1, 2, 3))
    >>> x = np.random.default_rng(0).normal(size=(2, 6)).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), x.reshape(-1, 2, 3)))
    True
    """
    tr = T.tracer("em.reshape")
    n = T.node_of(tr, x)
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    dims = [None if isinstance(d, (int, np.integer)) and not isinstance(d, builtins.bool) and d == -1
            else T.shape_nodes(tr, d)[0] for d in shape]
    return Value(tr.reshape(n, dims))


def transpose(x, axes=None):
    """transpose(x, axes=None) -> em.Value

    Permutes the axes (reverses them when `axes` is None), as numpy.transpose; ``x.T`` is the
    reversed form.

    >>> @em.compile
    ... def f(x: em.f32[2, 3, 4]):
    ...     return em.transpose(x, (2, 0, 1))
    >>> x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), x.transpose(2, 0, 1)))
    True
    """
    tr = T.tracer("em.transpose")
    n = T.node_of(tr, x)
    if axes is not None and len(_axes(axes)) != n.rank:
        raise T.error(_C.ShapeError, f"em.transpose: {len(_axes(axes))} axes for a value of rank {n.rank}")
    return Value(tr.transpose(n, _axes(axes)))  # [] reverses the axes


def unsqueeze(x, axis):
    """unsqueeze(x, axis) -> em.Value

    x with a new axis of size 1 at `axis` (``x[:, None]`` for axis=1), as numpy.expand_dims.

    >>> @em.compile
    ... def f(x: em.f32["N", 3]):
    ...     return em.unsqueeze(x, 1)
    >>> x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    >>> f(x).shape
    (2, 1, 3)
    """
    tr = T.tracer("em.unsqueeze")
    n = T.node_of(tr, x)
    return Value(tr.unsqueeze(n, _axis(axis)))


def squeeze(x, axis=None):
    """squeeze(x, axis=None) -> em.Value

    x without its axes of (fixed) size 1, or without only the given one(s), as numpy.squeeze.

    >>> @em.compile
    ... def f(x: em.f32[1, 4, 1]):
    ...     return em.squeeze(x)
    >>> x = np.random.default_rng(0).normal(size=(1, 4, 1)).astype(np.float32)
    >>> r = f(x)
    >>> r.shape, bool(np.array_equal(r.numpy(), x.ravel()))
    ((4,), True)
    """
    tr = T.tracer("em.squeeze")
    n = T.node_of(tr, x)
    axes = _axes(axis)
    if axis is not None and not axes:
        return Value(n)  # axis=() squeezes nothing
    return Value(tr.squeeze(n, axes))


def concat(xs, axis=0):
    """concat(xs, axis=0) -> em.Value

    Joins a list of tensors along an existing axis, as numpy.concatenate (axis=None joins them
    flattened). The other dimensions must match; dtypes promote.

    >>> @em.compile
    ... def f(a: em.f32["N", 2], b: em.f32["N", 3]):
    ...     return em.concat([a, b], axis=1)
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(size=(4, 2)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
    >>> bool(np.array_equal(f(a, b).numpy(), np.concatenate([a, b], axis=1)))
    True
    """
    tr = T.tracer("em.concat")
    ns = T.nodes(tr, *xs)
    if axis is None:
        ns = [tr.reshape(n, [None]) for n in ns]
        axis = 0
    return Value(tr.concat(ns, _axis(axis)))


def stack(xs, axis=0):
    """stack(xs, axis=0) -> em.Value

    Joins tensors of equal shape along a new axis, as numpy.stack.

    >>> @em.compile
    ... def f(x: em.f32["N"], y: em.f32["N"]):
    ...     return em.stack([x, y, x + y], axis=1)
    >>> x, y = np.random.default_rng(0).normal(size=(2, 5)).astype(np.float32)
    >>> bool(np.allclose(f(x, y).numpy(), np.stack([x, y, x + y], axis=1)))
    True
    """
    tr = T.tracer("em.stack")
    return Value(tr.stack(T.nodes(tr, *xs), _axis(axis)))


def repeat(x, repeats, axis=None):
    """repeat(x, repeats, axis=None) -> em.Value

    Repeats each element `repeats` times (an int) along `axis`, as numpy.repeat; axis None repeats
    the flattened x.

    >>> @em.compile
    ... def f(x: em.f32["N", 2]):
    ...     return em.repeat(x, 3, axis=0)
    >>> x = np.random.default_rng(0).normal(size=(2, 2)).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), np.repeat(x, 3, axis=0)))
    True
    """
    tr = T.tracer("em.repeat")
    n = T.node_of(tr, x)
    if isinstance(repeats, builtins.bool) or not isinstance(repeats, (int, np.integer)):
        raise T.error(_C.TypeError, f"em.repeat needs an int count, got {type(repeats).__name__}")
    return Value(tr.repeat(n, int(repeats), None if axis is None else _axis(axis)))


def flip(x, axis=None):
    """flip(x, axis=None) -> em.Value

    Reverses the order of the elements along the axes (all when None), as numpy.flip.

    >>> @em.compile
    ... def f(x: em.f32["H", "W"]):
    ...     return em.flip(x, axis=1)
    >>> x = np.random.default_rng(0).normal(size=(2, 5)).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), x[:, ::-1]))
    True
    """
    tr = T.tracer("em.flip")
    n = T.node_of(tr, x)
    axes = _axes(axis)
    if axis is not None and not axes:
        return Value(n)
    return Value(tr.flip(n, axes))
