"""End to end: shape operations (reshape transpose .T squeeze unsqueeze concat stack repeat flip
broadcast_to) and slicing with steps / negative bounds against NumPy on random inputs, and the
kernel counts that show they are index remaps that do not stop fusion."""
import os
import sys

import numpy as np
import pytest

import ember as em

HERE = os.path.basename(__file__)


def rand(rng, *shape, lo=-2.0, hi=2.0):
    x = rng.uniform(lo, hi, size=shape).astype(np.float32)
    x[x == 0] = 0.25  # never zeros
    return x


def check(got, want, rtol=2e-6):
    if not isinstance(got, tuple):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape, (i, g.shape, w.shape)
        np.testing.assert_allclose(g.numpy(), w, rtol=rtol, atol=1e-6, err_msg=f"output {i}")


RESHAPES = [((4, 6), (3, 8)), ((4, 6), (24,)), ((4, 6), (-1,)), ((2, 3, 4), (6, -1)), ((2, 3, 4), (4, 3, 2)),
            ((2, 3, 4), (2, 1, 12, 1)), ((6, 1, 4), (3, 8)), ((24,), (2, 3, 2, 2)), ((4, 6), (4, 6))]


@pytest.mark.parametrize("src,dst", RESHAPES, ids=[f"{s}->{d}" for s, d in RESHAPES])
def test_reshape(rng, backend, src, dst):
    X = rand(rng, *src)

    @em.compile
    def f(X: em.f32[src]):
        return em.reshape(X, dst), X.reshape(dst), em.reshape(em.exp(X), dst) * 2.0
    check(f(X), (X.reshape(dst), X.reshape(dst), np.exp(X).reshape(dst) * 2), rtol=2e-5)


def test_reshape_forms_and_symbolic_dims(rng, backend):
    X = rand(rng, 5, 3)

    @em.compile
    def f(X: em.f32["N", 3]):
        n = X.shape[0]
        flat = X.reshape(-1)                 # [N * 3]
        back = flat.reshape(n, 3)            # equal symbolic factors cancel
        cols = em.reshape(X, (3, -1))        # -1 inferred as N
        return flat * 2.0, back + X, cols, X.reshape(1, n * 3, 1), em.reshape(X, (n, 1, 3))
    check(f(X), (X.reshape(-1) * 2, X + X, X.reshape(3, -1), X.reshape(1, 15, 1), X.reshape(5, 1, 3)))
    X9 = rand(rng, 9, 3)
    check(f(X9)[2], X9.reshape(3, -1))


AXES = [None, (1, 0, 2), (2, 0, 1), (0, 2, 1), (-1, 0, 1)]


@pytest.mark.parametrize("axes", AXES, ids=str)
def test_transpose(rng, backend, axes):
    X = rand(rng, 3, 4, 5)

    @em.compile
    def f(X: em.f32["A", 4, 5]):
        return em.transpose(X, axes), em.transpose(em.sin(X), axes) + 1.0
    check(f(X), (np.transpose(X, axes), np.sin(np.transpose(X, axes)) + 1), rtol=2e-5)


def test_T_and_transpose_method(rng):
    X = rand(rng, 4, 6)
    Y = rand(rng, 2, 3, 4)

    @em.compile
    def f(X: em.f32[4, 6], Y: em.f32[2, 3, 4]):
        return X.T, (X * 3.0).T, Y.T, Y.transpose(1, 2, 0), Y.transpose((2, 1, 0))
    check(f(X, Y), (X.T, (X * 3).T, Y.T, Y.transpose(1, 2, 0), Y.transpose(2, 1, 0)))


def test_squeeze_unsqueeze(rng, backend):
    X = rand(rng, 1, 4, 1, 3)

    @em.compile
    def f(X: em.f32[1, 4, 1, 3]):
        e = em.exp(X)
        return (em.squeeze(X), em.squeeze(X, axis=0), em.squeeze(e, axis=(0, 2)), em.squeeze(X, axis=-2),
                em.squeeze(X, axis=()), em.unsqueeze(e, 0), em.unsqueeze(X, -1), em.unsqueeze(em.squeeze(X), 1))
    E = np.exp(X)
    check(f(X), (np.squeeze(X), np.squeeze(X, 0), np.squeeze(E, (0, 2)), np.squeeze(X, -2), X,
                 np.expand_dims(E, 0), np.expand_dims(X, -1), np.expand_dims(np.squeeze(X), 1)), rtol=2e-5)


def test_symbolic_steps(rng, backend):
    X = rand(rng, 7, 4)

    @em.compile
    def f(X: em.f32["N", "M"]):
        return X[::-1], X[::2, ::-3], X[::-2] * 2.0, X[::-1] + X
    for x in (X, rand(rng, 4, 5)):
        check(f(x), (x[::-1], x[::2, ::-3], x[::-2] * 2, x[::-1] + x))


