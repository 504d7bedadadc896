"""em.nn.functional and em.nn.init.

- Forward: every function inside an @em.compile program against a float64 NumPy reference on random
  inputs (never zeros), on every backend (the `backend` fixture); tolerance relative to the
  output's largest element, 1e-5 on cpu and 1e-4 on the GPU dialects (their exp/log are looser).
- Gradients: em.grad (and em.jvp) of a random weighted sum of each function's output against
  float64 central differences of the reference (tests/python/gradcheck.py), on cpu and on the
  GPU backends for the cheap ones; embedding and cross_entropy also against analytic NumPy
  gradients (repeated indices/labels accumulate).
- Numerics: softmax / log_softmax / cross_entropy with logits of size 1e3, sigmoid for |x| up to
  1e3, gelu's relative accuracy in the tails.
- Bad arguments: ember.ShapeError / TypeError naming the value.
- em.nn.init: PyTorch's default bounds and statistics, reproducibility of seeds and of the
  global em.random.seed stream, which leaves em.random.rand inside programs untouched.
- Kernel counts of a conv2d forward+backward program and of an MLP loss+gradient program.
"""
import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import ember as em
from ember.nn import functional as F
from ember.nn import init
from gradcheck import assert_close, away, check_grad, seed_of

_erf = np.vectorize(math.erf, otypes=[np.float64])


def fwd_rtol(backend):
    return 1e-5 if backend == "cpu" else 1e-4


def f64(*xs):
    return [x.astype(np.float64) if isinstance(x, np.ndarray) and x.dtype == np.float32 else x for x in xs]


def nonzero(rng, shape, lo=-2.0, hi=2.0):
    """float32 uniform in [lo, hi) never exactly zero."""
    return away(rng, tuple(shape), lo, hi)


# ---- float64 references ----------------------------------------------------------------------
def linear_ref(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def conv2d_ref(x, w, b=None, stride=1, padding=0):
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::sh, ::sw]  # N C Ho Wo kh kw
    y = np.einsum("ncyxij,ocij->noyx", win, w)
    return y if b is None else y + b[None, :, None, None]


