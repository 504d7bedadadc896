"""End to end: reductions, indexing, gather/scatter, control flow, kernels and atomics, multiple
returns, call-time argument checks and introspection, against NumPy on random inputs."""
import numpy as np
import pytest

import ember as em



def rand(rng, *shape, lo=-2.0, hi=2.0):
    x = rng.uniform(lo, hi, size=shape).astype(np.float32)
    x[x == 0] = 0.25
    return x


AXES = [None, 0, 1, -1, (0, 2), (1, 2)]


@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(rng, backend, axis, keepdims):
    X = rand(rng, 5, 6, 7, lo=0.8, hi=1.2)

    @em.compile
    def f(X: em.f32["A", "B", 7]):
        kw = dict(axis=axis, keepdims=keepdims)
        return em.sum(X, **kw), em.mean(X, **kw), em.max(X, **kw), em.min(X, **kw), em.prod(X, **kw), \
            em.any(X > 1.1, **kw), em.all(X > 0.81, **kw)
    got = f(X)
    kw = dict(axis=axis, keepdims=keepdims)
    want = (X.sum(**kw), X.mean(**kw), X.max(**kw), X.min(**kw), X.prod(**kw), (X > 1.1).any(**kw),
            (X > 0.81).all(**kw))
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == np.shape(w), i
        np.testing.assert_allclose(g.numpy(), w, rtol=2e-5, err_msg=f"output {i}")


