"""em.nn.functional: layers, activations and losses as plain traced functions.

Every function here is ordinary traced Ember code (elementwise ops, gathers with index tensors,
reductions), so it fuses with what surrounds it and em.grad goes through it. They can only be
called while a function compiled with @em.compile is traced. Layouts and formulas follow
torch.nn.functional: `linear`'s weight is [out, in], `conv2d` is NCHW with weight [O, C, kh, kw],
`layer_norm` uses the biased variance, `gelu` is the exact (erf) form, and `cross_entropy` takes
integer labels and averages over the batch.
"""
import math

import numpy as np

from .. import _ember as _C
from .. import _ops as ops
from .. import _tracing as T
from .._dtypes import f32 as _C_F32, u32 as _C_U32
from .._value import Value

__all__ = ["linear", "conv2d", "embedding", "layer_norm", "relu", "gelu", "sigmoid", "silu", "softmax",
           "log_softmax", "mse_loss", "cross_entropy", "erf", "erfc"]

_INT_TYPES = (int, np.integer)
_BOOL_TYPES = (bool, np.bool_)


# ---- argument checks -------------------------------------------------------------------------
def _value(x, name, what, dtype="f32", rank=None):
    """x as a traced Value of `dtype` (a name or a tuple of names) and, when given, `rank` (an int
    or a tuple of allowed ranks); a clear ember.TypeError / ShapeError otherwise."""
    T.tracer(what)  # outside a trace: "... can only be used inside a function compiled with @em.compile"
    if not isinstance(x, Value):
        raise T.error(_C.TypeError, f"{what}: {name} must be a traced value (an argument of the compiled "
                                    f"function or a value computed from one), got {type(x).__name__}")
    dtypes = (dtype,) if isinstance(dtype, str) else dtype
    if x.node.dtype not in dtypes:
        raise T.error(_C.TypeError, f"{what}: {name} must be {' or '.join(dtypes)}, got {x.node.dtype}"
                                    + (" (cast it with em.f32(x))" if "f32" in dtypes else ""))
    if rank is not None:
        ranks = (rank,) if isinstance(rank, int) else rank
        if x.ndim not in ranks:
            want = " or ".join(str(r) for r in ranks)
            raise T.error(_C.ShapeError, f"{what}: {name} must have rank {want}, got shape {_shape_str(x)}")
    return x


def _shape_str(x):
    return "[" + ", ".join(str(d) if isinstance(d, int) else "?" for d in x.shape) + "]"


def _check_dim(what, a, a_name, b, b_name):
    """Raises ember.ShapeError when two dimensions are both fixed and differ (symbolic ones are
    checked when the program is called)."""
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise T.error(_C.ShapeError, f"{what}: {a_name} is {a} but {b_name} is {b}")


def _pair(v, name, what, minimum):
    """An int or a pair of ints (each >= minimum) as a tuple (a, b)."""
    items = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(items) != 2 or any(isinstance(i, _BOOL_TYPES) or not isinstance(i, _INT_TYPES) for i in items):
        raise T.error(_C.TypeError, f"{what}: {name} must be an int or a pair of ints, got {v!r}")
    if any(int(i) < minimum for i in items):
        raise T.error(_C.ShapeError, f"{what}: {name} must be >= {minimum}, got {v!r}")
    return int(items[0]), int(items[1])


def _axis(axis, x, what):
    if isinstance(axis, _BOOL_TYPES) or not isinstance(axis, _INT_TYPES):
        raise T.error(_C.TypeError, f"{what}: axis must be an int, got {axis!r}")
    if not -x.ndim <= int(axis) < x.ndim:
        raise T.error(_C.ShapeError, f"{what}: axis {axis} is out of range for a value of rank {x.ndim}")
    return int(axis)