def test_flip(rng, backend):
    X = rand(rng, 5, 4, 3)

    @em.compile
    def f(X: em.f32["N", 4, 3]):
        return em.flip(X), em.flip(X, axis=0), em.flip(em.cos(X), axis=(0, 2)), em.flip(X, -1), X[::-1, :, ::-1]
    check(f(X), (np.flip(X), np.flip(X, 0), np.flip(np.cos(X), (0, 2)), np.flip(X, -1), X[::-1, :, ::-1]),
          rtol=2e-5)


def test_concat(rng, backend):
    A, B, C = rand(rng, 4, 2), rand(rng, 4, 3), rand(rng, 4, 1)
    I = rng.integers(1, 9, size=(4, 2)).astype(np.int32)

    @em.compile
    def f(A: em.f32["N", 2], B: em.f32["N", 3], C: em.f32["N", 1], I: em.i32["N", 2]):
        return (em.concat([A, B, C], axis=1), em.concat((em.exp(A), -A), axis=0), em.concat([A, I], axis=-1),
                em.concat([I, I * 2]), em.concat([A, B], axis=None), em.concat([A]))
    got = f(A, B, C, I)
    check(got, (np.concatenate([A, B, C], 1), np.concatenate([np.exp(A), -A], 0), np.concatenate([A, I], -1),
                np.concatenate([I, I * 2]), np.concatenate([A, B], None), A), rtol=2e-5)
    assert got[2].dtype == em.f32 and got[3].dtype == em.i32


def test_stack(rng, backend):
    A, B = rand(rng, 3, 4), rand(rng, 3, 4)

    @em.compile
    def f(A: em.f32[3, 4], B: em.f32[3, 4]):
        return em.stack([A, B]), em.stack([A, B, A * B], axis=1), em.stack((em.sqrt(em.abs(A)), B), axis=-1)
    check(f(A, B), (np.stack([A, B]), np.stack([A, B, A * B], 1), np.stack([np.sqrt(np.abs(A)), B], -1)), rtol=2e-5)


def test_repeat(rng, backend):
    X = rand(rng, 3, 4)

    @em.compile
    def f(X: em.f32["N", 4]):
        return em.repeat(X, 2, axis=0), em.repeat(X, 3, 1), em.repeat(X, 2), em.repeat(em.exp(X), 1, axis=-1)
    check(f(X), (np.repeat(X, 2, 0), np.repeat(X, 3, 1), np.repeat(X, 2), np.exp(X)), rtol=2e-5)


def test_broadcast_to(rng, backend):
    r, c = rand(rng, 4), rand(rng, 3, 1)

    @em.compile
    def f(r: em.f32[4], c: em.f32[3, 1], s: em.f32):
        return em.broadcast_to(r, (3, 4)), em.broadcast_to(em.exp(c), (2, 3, 5)), em.broadcast_to(s, (2, 3)), \
            em.broadcast_to(2.5, (2,))
    check(f(r, c, 1.5), (np.broadcast_to(r, (3, 4)), np.broadcast_to(np.exp(c), (2, 3, 5)), np.full((2, 3), 1.5),
                         np.full((2,), 2.5)), rtol=2e-5)


def test_slicing_steps_and_negative_bounds(rng, backend):
    X = rand(rng, 7, 6)
    cases = [lambda x: x[::-1], lambda x: x[5:1:-2], lambda x: x[-3:], lambda x: x[-1], lambda x: x[:, -1],
             lambda x: x[-2, ::-2], lambda x: x[1:-1, -5:-1:2], lambda x: x[::3, ::-4], lambda x: x[100:],
             lambda x: x[-100:2], lambda x: x[2:0:-1, 4:-7:-3], lambda x: x[None, -1, ..., 1:]]

    @em.compile
    def f(X: em.f32[7, 6]):
        return tuple(c(X) for c in cases)
    got = f(X)
    for i, (g, c) in enumerate(zip(got, cases)):
        w = c(X)
        assert g.shape == w.shape, (i, g.shape, w.shape)
        np.testing.assert_array_equal(g.numpy(), w, err_msg=f"case {i}")