def test_nbody_step_of_the_design(rng, backend):
    @em.compile
    def step(X: em.f32["N", 3], V: em.f32["N", 3], dt: em.f32):
        d = X[:, None, :] - X[None, :, :]
        r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-4
        F = em.sum(-d / (r2 * em.sqrt(r2)), axis=1)
        V2 = V + F * dt
        return X + V2 * dt, V2
    X, V = rand(rng, 64, 3), rand(rng, 64, 3, lo=-0.1, hi=0.1)
    d = X[:, None, :] - X[None, :, :]
    r2 = np.sum(d * d, axis=-1, keepdims=True) + np.float32(1e-4)
    V2 = V + np.sum(-d / (r2 * np.sqrt(r2)), axis=1) * np.float32(0.01)
    X2g, V2g = step(X, V, 0.01)
    np.testing.assert_allclose(V2g.numpy(), V2, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(X2g.numpy(), X + V2 * np.float32(0.01), rtol=1e-4, atol=1e-5)
    X3, _ = step(X2g, V2g, 0.01)  # em.Tensor results feed the next call
    assert X3.shape == (64, 3)


def test_slicing(rng, backend):
    X = rand(rng, 6, 8)

    @em.compile
    def f(X: em.f32[6, 8]):
        return X[1:, ::2], X[:, None], X[..., 0], X[-1], X[::-1, 2:7:3], X[None, 2, :, None], X.T, X[2, 3]
    got = f(X)
    want = (X[1:, ::2], X[:, None], X[..., 0], X[-1], X[::-1, 2:7:3], X[None, 2, :, None], X.T, X[2, 3])
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (i, g.shape, w.shape)
        np.testing.assert_array_equal(g.numpy(), w, err_msg=f"output {i}")


def test_gather_with_index_tensors(rng, backend):
    A = rand(rng, 10, 4)
    I = rng.integers(0, 10, size=(5, 3)).astype(np.int32)
    J = rng.integers(0, 4, size=(3,)).astype(np.int32)

    @em.compile
    def f(A: em.f32["N", 4], I: em.i32[5, 3], J: em.i32[3]):
        return A[I], A[I, J], A[I + 100, 0], A[:, J]
    g1, g2, g3, g4 = f(A, I, J)
    np.testing.assert_array_equal(g1.numpy(), A[I])
    np.testing.assert_array_equal(g2.numpy(), A[I, J])
    np.testing.assert_array_equal(g3.numpy(), A[np.full_like(I, 9), 0])  # clamped by default
    np.testing.assert_array_equal(g4.numpy(), A[:, J])


def test_scatter(rng, backend):
    n = 50
    V = rand(rng, n)
    P = rng.permutation(n).astype(np.int32)

    @em.compile
    def f(V: em.f32["N"], P: em.i32["N"]):
        out = em.zeros((V.shape[0] * 2,), em.f32)
        out[P] = V
        out[P + V.shape[0]] = V * 2.0
        return out
    want = np.zeros(2 * n, np.float32)
    want[P] = V
    want[P + n] = V * 2
    np.testing.assert_array_equal(f(V, P).numpy(), want)


def test_indices(rng, backend):
    X = rand(rng, 4, 5)

    @em.compile
    def f(X: em.f32["H", "W"]):
        i, j = em.indices(X.shape)
        return X * i + j
    ii, jj = np.indices(X.shape)
    np.testing.assert_allclose(f(X).numpy(), X * ii + jj, rtol=1e-6)


def test_host_loop_with_var(rng, backend):
    X = rand(rng, 33)

    @em.compile
    def f(X: em.f32["N"], n: em.i32):
        v = em.var(X)
        with em.loop(n) as k:
            v.val = v.val * 0.5 + em.f32(k)
        return v.val
    want = X.copy()
    for k in range(5):
        want = want * np.float32(0.5) + np.float32(k)
    np.testing.assert_allclose(f(X, 5).numpy(), want, rtol=1e-6)


def test_kernel_loop_if_else_break_continue(rng, backend):
    X = rand(rng, 40, lo=0.1, hi=3.0)

    @em.compile
    def f(X: em.f32["N"], n: em.i32, limit: em.f32):
        out = em.zeros(X.shape, em.f32)
        with em.kernel(X.shape[0]) as i:
            acc = em.var(0.0)
            with em.loop(1, n, 2) as k:
                with em.if_(k % 3 == 0):
                    em.continue_()
                with em.if_(X[i] > 1.5):
                    acc.val += X[i] * k
                with em.else_():
                    acc.val -= 1.0
                with em.if_(acc > limit):
                    em.break_()
            out[i] = acc.val
        return out

    def ref(x, n, limit):
        acc = np.float32(0)
        for k in range(1, n, 2):
            if k % 3 == 0:
                continue
            acc = acc + x * np.float32(k) if x > 1.5 else acc - np.float32(1)
            if acc > limit:
                break
        return acc
    want = np.array([ref(x, 20, np.float32(30.0)) for x in X], np.float32)
    np.testing.assert_allclose(f(X, 20, 30.0).numpy(), want, rtol=1e-6)


def test_tensor_if_else_at_host_level(rng, backend):
    X = rand(rng, 30)

    @em.compile
    def f(X: em.f32["N"]):
        v = em.var(X)
        with em.if_(X > 0):
            v.val = X * 10.0
        with em.else_():
            v.val = -X
        return v.val
    np.testing.assert_allclose(f(X).numpy(), np.where(X > 0, X * 10, -X), rtol=1e-6)


def test_kernel_atomics_histogram(rng, backend):
    B = rng.integers(0, 16, size=500).astype(np.int32)
    V = rand(rng, 500)

    @em.compile
    def f(B: em.i32["N"], V: em.f32["N"]):
        H = em.zeros((16,), em.i32)
        S = em.zeros((16,), em.f32)
        M = em.zeros((16,), em.f32)
        with em.kernel(B.shape) as (i,):
            em.atomic_add(H[B[i]], 1)
            em.atomic_add(S[B[i]], V[i])
            em.atomic_max(M[B[i]], V[i])
        return H, S, M
    H, S, M = f(B, V)
    np.testing.assert_array_equal(H.numpy(), np.bincount(B, minlength=16))
    np.testing.assert_allclose(S.numpy(), np.bincount(B, weights=V, minlength=16), rtol=1e-4, atol=1e-5)
    want = np.zeros(16, np.float32)
    np.maximum.at(want, B, V)
    np.testing.assert_array_equal(M.numpy(), want)


def test_integer_atomics(rng, backend):
    B = rng.integers(0, 8, size=200).astype(np.int32)
    V = rng.integers(1, 1 << 20, size=200).astype(np.int32)

    @em.compile
    def f(B: em.i32["N"], V: em.i32["N"]):
        lo = em.zeros((8,), em.i32)
        ored = em.zeros((8,), em.i32)
        xored = em.zeros((8,), em.i32)
        with em.kernel(B.shape[0]) as i:
            em.atomic_min(lo[B[i]], -V[i])
            em.atomic_or(ored[B[i]], V[i])
            em.atomic_xor(xored[B[i]], V[i])
        return lo, ored, xored
    lo, ored, xored = f(B, V)
    want_lo, want_or, want_xor = np.zeros(8, np.int32), np.zeros(8, np.int32), np.zeros(8, np.int32)
    np.minimum.at(want_lo, B, -V)
    np.bitwise_or.at(want_or, B, V)
    np.bitwise_xor.at(want_xor, B, V)
    for g, w in ((lo, want_lo), (ored, want_or), (xored, want_xor)):
        np.testing.assert_array_equal(g.numpy(), w)


def test_multiple_returns_constants_and_none(rng, backend):
    X = rand(rng, 9)

    @em.compile
    def f(X: em.f32["N"], s: float):
        return X * s, em.sum(X), 3, 0.5

    a, b, c, d = f(X, 2.0)
    np.testing.assert_allclose(a.numpy(), X * 2)
    np.testing.assert_allclose(float(b), X.sum(dtype=np.float64), rtol=1e-4, atol=1e-5)
    assert b.shape == () and int(c) == 3 and c.dtype == em.i32 and float(d) == 0.5

    @em.compile
    def g(X: em.f32["N"]):
        X[0] = 42.0
    assert g(X) is None


def test_inputs_outputs_and_copies(rng, backend):
    @em.compile
    def ident(X: em.f32["N", 2]):
        return X
    X = rand(rng, 5, 2)
    Y = ident(X)
    X[0, 0] = 99.0  # the result never aliases the caller's array
    assert Y.numpy()[0, 0] != 99.0
    big = rand(rng, 5, 4)
    np.testing.assert_array_equal(ident(big[:, ::2]).numpy(), big[:, ::2])  # non-contiguous: copied
    ro = rand(rng, 3, 2)
    ro.flags.writeable = False
    np.testing.assert_array_equal(ident(ro).numpy(), ro)
    np.testing.assert_array_equal(ident(X=em.tensor(X)).numpy(), X)

    @em.compile
    def flip(P: em.bool["N"]):
        return ~P
    P = rng.uniform(size=11) > 0.5
    np.testing.assert_array_equal(flip(P).numpy(), ~P)


def test_call_time_errors(rng, backend):
    @em.compile
    def f(X: em.f32["N", 3], V: em.f32["N", 3], k: em.i32, s: em.f32):
        return X + V * s + k
    X, V = rand(rng, 4, 3), rand(rng, 4, 3)
    with pytest.raises(em.ShapeError, match="'V'.*expected f32\\[N, 3\\]") as ei:
        f(X, rand(rng, 4, 2), 1, 1.0)
    assert isinstance(ei.value, ValueError)
    with pytest.raises(em.ShapeError, match="'V'.*N = 4 .*'X'"):
        f(X, rand(rng, 5, 3), 1, 1.0)
    with pytest.raises(em.ShapeError, match="'X'.*2 dimensions"):
        f(rand(rng, 12), V, 1, 1.0)
    with pytest.raises(em.TypeError, match="'X'.*float32.*float64") as ei:
        f(X.astype(np.float64), V, 1, 1.0)
    assert isinstance(ei.value, TypeError)
    with pytest.raises(em.TypeError, match="'V'.*i32"):
        f(X, em.tensor(V.astype(np.int32)), 1, 1.0)
    with pytest.raises(em.TypeError, match="'k'.*i32.*float"):
        f(X, V, 1.5, 1.0)
    with pytest.raises(em.TypeError, match="'k'.*does not fit"):
        f(X, V, 2 ** 40, 1.0)
    with pytest.raises(em.TypeError, match="'X'.*list"):
        f(X.tolist(), V, 1, 1.0)
    with pytest.raises(em.TypeError, match="missing"):
        f(X, V)
    got = f(X, V, np.int32(2), 3)  # an int for an f32 scalar is fine
    np.testing.assert_allclose(got.numpy(), X + V * 3 + 2, rtol=1e-6)


def test_repeated_tensor_arguments_skip_only_their_own_checks(rng, backend):
    """A call passing the last call's em.Tensors again reuses their shape checks (the fast path);
    its scalars and any other tensor are still checked, and a tensor that died is not reused."""
    @em.compile
    def f(X: em.f32["N", 3], V: em.f32["N", 3], k: em.i32):
        return X + V * k
    X, V = rand(rng, 4, 3), rand(rng, 4, 3)
    tx, tv = em.tensor(X), em.tensor(V)
    for k in (1, 2, -3):  # the first call checks, the next two reuse its checks
        np.testing.assert_allclose(f(tx, tv, k).numpy(), X + V * k, rtol=1e-6)
    with pytest.raises(em.TypeError, match="'k'.*i32.*float"):
        f(tx, tv, 1.5)
    with pytest.raises(em.ShapeError, match="'V'.*N = 4 .*'X'"):
        f(tx, em.tensor(rand(rng, 5, 3)), 1)
    W = rand(rng, 4, 3)
    np.testing.assert_allclose(f(tx, em.tensor(W), 2).numpy(), X + W * 2, rtol=1e-6)
    del tv
    with pytest.raises(em.ShapeError, match="'X'.*2 dimensions"):
        f(em.tensor(rand(rng, 12)), em.tensor(W), 1)
    np.testing.assert_allclose(f(X, W, 3).numpy(), X + W * 3, rtol=1e-6)  # NumPy arrays: checked each call


def test_introspection(rng, monkeypatch):
    # The pass records are read below: a program-cache hit (the suite run again with the same
    # cache) would have none. tests/python/test_program_cache.py covers the hit.
    monkeypatch.setenv("EMBER_PROGRAM_CACHE", "0")

    @em.compile
    def f(X: em.f32["N"], Y: em.f32["N"]):
        return em.sqrt(X * X + Y * Y)
    assert "sqrt" in f.ir("traced")
    assert f.kernel_count >= 1
    assert "kernel" in f.ir() and f.ir("final") == f.ir()
    src = f.source("cpp")
    assert isinstance(src, str) and "sqrt" in src and f.source() == src
    st = f.stats
    for key in ("passes", "passes_ms", "codegen_ms", "compile_ms", "cache_hit", "kernels", "buffers", "cache_key",
                "program_cache_hit", "program_cache_key"):
        assert key in st, key
    assert st["kernels"] == f.kernel_count and isinstance(st["cache_hit"], bool)
    assert {"name", "ms", "changed"} <= set(st["passes"][0])
    names = [p["name"] for p in st["passes"]]
    assert "fuse_kernels" in names
    assert "kernel" in f.ir("fuse_kernels")
    # A cleanup pass runs several times: its name shows the last run, "<name>#<k>" run k, and the
    # first line says which run it is.
    runs = names.count("simplify")
    assert runs >= 2
    last = f.ir("simplify")
    assert last.startswith(f"// simplify: the last of its {runs} runs (cleanup after ")
    assert last.split("\n", 1)[1] == f.ir(f"simplify#{runs}").split("\n", 1)[1]
    assert f.ir("simplify#1").startswith(f"// simplify, run 1 of {runs} (cleanup after lower_algorithms)")
    assert "program f" in f.ir("simplify#1")
    with pytest.raises(em.Error, match="simplify#1"):
        f.ir("simplify#0")
    X = rand(rng, 16)
    np.testing.assert_allclose(f(X, X).numpy(), np.sqrt(2 * X * X), rtol=1e-6)


def test_compiling_keeps_no_copy_of_the_trace_until_a_stage_is_asked_for(rng, monkeypatch):
    # Compiling lowers the traced program itself (a copy of it is a pass over the whole program,
    # issue 17); ir(stage) and explain() trace the function again, once, and compile it keeping
    # one. The traced program does not depend on where it was traced from (the call or ir()), so
    # its digest and the program cache key stay the same.
    monkeypatch.setenv("EMBER_PROGRAM_CACHE", "0")

    @em.compile
    def f(X: em.f32["N"]):
        return em.exp(X) * 2.0, X + 1.0

    X = rand(rng, 8)
    f(X)
    be = em.backend()
    assert not f._compiled[be].has_trace
    digest = f.stats["traced_digest"]
    assert "kernel" in f.ir() and not f._compiled[be].has_trace  # "final" needs no trace
    assert "exp" in f.ir("traced") and not f._compiled[be].has_trace
    assert "kernel" in f.ir("fuse_kernels")
    cp = f._compiled[be]
    assert cp.has_trace and f.stats["traced_digest"] == digest
    assert f.explain().startswith("all fused") and f._compiled[be] is cp  # traced once
    a, b = f(X)
    np.testing.assert_allclose(a.numpy(), np.exp(X) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), X + 1.0, rtol=1e-6)