def layer_norm_ref(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def sigmoid_ref(x):
    return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


def gelu_ref(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def log_softmax_ref(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def softmax_ref(x, axis=-1):
    return np.exp(log_softmax_ref(x, axis))


def cross_entropy_ref(z, y):
    return -np.mean(log_softmax_ref(z, 1)[np.arange(len(y)), y])


# ---- forward, every backend ------------------------------------------------------------------
def test_linear_forward(backend, rng):
    x = nonzero(rng, (2, 5, 7))
    w, b = nonzero(rng, (4, 7)), nonzero(rng, (4,))

    @em.compile
    def prog(x: em.f32["B", "T", 7], w: em.f32[4, 7], b: em.f32[4]):  # noqa: F821
        return F.linear(x, w, b), F.linear(x[0], w)

    y, y0 = prog(x, w, b)
    assert_close(y.numpy(), linear_ref(*f64(x, w, b)), fwd_rtol(backend), "linear")
    assert_close(y0.numpy(), linear_ref(*f64(x[0], w)), fwd_rtol(backend), "linear without bias")


CONV_CASES = [  # (x shape, weight shape, bias, stride, padding)
    ((2, 3, 6, 5), (4, 3, 3, 3), True, 1, 0),
    ((2, 3, 7, 6), (4, 3, 3, 2), True, 2, 1),         # stride 2, padding 1, non-square kernel
    ((1, 2, 5, 8), (3, 2, 2, 3), False, (2, 1), (0, 2)),  # pairs: padding only along the width
    ((1, 2, 5, 5), (2, 2, 1, 4), True, (1, 3), (2, 1)),
]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv2d_forward(backend, rng, case):
    xs, ws, has_b, stride, padding = CONV_CASES[case]
    x, w = nonzero(rng, xs), nonzero(rng, ws)
    b = nonzero(rng, (ws[0],))
    want = conv2d_ref(*f64(x, w, b if has_b else None), stride, padding)

    @em.compile
    def prog(x: em.f32[xs], w: em.f32[ws], b: em.f32[ws[0]]):
        return F.conv2d(x, w, b if has_b else None, stride=stride, padding=padding)

    y = prog(x, w, b).numpy()
    assert y.shape == want.shape
    assert_close(y, want, fwd_rtol(backend), f"conv2d {CONV_CASES[case]}")


def test_conv2d_symbolic_shapes(backend, rng):
    """Symbolic N, C, H, W and kernel sizes: the output size is computed from them at run time."""
    @em.compile
    def prog(x: em.f32["N", "C", "H", "W"], w: em.f32["O", "C", "KH", "KW"], b: em.f32["O"]):  # noqa: F821
        return F.conv2d(x, w, b, stride=2, padding=1)

    for xs, ws in (((2, 3, 7, 6), (4, 3, 3, 2)), ((1, 2, 9, 9), (3, 2, 3, 3))):
        x, w, b = nonzero(rng, xs), nonzero(rng, ws), nonzero(rng, (ws[0],))
        assert_close(prog(x, w, b).numpy(), conv2d_ref(*f64(x, w, b), 2, 1), fwd_rtol(backend), f"conv2d {xs}")


def test_embedding_forward(backend, rng):
    w = nonzero(rng, (6, 3))
    idx = np.array([[0, 5, 2, 2], [5, 5, 1, 3]], np.int32)

    @em.compile
    def prog(idx: em.i32["A", "B"], w: em.f32[6, 3], i1: em.i32["K"]):  # noqa: F821
        return F.embedding(idx, w), F.embedding(i1, w)

    y, y1 = prog(idx, w, idx[1].copy())
    np.testing.assert_array_equal(y.numpy(), w[idx])
    np.testing.assert_array_equal(y1.numpy(), w[idx[1]])


def test_layer_norm_forward(backend, rng):
    x = nonzero(rng, (4, 3, 5), -3, 3) + 1.5  # a nonzero mean
    w, b = nonzero(rng, (3, 5), 0.5, 1.5), nonzero(rng, (3, 5))
    w1, b1 = nonzero(rng, (5,), 0.5, 1.5), nonzero(rng, (5,))

    @em.compile
    def prog(x: em.f32["B", 3, 5], w: em.f32[3, 5], b: em.f32[3, 5], w1: em.f32[5], b1: em.f32[5]):  # noqa: F821
        return (F.layer_norm(x, (3, 5), w, b), F.layer_norm(x, 5, w1, b1), F.layer_norm(x, [5]),
                F.layer_norm(x, 5, eps=0.5))

    y2, y1, y0, ye = prog(x, w, b, w1, b1)
    x64 = x.astype(np.float64)
    rt = fwd_rtol(backend)
    assert_close(y2.numpy(), layer_norm_ref(x64, 2, *f64(w, b)), rt, "layer_norm over 2 axes")
    assert_close(y1.numpy(), layer_norm_ref(x64, 1, *f64(w1, b1)), rt, "layer_norm over 1 axis")
    assert_close(y0.numpy(), layer_norm_ref(x64, 1), rt, "layer_norm without weight and bias")
    assert_close(ye.numpy(), layer_norm_ref(x64, 1, eps=0.5), rt, "layer_norm with eps 0.5")


ACTIVATIONS = {
    "relu": (F.relu, lambda x: np.maximum(x, 0.0)),
    "gelu": (F.gelu, gelu_ref),
    "sigmoid": (F.sigmoid, sigmoid_ref),
    "silu": (F.silu, lambda x: x * sigmoid_ref(x)),
    "softmax": (F.softmax, softmax_ref),
    "log_softmax": (F.log_softmax, log_softmax_ref),
    "softmax_axis0": (lambda x: F.softmax(x, axis=0), lambda x: softmax_ref(x, 0)),
    "log_softmax_axis1": (lambda x: F.log_softmax(x, 1), lambda x: log_softmax_ref(x, 1)),
    "erf": (F.erf, _erf),
    "erfc": (F.erfc, lambda x: 1.0 - _erf(x)),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_forward(backend, rng, name):
    fn, ref = ACTIVATIONS[name]
    x = nonzero(rng, (5, 3, 8), -4, 4)

    @em.compile
    def prog(x: em.f32["A", 3, "B"]):  # noqa: F821
        return fn(x)

    assert_close(prog(x).numpy(), ref(x.astype(np.float64)), fwd_rtol(backend), name)


def test_losses_forward(backend, rng):
    p, t = nonzero(rng, (4, 6)), nonzero(rng, (4, 6))
    z = nonzero(rng, (7, 5), -3, 3)
    y = np.array([1, 3, 1, 1, 0, 4, 3], np.int32)  # repeated labels

    @em.compile
    def prog(p: em.f32["B", 6], t: em.f32["B", 6], z: em.f32["N", 5], y: em.i32["N"]):  # noqa: F821
        return F.mse_loss(p, t), F.cross_entropy(z, y)

    mse, ce = prog(p, t, z, y)
    rt = fwd_rtol(backend)
    assert_close(mse.numpy(), np.mean((p.astype(np.float64) - t) ** 2), rt, "mse_loss")
    assert_close(ce.numpy(), cross_entropy_ref(z.astype(np.float64), y), rt, "cross_entropy")


def test_large_logits_do_not_overflow(backend, rng):
    """Logits of size 1e3 (exp would overflow f32 at 89): softmax, log_softmax and cross_entropy
    stay finite and accurate; sigmoid and silu at +-1e3 saturate without NaN."""
    z = (nonzero(rng, (6, 5), -1, 1) * 1e3).astype(np.float32)
    y = np.array([0, 4, 4, 2, 0, 4], np.int32)
    s = np.array([-1000.0, -100.0, -80.0, -30.0, -1.5, 1.5, 30.0, 80.0, 100.0, 1000.0], np.float32)

    @em.compile
    def prog(z: em.f32["N", 5], y: em.i32["N"], s: em.f32["K"]):  # noqa: F821
        return F.softmax(z), F.log_softmax(z), F.cross_entropy(z, y), F.sigmoid(s), F.silu(s)

    sm, lsm, ce, sg, si = [t.numpy() for t in prog(z, y, s)]
    z64, s64 = z.astype(np.float64), s.astype(np.float64)
    for v in (sm, lsm, ce, sg, si):
        assert np.all(np.isfinite(v))
    rt = fwd_rtol(backend)
    assert_close(sm, softmax_ref(z64), rt, "softmax of 1e3 logits")
    assert_close(lsm, log_softmax_ref(z64), rt, "log_softmax of 1e3 logits")
    assert_close(ce, cross_entropy_ref(z64, y), rt, "cross_entropy of 1e3 logits")
    want = sigmoid_ref(s64)
    # Elementwise relative accuracy where the result is a normal f32 (|x| <= 87); below that it may
    # be a denormal or 0 (GPUs flush denormals), never NaN.
    np.testing.assert_allclose(sg, want, rtol=10 * rt, atol=1e-37)
    np.testing.assert_allclose(si, s64 * want, rtol=10 * rt, atol=1e-35)
    assert si[-1] == 1000.0 and abs(si[0]) < 1e-30


def test_gelu_relative_accuracy_in_the_tails():
    """gelu as 0.5 x erfc(-x / sqrt 2): elementwise relative error ~1e-7 (f32 rounding plus the
    1.2e-7 of the erfc fit) even where the result is tiny (x = -10: -7.6e-23)."""
    x = np.concatenate([np.linspace(-10, -0.01, 400), np.linspace(0.01, 10, 400)]).astype(np.float32)

    @em.compile
    def prog(x: em.f32["N"]):  # noqa: F821
        return F.gelu(x), F.erfc(x)

    g, c = prog(x)
    x64 = x.astype(np.float64)
    erfc64 = np.vectorize(math.erfc, otypes=[np.float64])
    np.testing.assert_allclose(g.numpy(), 0.5 * x64 * erfc64(-x64 / math.sqrt(2)), rtol=1e-6)
    normal = erfc64(x64) > 1.2e-38  # f32 denormals (x > 9.1) keep fewer bits
    np.testing.assert_allclose(c.numpy()[normal], erfc64(x64)[normal], rtol=1e-6)


# ---- gradients -------------------------------------------------------------------------------
@pytest.fixture
def gbackend(backend):
    """Gradient checks: every backend (the functions here are cheap)."""
    return backend


def test_linear_grad(gbackend):
    rng = np.random.default_rng(seed_of("linear"))
    args = {"x": nonzero(rng, (2, 3, 5)), "w": nonzero(rng, (4, 5)), "b": nonzero(rng, (4,))}
    check_grad(gbackend, lambda x, w, b: F.linear(x, w, b), linear_ref, args, name="linear")


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv2d_grad(case):
    xs, ws, has_b, stride, padding = CONV_CASES[case]
    rng = np.random.default_rng(seed_of(f"conv2d{case}"))
    args = {"x": nonzero(rng, xs), "w": nonzero(rng, ws)}
    if has_b:
        args["b"] = nonzero(rng, (ws[0],))
    check_grad("cpu", lambda x, w, b=None: F.conv2d(x, w, b, stride, padding),
               lambda x, w, b=None: conv2d_ref(x, w, b, stride, padding), args, name=f"conv2d{case}")


def test_conv2d_grad_gpu(gbackend):
    """The stride-2, padding-1, 3x2 case on every backend."""
    xs, ws, _, stride, padding = CONV_CASES[1]
    rng = np.random.default_rng(seed_of("conv2d_gpu"))
    args = {"x": nonzero(rng, (1, 2, 5, 4)), "w": nonzero(rng, (3, 2, 3, 2)), "b": nonzero(rng, (3,))}
    check_grad(gbackend, lambda x, w, b: F.conv2d(x, w, b, stride, padding),
               lambda x, w, b: conv2d_ref(x, w, b, stride, padding), args, name="conv2d_gpu")


def test_embedding_grad_accumulates_repeated_indices(gbackend):
    """d/dweight of sum(dy * weight[idx]) is a scatter-add: rows picked several times sum."""
    rng = np.random.default_rng(seed_of("embedding"))
    w = nonzero(rng, (6, 3))
    idx = np.array([[0, 5, 2, 2], [5, 5, 1, 2]], np.int32)  # 5 three times, 2 three times, 4 never
    args = {"idx": idx, "w": w}
    check_grad(gbackend, lambda idx, w: F.embedding(idx, w), lambda idx, w: w[idx], args, name="embedding")
    dy = nonzero(rng, (2, 4, 3))

    @em.compile
    def prog(idx: em.i32[2, 4], w: em.f32[6, 3], dy: em.f32[2, 4, 3]):
        return em.grad(em.sum(F.embedding(idx, w) * dy), w)

    want = np.zeros((6, 3))
    np.add.at(want, idx, dy.astype(np.float64))
    assert_close(prog(idx, w, dy).numpy(), want, fwd_rtol(gbackend), "embedding gradient (np.add.at)")
    assert np.all(prog(idx, w, dy).numpy()[4] == 0)


@pytest.mark.parametrize("k", [1, 2])
def test_layer_norm_grad(gbackend, k):
    rng = np.random.default_rng(seed_of(f"layer_norm{k}"))
    shape = (3, 4) if k == 2 else (4,)
    args = {"x": nonzero(rng, (2, 3, 4), -2, 2), "w": nonzero(rng, shape, 0.5, 1.5), "b": nonzero(rng, shape)}
    check_grad(gbackend, lambda x, w, b: F.layer_norm(x, shape, w, b),
               lambda x, w, b: layer_norm_ref(x, k, w, b), args, name=f"layer_norm{k}")


GRAD_ACTIVATIONS = ["relu", "gelu", "sigmoid", "silu", "softmax", "log_softmax", "softmax_axis0", "erf"]


@pytest.mark.parametrize("name", GRAD_ACTIVATIONS)
def test_activation_grad(gbackend, name):
    fn, ref = ACTIVATIONS[name]
    rng = np.random.default_rng(seed_of(name))
    # Away from relu's kink at 0 (central differences straddle it otherwise).
    x = away(rng, (3, 5), 0.05, 4.0, sign=True)
    check_grad(gbackend, fn, ref, {"x": x}, name=name)


def test_large_logit_gradients_are_finite(gbackend):
    """softmax / log_softmax / cross_entropy gradients at logits of size 1e3 (analytic)."""
    rng = np.random.default_rng(seed_of("large"))
    z = (nonzero(rng, (4, 5), -1, 1) * 1e3).astype(np.float32)
    z[:, 1] = z[:, 0] + 0.5  # two close leaders per row: nontrivial probabilities
    y = np.array([1, 0, 1, 3], np.int32)

    @em.compile
    def prog(z: em.f32[4, 5], y: em.i32[4]):
        return em.grad(F.cross_entropy(z, y), z), em.grad(em.sum(F.log_softmax(z)[:, 0]), z)

    g_ce, g_ls = [t.numpy() for t in prog(z, y)]
    p = softmax_ref(z.astype(np.float64))
    onehot = np.eye(5)[y]
    assert np.all(np.isfinite(g_ce)) and np.all(np.isfinite(g_ls))
    assert_close(g_ce, (p - onehot) / 4, fwd_rtol(gbackend), "d cross_entropy / d logits at 1e3")
    assert_close(g_ls, np.eye(5)[[0] * 4] - p, fwd_rtol(gbackend), "d log_softmax[:, 0] / d logits at 1e3")


def test_losses_grad(gbackend):
    rng = np.random.default_rng(seed_of("losses"))
    args = {"p": nonzero(rng, (3, 4)), "t": nonzero(rng, (3, 4))}
    check_grad(gbackend, F.mse_loss, lambda p, t: np.mean((p - t) ** 2), args, name="mse_loss")
    y = np.array([2, 0, 2, 2, 4, 0], np.int32)  # repeated labels
    z = nonzero(rng, (6, 5), -3, 3)
    check_grad(gbackend, F.cross_entropy, cross_entropy_ref, {"z": z, "y": y}, name="cross_entropy")

    @em.compile
    def prog(z: em.f32["B", 5], y: em.i32["B"]):  # noqa: F821
        return em.grad(F.cross_entropy(z, y), z)

    p = softmax_ref(z.astype(np.float64))
    p[np.arange(6), y] -= 1.0
    assert_close(prog(z, y).numpy(), p / 6, fwd_rtol(gbackend), "cross_entropy gradient (softmax - onehot) / B")


# ---- bad arguments ---------------------------------------------------------------------------
def _trace(fn, *specs):
    names = [f"a{k}" for k in range(len(specs))]
    import inspect

    def body(*vals):
        return fn(*vals)
    body.__signature__ = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                            for n in names])
    body.__annotations__ = dict(zip(names, specs))
    prog = em.compile(body, trace_cache=False)
    return prog.kernel_count


@pytest.mark.parametrize("fn, specs, exc, words", [
    (lambda x, w: F.conv2d(x, w), (em.f32[1, 3, 5, 5], em.f32[2, 4, 3, 3]), em.ShapeError, ["channel", "3", "4"]),
    (lambda x, w: F.conv2d(x, w), (em.f32[1, 3, 5], em.f32[2, 3, 3, 3]), em.ShapeError, ["x", "rank 4"]),
    (lambda x, w: F.conv2d(x, w, stride=0), (em.f32[1, 3, 5, 5], em.f32[2, 3, 3, 3]), em.ShapeError, ["stride"]),
    (lambda x, w: F.conv2d(x, w, padding=(1, 2, 3)), (em.f32[1, 3, 5, 5], em.f32[2, 3, 3, 3]), em.TypeError,
     ["padding"]),
    (lambda x, w: F.conv2d(x, w), (em.f32[1, 3, 2, 5], em.f32[2, 3, 3, 3]), em.ShapeError, ["does not fit"]),
    (lambda x, w, b: F.conv2d(x, w, b), (em.f32[1, 3, 5, 5], em.f32[2, 3, 3, 3], em.f32[3]), em.ShapeError,
     ["bias", "3", "2"]),
    (lambda x, w: F.linear(x, w), (em.f32[4, 5], em.f32[3, 6]), em.ShapeError, ["in_features", "5", "6"]),
    (lambda x, w: F.linear(x, w), (em.f32[4, 5], em.f32[3, 5, 1]), em.ShapeError, ["weight", "rank 2"]),
    (lambda x, w, b: F.linear(x, w, b), (em.f32[4, 5], em.f32[3, 5], em.f32[4]), em.ShapeError, ["bias", "4"]),
    (lambda x, w: F.linear(x, w), (em.i32[4, 5], em.f32[3, 5]), em.TypeError, ["x", "f32", "i32"]),
    (lambda i, w: F.embedding(i, w), (em.f32[4], em.f32[3, 5]), em.TypeError, ["indices", "i32"]),
    (lambda z, y: F.cross_entropy(z, y), (em.f32[4, 5], em.f32[4]), em.TypeError, ["labels", "i32"]),
    (lambda z, y: F.cross_entropy(z, y), (em.f32[4, 5], em.i32[3]), em.ShapeError, ["labels", "3", "4"]),
    (lambda z, y: F.cross_entropy(z, y), (em.f32[4], em.i32[4]), em.ShapeError, ["logits", "rank 2"]),
    (lambda p, t: F.mse_loss(p, t), (em.f32[4, 5], em.f32[4, 6]), em.ShapeError, ["pred", "target"]),
    (lambda x: F.layer_norm(x, (4, 5)), (em.f32[2, 5, 4],), em.ShapeError, ["normalized_shape"]),
    (lambda x, w: F.layer_norm(x, 4, w), (em.f32[2, 4], em.f32[5]), em.ShapeError, ["weight", "5"]),
    (lambda x: F.softmax(x, axis=2), (em.f32[2, 4],), em.ShapeError, ["axis 2"]),
])
def test_bad_arguments(fn, specs, exc, words):
    with pytest.raises(exc) as e:
        _trace(fn, *specs)
    msg = str(e.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    assert "test_nn_functional.py" in msg  # the user's line


def test_outside_a_trace_is_an_error():
    with pytest.raises(em.Error, match="inside a function compiled with @em.compile"):
        F.relu(np.ones(3, np.float32))


# ---- kernel counts ---------------------------------------------------------------------------
def test_kernel_counts(capsys):
    """conv2d forward + gradients (x, w, b), and a linear -> relu -> linear -> cross_entropy loss
    with the gradients of its four parameters."""
    @em.compile
    def conv_step(x: em.f32[8, 3, 16, 16], w: em.f32[8, 3, 3, 3], b: em.f32[8], dy: em.f32[8, 8, 8, 8]):
        y = F.conv2d(x, w, b, stride=2, padding=1)
        return (y, *em.grad(em.sum(y * dy), [x, w, b]))

    @em.compile
    def mlp_step(x: em.f32["B", 64], y: em.i32["B"], w1: em.f32[128, 64], b1: em.f32[128],  # noqa: F821
                 w2: em.f32[10, 128], b2: em.f32[10]):
        loss = F.cross_entropy(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), y)
        return (loss, *em.grad(loss, [w1, b1, w2, b2]))

    rng = np.random.default_rng(0)
    x = nonzero(rng, (32, 64))
    y = rng.integers(0, 10, 32).astype(np.int32)
    w1, b1 = init.linear(64, 128, True, init.generator(1))
    w2, b2 = init.linear(128, 10, True, init.generator(2))
    loss, gw1, gb1, gw2, gb2 = [t.numpy() for t in mlp_step(x, y, w1, b1, w2, b2)]
    # Analytic float64 backpropagation.
    x64, w164, b164, w264, b264 = f64(x, w1, b1, w2, b2)
    hp = x64 @ w164.T + b164
    h = np.maximum(hp, 0)
    z = h @ w264.T + b264
    dz = softmax_ref(z)
    dz[np.arange(32), y] -= 1
    dz /= 32
    dhp = (dz @ w264) * (hp > 0)
    assert_close(loss, cross_entropy_ref(z, y), 1e-5, "MLP loss")
    for got, want, n in ((gw1, dhp.T @ x64, "w1"), (gb1, dhp.sum(0), "b1"), (gw2, dz.T @ h, "w2"),
                         (gb2, dz.sum(0), "b2")):
        assert_close(got, want, 1e-4, f"MLP d loss / d {n}")
    with capsys.disabled():
        print(f"\n[kernel counts] conv2d forward+backward: {conv_step.kernel_count}; "
              f"MLP cross_entropy loss+grad: {mlp_step.kernel_count}")
    assert conv_step.kernel_count <= 4
    assert mlp_step.kernel_count <= 10


# ---- em.nn.init ------------------------------------------------------------------------------
def test_init_shapes_dtypes_and_bounds():
    w, b = init.linear(50, 2000, True, init.generator(3))
    assert w.shape == (2000, 50) and b.shape == (2000,) and w.dtype == b.dtype == np.float32
    bound = 1 / math.sqrt(50)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.99 * bound  # uses the whole range
    assert abs(w.mean()) < 0.01 * bound * 3 and abs(w.var() / (bound ** 2 / 3) - 1) < 0.02  # U(-b, b)
    assert init.linear(5, 3, False, init.generator(0))[1] is None

    w, b = init.conv2d(3, 64, 5, 3, True, init.generator(4))
    assert w.shape == (64, 3, 5, 3) and b.shape == (64,) and w.dtype == np.float32
    bound = 1 / math.sqrt(3 * 5 * 3)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.var() / (bound ** 2 / 3) - 1) < 0.08  # 5 sigma, n = 2880
    assert init.conv2d(3, 4, 3, 3, False, init.generator(0))[1] is None

    e = init.embedding(200, 100, init.generator(5))
    assert e.shape == (200, 100) and e.dtype == np.float32
    assert abs(e.mean()) < 0.035 and abs(e.std() - 1) < 0.025  # 5 sigma, n = 20000

    g, z = init.layer_norm((3, 4))
    assert g.shape == z.shape == (3, 4) and np.all(g == 1) and np.all(z == 0)


def test_init_seeds_are_reproducible():
    a = init.linear(10, 4, True, init.generator(7))
    b = init.linear(10, 4, True, init.generator(7))
    c = init.linear(10, 4, True, init.generator(8))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_global_seed_gives_distinct_reproducible_streams():
    em.random.seed(123)
    l1, l2 = init.linear(10, 4), init.linear(10, 4)
    e1 = init.embedding(5, 3)
    assert not np.array_equal(l1[0], l2[0])  # two layers: different streams
    em.random.seed(123)
    m1, m2 = init.linear(10, 4), init.linear(10, 4)
    np.testing.assert_array_equal(l1[0], m1[0])
    np.testing.assert_array_equal(l2[0], m2[0])
    np.testing.assert_array_equal(l2[1], m2[1])
    np.testing.assert_array_equal(e1, init.embedding(5, 3))
    em.random.seed(124)
    assert not np.array_equal(l1[0], init.linear(10, 4)[0])
    # A layer's own seed is independent of the global stream.
    np.testing.assert_array_equal(init.linear(10, 4, True, init.generator(123))[0],
                                  init.linear(10, 4, True, init.generator(123))[0])


def test_global_seed_does_not_change_program_random_numbers():
    @em.compile
    def prog(x: em.f32[16]):
        return x + em.random.rand((16,), 5)

    x = np.ones(16, np.float32)
    em.random.seed(1)
    a = prog(x).numpy()
    em.random.seed(2)
    np.testing.assert_array_equal(a, prog(x).numpy())


@pytest.mark.parametrize("call, exc", [
    (lambda: em.random.seed(-1), em.Error),
    (lambda: em.random.seed(1.5), em.TypeError),
    (lambda: init.generator("a"), em.TypeError),
    (lambda: init.linear(-1, 3), em.ShapeError),
    (lambda: init.conv2d(3, 4, 0, 3), em.ShapeError),
    (lambda: init.linear(3, 4, True, 5), em.TypeError),
])
def test_init_bad_arguments(call, exc):
    with pytest.raises(exc):
        call()