# Elementwise chains through the remaps compile to one kernel.
CHAINS = {
    "reshape_T": (lambda x: em.exp(x).reshape(3, 8).T + 1.0, lambda x: np.exp(x).reshape(3, 8).T + 1),
    "transpose": (lambda x: em.transpose(em.sin(x) * 2.0) - x.T, lambda x: np.transpose(np.sin(x) * 2) - x.T),
    "flip": (lambda x: em.flip(em.exp(x), axis=1) * x, lambda x: np.flip(np.exp(x), 1) * x),
    "concat": (lambda x: em.concat([em.exp(x), x * 2.0, x[:, :1]], axis=1) + 1.0,
               lambda x: np.concatenate([np.exp(x), x * 2, x[:, :1]], 1) + 1),
    "stack": (lambda x: em.stack([em.exp(x), x], axis=0) * 3.0, lambda x: np.stack([np.exp(x), x], 0) * 3),
    "repeat": (lambda x: em.repeat(em.cos(x), 2, axis=1) + 1.0, lambda x: np.repeat(np.cos(x), 2, 1) + 1),
    "squeeze": (lambda x: em.squeeze(em.unsqueeze(em.exp(x), 1)) * 2.0, lambda x: np.exp(x) * 2),
    "slices": (lambda x: em.exp(x)[::-1, 1::2] * x[-4:, :-3], lambda x: np.exp(x)[::-1, 1::2] * x[-4:, :-3]),
    "everything": (lambda x: em.flip(em.concat([em.exp(x).reshape(6, 4).T, em.sin(x).reshape(4, 6)], 1), 0)
                   .reshape(2, 2, 12).transpose(2, 0, 1) * 2.0,
                   lambda x: np.flip(np.concatenate([np.exp(x).reshape(6, 4).T, np.sin(x).reshape(4, 6)], 1), 0)
                   .reshape(2, 2, 12).transpose(2, 0, 1) * 2),
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_elementwise_chain_through_remaps_is_one_kernel(rng, backend, name):
    fn, ref = CHAINS[name]
    X = rand(rng, 4, 6)

    @em.compile
    def f(X: em.f32[4, 6]):
        return fn(X)
    check(f(X), ref(X), rtol=2e-5)
    assert f.kernel_count == 1, f.ir()


def test_chain_with_symbolic_dims_is_one_kernel(rng, backend):
    @em.compile
    def f(X: em.f32["N", 4]):
        y = em.concat([em.exp(X), em.flip(X, 0)], axis=1)       # [N, 8]
        return em.transpose(y.reshape(-1, 2, 4), (1, 0, 2)) + 1.0
    for n in (3, 6):
        X = rand(rng, n, 4)
        y = np.concatenate([np.exp(X), np.flip(X, 0)], 1)
        check(f(X), np.transpose(y.reshape(-1, 2, 4), (1, 0, 2)) + 1, rtol=2e-5)
    assert f.kernel_count == 1, f.ir()


def test_concat_along_a_symbolic_axis_is_one_kernel(rng, backend):
    @em.compile
    def f(X: em.f32["N", 5]):
        return em.concat([em.exp(X), em.sin(X)], axis=0) * 2.0
    X = rand(rng, 6, 5)
    check(f(X), np.concatenate([np.exp(X), np.sin(X)], 0) * 2, rtol=2e-5)
    assert f.kernel_count == 1, f.ir()


def test_reduction_of_a_remap(rng, backend):
    X = rand(rng, 4, 6)

    @em.compile
    def f(X: em.f32[4, 6]):
        return em.sum(em.exp(X).reshape(3, 8).T, axis=1), em.max(em.concat([X, -X], 0), axis=0)
    check(f(X), (np.exp(X).reshape(3, 8).T.sum(1), np.concatenate([X, -X], 0).max(0)), rtol=2e-5)


def _raises(cls, match, fn, a, b=None):
    """Tracing fn(x) (or fn(x, y)) with these annotations raises cls naming the line of fn (the
    caller's line, where the lambda is)."""
    line = sys._getframe(1).f_lineno
    if b is None:
        def g(x: a):
            return fn(x)
    else:
        def g(x: a, y: b):
            return fn(x, y)
    with pytest.raises(cls, match=match) as ei:
        em.compile(g).ir("traced")
    assert f"{HERE}:{line}" in str(ei.value), str(ei.value)


def test_errors_name_the_user_line():
    A = em.f32[4, 6]
    _raises(em.ShapeError, "cannot reshape", lambda x: x.reshape(5, 5), A)
    _raises(em.ShapeError, "cannot reshape", lambda x: x.reshape(-1, 5), A)
    _raises(em.ShapeError, "only one", lambda x: x.reshape(-1, -1), A)
    _raises(em.ShapeError, "squeeze", lambda x: em.squeeze(x, 0), A)
    _raises(em.ShapeError, "transpose", lambda x: em.transpose(x, (0, 0)), A)
    _raises(em.ShapeError, "transpose", lambda x: em.transpose(x, (0,)), A)
    _raises(em.ShapeError, "concat", lambda x, y: em.concat([x, y], axis=1), A, em.f32[3, 6])
    _raises(em.ShapeError, "stack", lambda x, y: em.stack([x, y]), A, em.f32[6, 4])
    _raises(em.ShapeError, "flip", lambda x: em.flip(x, 2), A)
    _raises(em.ShapeError, "out of range", lambda x: x[-5], A)
    _raises(em.TypeError, "int count", lambda x: em.repeat(x, 1.5), A)
    _raises(em.ShapeError, "symbolic", lambda x: x[1:], em.f32["N"])
