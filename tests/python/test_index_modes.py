"""em.gather / em.scatter with index modes "clamp" (= NumPy's "clip"), "wrap" and "unsafe",
against np.take / np.put on random data, for loads, stores and atomics, compiled on the CPU
backend (host plan interpreted, kernels compiled)."""
import os
import sys

import numpy as np
import pytest

import ember as em

HERE = os.path.basename(__file__)
NP_MODE = {"clamp": "clip", "clip": "clip", "wrap": "wrap"}


def rand_f32(rng, *shape):
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    x[x == 0] = 0.5
    return x


# Loads ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["clamp", "clip", "wrap"])
def test_gather_1d_matches_np_take(rng, mode):
    @em.compile
    def take(A: em.f32["N"], I: em.i32["M"]):  # noqa: F821
        return em.gather(A, I, mode=mode)
    A = rand_f32(rng, 37)
    I = rng.integers(-100, 140, 500).astype(np.int32)  # far out of range on both sides
    np.testing.assert_array_equal(take(A, I).numpy(), np.take(A, I, mode=NP_MODE[mode]))
    assert ("wrap" in take.ir("traced")) == (mode == "wrap")


def test_gather_unsafe_in_range(rng):
    @em.compile
    def take(A: em.f32["N"], I: em.i32["M"]):  # noqa: F821
        return em.gather(A, I, mode="unsafe")
    A = rand_f32(rng, 37)
    I = rng.integers(0, 37, 500).astype(np.int32)
    np.testing.assert_array_equal(take(A, I).numpy(), np.take(A, I))
    assert "unsafe" in take.ir("traced")


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
def test_gather_2d_index_tensors_and_slices(rng, mode):
    @em.compile
    def g(A: em.f32["H", "W"], I: em.i32["M"], J: em.i32["M"]):  # noqa: F821
        return em.gather(A, (I, J), mode=mode), em.gather(A, (slice(None), J), mode=mode)
    A = rand_f32(rng, 9, 13)
    I = rng.integers(-30, 30, 200).astype(np.int32)
    J = rng.integers(-30, 30, 200).astype(np.int32)
    both, cols = (t.numpy() for t in g(A, I, J))
    if mode == "wrap":
        want_both, want_cols = A[I % 9, J % 13], A[:, J % 13]
    else:
        want_both, want_cols = A[np.clip(I, 0, 8), np.clip(J, 0, 12)], A[:, np.clip(J, 0, 12)]
    np.testing.assert_array_equal(both, want_both)
    np.testing.assert_array_equal(cols, want_cols)


def test_wrap_stencil_in_a_kernel(rng):
    """A periodic 1-D stencil: the neighbours of the ends wrap around (np.roll)."""
    @em.compile
    def blur(A: em.f32["N"]):  # noqa: F821
        n = A.shape[0]
        out = em.buffer(A.shape, em.f32)
        with em.kernel(n) as i:
            out[i] = (em.gather(A, i - 1, mode="wrap") + A[i] + em.gather(A, i + 1, mode="wrap")) / 3.0
        return out
    A = rand_f32(rng, 1001)
    want = (np.roll(A, 1) + A + np.roll(A, -1)) / np.float32(3)
    np.testing.assert_allclose(blur(A).numpy(), want, rtol=1e-6)


def test_gather_default_is_clamp_like_subscript(rng):
    @em.compile
    def g(A: em.f32["N"], I: em.i32["M"]):  # noqa: F821
        return em.gather(A, I), A[I]
    A = rand_f32(rng, 20)
    I = rng.integers(-50, 50, 100).astype(np.int32)
    a, b = (t.numpy() for t in g(A, I))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, np.take(A, I, mode="clip"))


# Stores -----------------------------------------------------------------------------------------------