# ---- layers ----------------------------------------------------------------------------------
def linear(x, weight, bias=None):
    """linear(x, weight, bias=None) -> em.Value

    x @ weight.T + bias, as torch.nn.functional.linear: x [..., in], weight [out, in] and bias
    [out] (or None) give [..., out].

    >>> @em.compile
    ... def f(x: em.f32["B", 4], w: em.f32[3, 4], b: em.f32[3]):
    ...     return em.nn.functional.linear(x, w, b)
    >>> rng = np.random.default_rng(0)
    >>> x, w, b = (rng.normal(size=s).astype(np.float32) for s in ((2, 4), (3, 4), (3,)))
    >>> bool(np.allclose(f(x, w, b).numpy(), x @ w.T + b, atol=1e-5))
    True
    """
    what = "em.nn.functional.linear"
    x = _value(x, "x", what)
    weight = _value(weight, "weight", what, rank=2)
    if x.ndim == 0:
        raise T.error(_C.ShapeError, f"{what}: x must have at least one axis ([..., in]), got a scalar")
    _check_dim(what, x.shape[-1], "x's last dimension (in_features)", weight.shape[1],
               f"weight's second dimension (weight is [out, in] = {_shape_str(weight)})")
    # A sum over `in` of the broadcast product [..., out, in]: the same loops as x @ weight.T, but
    # weight's gradient comes out in its own [out, in] layout (no transposed copy: 2 kernels fewer
    # in an MLP's backward pass).
    y = ops.sum(x[..., None, :] * weight, axis=-1)
    if bias is not None:
        bias = _value(bias, "bias", what, rank=1)
        _check_dim(what, bias.shape[0], "bias's size", weight.shape[0], "weight's out_features")
        y = y + bias
    return y


def conv2d(x, weight, bias=None, stride=1, padding=0):
    """conv2d(x, weight, bias=None, stride=1, padding=0) -> em.Value

    2-D cross-correlation as torch.nn.functional.conv2d: x [N, C, H, W], weight [O, C, kh, kw],
    bias [O] or None; stride and zero padding an int or a pair (height, width); the result is
    [N, O, Ho, Wo].

    >>> @em.compile
    ... def f(x: em.f32[1, 1, 4, 4], w: em.f32[1, 1, 2, 2]):
    ...     return em.nn.functional.conv2d(x, w)
    >>> rng = np.random.default_rng(0)
    >>> x, w = rng.normal(size=(1, 1, 4, 4)).astype(np.float32), rng.normal(size=(1, 1, 2, 2)).astype(np.float32)
    >>> ref = [[(x[0, 0, i:i + 2, j:j + 2] * w[0, 0]).sum() for j in range(3)] for i in range(3)]
    >>> bool(np.allclose(f(x, w).numpy()[0, 0], ref, atol=1e-5))
    True
    """
    what = "em.nn.functional.conv2d"
    x = _value(x, "x", what, rank=4)
    weight = _value(weight, "weight", what, rank=4)
    sh, sw = _pair(stride, "stride", what, 1)
    ph, pw = _pair(padding, "padding", what, 0)
    N, C, H, W = x.shape
    O, Cw, kh, kw = weight.shape
    _check_dim(what, C, "x's channel count (x is [N, C, H, W] = " + _shape_str(x) + ")", Cw,
               "weight's in-channel count (weight is [O, C, kh, kw] = " + _shape_str(weight) + ")")
    Ho = (H + 2 * ph - kh) // sh + 1
    Wo = (W + 2 * pw - kw) // sw + 1
    if isinstance(Ho, int) and isinstance(Wo, int) and (Ho < 1 or Wo < 1):
        raise T.error(_C.ShapeError, f"{what}: the kernel {kh}x{kw} does not fit the padded input "
                                     f"{H + 2 * ph}x{W + 2 * pw} (x {_shape_str(x)}, padding {(ph, pw)})")
    # One sum over the 7-D index space (n, o, y, x, c, i, j): the product is fused into the
    # reduction loops, so the 7-D tensor is never stored.
    n, o, yo, xo, c, i, j = ops.indices((N, O, Ho, Wo, C, kh, kw))
    h = yo * sh + i if ph == 0 else yo * sh + (i - ph)
    w = xo * sw + j if pw == 0 else xo * sw + (j - pw)
    v = x[n, c, h, w]  # clamped: the padded border reads an edge element, replaced by 0 below
    inside = None
    if ph:
        inside = (h >= 0) & (h < H)
    if pw:
        inw = (w >= 0) & (w < W)
        inside = inw if inside is None else inside & inw
    if inside is not None:
        v = ops.where(inside, v, 0.0)
    y = ops.sum(v * weight[o, c, i, j], axis=(4, 5, 6))
    if bias is not None:
        bias = _value(bias, "bias", what, rank=1)
        _check_dim(what, bias.shape[0], "bias's size", O, "weight's out-channel count")
        y = y + bias[:, None, None]
    return y