def test_numpy_arguments_are_not_copied(rng, backend):
    from ember._tensor import from_numpy_arg
    a = rand(rng, 6, 2)
    t = from_numpy_arg(a, em.f32)
    assert t._data_ptr == a.ctypes.data  # zero-copy view that keeps `a` alive
    del a
    assert t.numpy().shape == (6, 2)
    b = rand(rng, 6, 4)[:, ::2]
    assert from_numpy_arg(b, em.f32)._data_ptr != b.ctypes.data  # non-contiguous: a copy

    @em.compile
    def g(X: em.f32["N"]):
        X[0] = 42.0
    X = rand(rng, 5)
    g(X)  # writes into an argument reach the caller's array
    assert X[0] == 42.0


def test_scalar_casts_wrap_like_c(rng, backend):
    @em.compile
    def f(X: em.i32["N"]):
        return X + em.i32(2 ** 32 - 1), em.u32(-1) + em.u32(X), em.f32(3) * X, em.i32(2.9) + X
    X = rng.integers(0, 100, size=7).astype(np.int32)
    a, b, c, d = f(X)
    np.testing.assert_array_equal(a.numpy(), X - 1)
    np.testing.assert_array_equal(b.numpy(), (X - 1).astype(np.uint32))
    np.testing.assert_array_equal(c.numpy(), 3.0 * X)
    np.testing.assert_array_equal(d.numpy(), X + 2)