def _distinct_targets(rng, n, mode):
    """Indices out of range on both sides whose in-range images under `mode` are a permutation."""
    perm = rng.permutation(n).astype(np.int64)
    if mode == "wrap":
        return (perm + n * rng.integers(-3, 4, n)).astype(np.int32)
    idx = perm.copy()
    idx[perm == 0] = -17       # clamps to 0
    idx[perm == n - 1] = n + 5  # clamps to n - 1
    return idx.astype(np.int32)


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
def test_scatter_matches_np_put(rng, mode):
    @em.compile
    def put(Out: em.f32["N"], I: em.i32["M"], V: em.f32["M"]):  # noqa: F821
        em.scatter(Out, I, V, mode=mode)
        return Out
    n = 301
    I = _distinct_targets(rng, n, mode)
    V = rand_f32(rng, n)
    want = np.zeros(n, np.float32)
    np.put(want, I, V, mode=NP_MODE[mode])
    np.testing.assert_array_equal(put(np.zeros(n, np.float32), I, V).numpy(), want)


@pytest.mark.parametrize("mode", ["clamp", "wrap", "unsafe"])
def test_scatter_in_an_explicit_kernel(rng, mode):
    @em.compile
    def put(I: em.i32["N"], V: em.f32["N"]):  # noqa: F821
        n = I.shape[0]
        out = em.zeros(I.shape, em.f32)
        with em.kernel(n) as t:
            em.scatter(out, I[t], V[t] * 2.0, mode=mode)
        return out
    n = 257
    I = rng.permutation(n).astype(np.int32) if mode == "unsafe" else _distinct_targets(rng, n, mode)
    V = rand_f32(rng, n)
    want = np.zeros(n, np.float32)
    np.put(want, I, V * 2, mode=NP_MODE.get(mode, "raise"))
    np.testing.assert_array_equal(put(I, V).numpy(), want)


def test_scatter_2d_wrap(rng):
    @em.compile
    def put(I: em.i32["M"], J: em.i32["M"], V: em.f32["M"]):  # noqa: F821
        out = em.zeros((6, 7), em.f32)
        em.scatter(out, (I, J), V, mode="wrap")
        return out
    flat = rng.permutation(42)
    I = (flat // 7 + 6 * rng.integers(-2, 3, 42)).astype(np.int32)
    J = (flat % 7 + 7 * rng.integers(-2, 3, 42)).astype(np.int32)
    V = rand_f32(rng, 42)
    want = np.zeros((6, 7), np.float32)
    want[I % 6, J % 7] = V
    np.testing.assert_array_equal(put(I, J, V).numpy(), want)


def test_atomic_on_a_wrapped_gather(rng):
    @em.compile
    def hist(B: em.i32["N"]):  # noqa: F821
        H = em.zeros((10,), em.i32)
        with em.kernel(B.shape[0]) as i:
            em.atomic_add(em.gather(H, B[i], mode="wrap"), 1)
        return H
    B = rng.integers(-55, 55, 3000).astype(np.int32)
    np.testing.assert_array_equal(hist(B).numpy(), np.bincount(B % 10, minlength=10))


# Errors -----------------------------------------------------------------------------------------------

def _trace(body):
    @em.compile
    def f(A: em.f32["N"], I: em.i32["N"]):  # noqa: F821
        return body(A, I)
    return f(np.ones(4, np.float32), np.zeros(4, np.int32))


@pytest.mark.parametrize("bad", ["mirror", "CLAMP", None, 2])
def test_bad_mode_is_a_type_error(bad):
    lines = {}

    def body(A, I):
        lines["bad"] = sys._getframe().f_lineno + 1
        return em.gather(A, I, mode=bad)
    with pytest.raises(em.TypeError) as ei:
        _trace(body)
    msg = str(ei.value)
    assert repr(bad) in msg and "'clamp'" in msg and "'wrap'" in msg and "'unsafe'" in msg, msg
    assert f"{HERE}:{lines['bad']}" in msg, msg
    assert isinstance(ei.value, TypeError)

    def store(A, I):
        em.scatter(A, I, 1.0, mode=bad)
    with pytest.raises(em.TypeError, match="em.scatter: unknown index mode"):
        _trace(store)


def test_gather_and_scatter_need_traced_tensors():
    with pytest.raises(em.TypeError, match="em.gather needs a traced tensor"):
        _trace(lambda A, I: em.gather(np.ones(3), I))
    with pytest.raises(em.Error, match="em.scatter can only be used inside"):
        em.scatter(np.ones(3), 0, 1.0)