def embedding(indices, weight):
    """embedding(indices, weight) -> em.Value

    weight[indices]: the rows of weight [num, dim] picked by i32 indices of any shape, giving
    [..., dim]. Out-of-range indices are clamped (Ember's gather default); the gradient is a
    scatter-add.

    >>> @em.compile
    ... def f(idx: em.i32["B"], table: em.f32[5, 3]):
    ...     return em.nn.functional.embedding(idx, table)
    >>> table = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    >>> idx = np.array([4, 0, 4], np.int32)
    >>> bool(np.array_equal(f(idx, table).numpy(), table[idx]))
    True
    """
    what = "em.nn.functional.embedding"
    indices = _value(indices, "indices", what, dtype=("i32", "u32"))
    weight = _value(weight, "weight", what, rank=2)
    return weight[indices]


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5) -> em.Value

    (x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) axes, with
    the biased variance, as torch.nn.functional.layer_norm.

    >>> @em.compile
    ... def f(x: em.f32["B", 8]):
    ...     return em.nn.functional.layer_norm(x, 8)
    >>> y = f(np.random.default_rng(0).normal(3, 2, size=(4, 8)).astype(np.float32)).numpy()
    >>> bool(np.allclose(y.mean(1), 0, atol=1e-5)), bool(np.allclose(y.var(1), 1, atol=1e-3))
    (True, True)
    """
    what = "em.nn.functional.layer_norm"
    x = _value(x, "x", what)
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    if not shape or any(isinstance(d, _BOOL_TYPES) or not isinstance(d, _INT_TYPES) or d < 1 for d in shape):
        raise T.error(_C.TypeError, f"{what}: normalized_shape must be a positive int or a non-empty tuple of "
                                    f"them, got {normalized_shape!r}")
    shape = tuple(int(d) for d in shape)
    k = len(shape)
    if x.ndim < k:
        raise T.error(_C.ShapeError, f"{what}: x of shape {_shape_str(x)} has fewer axes than normalized_shape "
                                     f"{list(shape)}")
    for a, d in zip(x.shape[x.ndim - k:], shape):
        if isinstance(a, int) and a != d:
            raise T.error(_C.ShapeError, f"{what}: x's trailing dimensions {_shape_str(x)} do not match "
                                         f"normalized_shape {list(shape)}")
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = ops.mean(x, axis=axes, keepdims=True)
    d = x - mu
    var = ops.mean(d * d, axis=axes, keepdims=True)
    y = d * ops.rsqrt(var + float(eps))
    for name, p in (("weight", weight), ("bias", bias)):
        if p is None:
            continue
        p = _value(p, name, what)
        if tuple(p.shape) != shape:
            raise T.error(_C.ShapeError, f"{what}: {name} has shape {_shape_str(p)}, expected normalized_shape "
                                         f"{list(shape)}")
        y = y * p if name == "weight" else y + p
    return y


# ---- activations -----------------------------------------------------------------------------
def relu(x):
    """relu(x) -> em.Value

    max(x, 0) elementwise; its derivative is 0 at x == 0 (as PyTorch). Also em.nn.relu.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.nn.relu(x)
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.array_equal(f(x).numpy(), np.maximum(x, 0)))
    True
    """
    x = _value(x, "x", "em.nn.functional.relu")
    return ops.where(x > 0, x, 0.0)


def sigmoid(x):
    """sigmoid(x) -> em.Value

    1 / (1 + exp(-x)) elementwise, evaluated from ``exp(-|x|)`` so it neither overflows nor loses the
    tails. Also em.nn.sigmoid.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.nn.sigmoid(x)
    >>> x = np.random.default_rng(0).normal(0, 4, size=6).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), 1 / (1 + np.exp(-x)), rtol=1e-5))
    True
    """
    x = _value(x, "x", "em.nn.functional.sigmoid")
    pos = x >= 0
    z = ops.exp(ops.where(pos, -x, x))  # exp(-|x|) in (0, 1]: never overflows
    return ops.where(pos, 1.0 / (1.0 + z), z / (1.0 + z))


def silu(x):
    """silu(x) -> em.Value

    x * sigmoid(x) (the swish), elementwise. Also em.nn.silu.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.nn.silu(x)
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6))
    True
    """
    x = _value(x, "x", "em.nn.functional.silu")
    return x * sigmoid(x)


# erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z >= 0: the Chebyshev fit of Numerical
# Recipes (Press et al., 2nd ed., section 6.2, "erfcc"), fractional error < 1.2e-7 everywhere
# (measured against math.erfc in float64: 1.05e-7). Ember has no erf op.
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
           1.48851587, -0.82215223, 0.17087277)


def _erfc_nonneg(a, scale):
    """erfc(sqrt(scale) * a) for a >= 0 (scale 1 or 0.5). exp(-scale a^2) is evaluated as
    exp(-scale s^2) * exp(-scale (a - s)(a + s)) with s = a rounded to 12 significant bits (s^2 is
    exact in f32): a rounded a^2 would cost ~a^2 * 6e-8 of relative accuracy in the tail."""
    a = ops.where(a < 30.0, a, 30.0)  # erfc(21) < 1e-193: 0 in f32; keeps (a - s)(a + s) finite
    z = a if scale == 1.0 else a * math.sqrt(scale)
    t = 1.0 / (1.0 + 0.5 * z)
    p = _ERFC_P[-1]
    for c in reversed(_ERFC_P[:-1]):
        p = c + t * p
    s = ops.bitcast(ops.bitcast(a, _C_U32) & 0xFFFFF000, _C_F32)  # no gradient: a step function of a
    return t * ops.exp(p - scale * ((a - s) * (a + s))) * ops.exp(-scale * (s * s))


def erfc(x):
    """erfc(x) -> em.Value

    The complementary error function 1 - erf(x), elementwise, with relative error ~1e-7 (a
    Chebyshev fit, Numerical Recipes' erfcc; accurate in the tails, where 1 - erf would cancel).

    >>> import math
    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.nn.functional.erfc(x)
    >>> x = np.random.default_rng(0).normal(0, 2, size=6).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), [math.erfc(v) for v in x], rtol=1e-5))
    True
    """
    x = _value(x, "x", "em.nn.functional.erfc")
    pos = x >= 0
    r = _erfc_nonneg(ops.where(pos, x, -x), 1.0)  # |x| with derivative 1 at 0 (abs would pass 0)
    return ops.where(ops.isnan(x), x, ops.where(pos, r, 2.0 - r))


def erf(x):
    """erf(x) -> em.Value

    The error function, elementwise, as 1 - erfc(x) (absolute error ~1e-7).

    >>> import math
    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.nn.functional.erf(x)
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), [math.erf(v) for v in x], atol=1e-6))
    True
    """
    x = _value(x, "x", "em.nn.functional.erf")
    return 1.0 - erfc(x)


def gelu(x):
    """gelu(x) -> em.Value

    x * Phi(x) with the exact normal CDF (PyTorch's default approximate='none'), evaluated as
    0.5 * x * erfc(-x / sqrt(2)): relative error ~1e-7 near 0 and a few 1e-7 in the tails. Also
    em.nn.gelu.

    >>> import math
    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.nn.gelu(x)
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> ref = [0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x]
    >>> bool(np.allclose(f(x).numpy(), ref, rtol=1e-5, atol=1e-6))
    True
    """
    x = _value(x, "x", "em.nn.functional.gelu")
    neg = x <= 0
    r = _erfc_nonneg(ops.where(neg, -x, x), 0.5)  # erfc(|x| / sqrt 2)
    return (0.5 * x) * ops.where(neg, r, 2.0 - r)


def softmax(x, axis=-1):
    """softmax(x, axis=-1) -> em.Value

    exp(x) / sum(exp(x)) along `axis`, with the maximum subtracted first (no overflow). Also
    em.nn.softmax.

    >>> @em.compile
    ... def f(x: em.f32["B", 5]):
    ...     return em.nn.softmax(x)
    >>> x = np.random.default_rng(0).normal(0, 10, size=(3, 5)).astype(np.float32)
    >>> e = np.exp(x - x.max(1, keepdims=True))
    >>> bool(np.allclose(f(x).numpy(), e / e.sum(1, keepdims=True), atol=1e-6))
    True
    """
    what = "em.nn.functional.softmax"
    x = _value(x, "x", what)
    axis = _axis(axis, x, what)
    # The shift does not change the result, so it carries no gradient (detach: no max adjoint).
    e = ops.exp(x - ops.max(x, axis=axis, keepdims=True).detach())
    return e / ops.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    """log_softmax(x, axis=-1) -> em.Value

    x - log(sum(exp(x))) along `axis`, computed as (x - max) - log(sum(exp(x - max))). Also
    em.nn.log_softmax.

    >>> @em.compile
    ... def f(x: em.f32["B", 5]):
    ...     return em.nn.log_softmax(x)
    >>> x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
    >>> bool(np.allclose(np.exp(f(x).numpy()).sum(1), 1, atol=1e-5))
    True
    """
    what = "em.nn.functional.log_softmax"
    x = _value(x, "x", what)
    axis = _axis(axis, x, what)
    z = x - ops.max(x, axis=axis, keepdims=True).detach()
    return z - ops.log(ops.sum(ops.exp(z), axis=axis, keepdims=True))


# ---- losses ----------------------------------------------------------------------------------
def mse_loss(pred, target):
    """mse_loss(pred, target) -> em.Value

    The mean of (pred - target)^2 over every element (PyTorch's reduction='mean'); equal shapes.
    Also em.nn.mse_loss.

    >>> @em.compile
    ... def f(p: em.f32["N", 2], t: em.f32["N", 2]):
    ...     return em.nn.mse_loss(p, t)
    >>> p, t = np.random.default_rng(0).normal(size=(2, 4, 2)).astype(np.float32)
    >>> bool(np.isclose(f(p, t).item(), ((p - t) ** 2).mean(), rtol=1e-5))
    True
    """
    what = "em.nn.functional.mse_loss"
    pred = _value(pred, "pred", what)
    target = _value(target, "target", what)
    if pred.ndim != target.ndim:
        raise T.error(_C.ShapeError, f"{what}: pred has shape {_shape_str(pred)} but target {_shape_str(target)}")
    for a, b in zip(pred.shape, target.shape):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise T.error(_C.ShapeError, f"{what}: pred has shape {_shape_str(pred)} but target "
                                         f"{_shape_str(target)}")
    d = pred - target
    return ops.mean(d * d)


def cross_entropy(logits, labels):
    """cross_entropy(logits, labels) -> em.Value

    The mean over the batch of -log_softmax(logits)[b, labels[b]]: logits [B, C] f32, labels i32
    [B] (class indices in [0, C); out-of-range labels are clamped, as Ember's gathers). Also
    em.nn.cross_entropy.

    >>> @em.compile
    ... def f(logits: em.f32["B", 4], labels: em.i32["B"]):
    ...     return em.nn.cross_entropy(logits, labels)
    >>> rng = np.random.default_rng(0)
    >>> logits, labels = rng.normal(size=(5, 4)).astype(np.float32), rng.integers(0, 4, 5).astype(np.int32)
    >>> lp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    >>> bool(np.isclose(f(logits, labels).item(), -lp[np.arange(5), labels].mean(), rtol=1e-5))
    True
    """
    what = "em.nn.functional.cross_entropy"
    logits = _value(logits, "logits", what, rank=2)
    labels = _value(labels, "labels", what, dtype=("i32", "u32"), rank=1)
    _check_dim(what, labels.shape[0], "labels' size", logits.shape[0], "logits' batch size (logits is [B, C] = "
               + _shape_str(logits) + ")")
    m = ops.max(logits, axis=1, keepdims=True).detach()
    lse = ops.log(ops.sum(ops.exp(logits - m), axis=1)) + m[:, 0]  # logsumexp per row
    # logits[b, labels[b]] as a masked row sum (exact: one term, the rest +0): its derivative is
    # elementwise, where a gather's would scatter atomically into a zeroed buffer.
    n = logits.shape[1]
    label = ops.clamp(labels, 0, n - 1)
    _, cls = ops.indices(logits.shape)
    picked = ops.sum(ops.where(cls == label[:, None], logits, 0.0), axis=1)
    return ops.mean(lse - picked)
