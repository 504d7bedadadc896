"""Workgroups: em.kernel(shape, group=...), em.group_buffer, em.barrier, em.local_index and
em.group_index against NumPy on random inputs (the C++ tests in tests/cpp/test_group.cpp also
compare every program with the phase-by-phase interpreter), and the user errors."""
import sys

import numpy as np
import pytest

import ember as em

G = 256


def line_of_next_statement():
    """The caller's line + 1: where a traced call on the following line reports its error."""
    return sys._getframe(1).f_lineno + 1


@em.compile
def block_sum(X: em.f32["N"]):
    n = X.shape[0]
    out = em.zeros(((n + G - 1) // G,), em.f32)
    with em.kernel(n, group=G) as i:
        buf = em.group_buffer(G, em.f32)
        l = em.local_index()
        buf[l] = X[i]
        em.barrier()
        with em.loop(8) as k:  # s = 128, 64, ..., 1: the same on every thread
            s = (G // 2) >> k
            with em.if_((l < s) & (i + s < n)):  # threads past N never wrote their slot
                buf[l] = buf[l] + buf[l + s]
            em.barrier()
        with em.if_(l == 0):
            out[em.group_index()] = buf[0]
    return out


@pytest.mark.parametrize("n", [1000, 1024, 4096 + 7, 3])
def test_block_reduction(rng, n):
    x = rng.uniform(-1, 1, n).astype(np.float32)
    got = block_sum(x).numpy()
    padded = np.zeros(-(-n // G) * G, np.float32)
    padded[:n] = x
    np.testing.assert_allclose(got, padded.reshape(-1, G).sum(axis=1), rtol=1e-4, atol=1e-5)


def test_block_reduction_program_shape():
    traced = block_sum.ir("traced")
    assert "group(256)" in traced and "barrier" in traced and "group_buffer f32[256]" in traced
    assert block_sum.kernel_count == 1
    assert "barrier" not in block_sum.ir("final")  # the CPU runs a group per thread
    src = block_sum.source("cpp")
    assert "alignas(64) float g0[256]" in src


T = 16


@em.compile
def tiled_matmul(A: em.f32["M", "K"], B: em.f32["K", "N"]):
    m, k, n = A.shape[0], A.shape[1], B.shape[1]
    C = em.zeros((m, n), em.f32)
    tiles = (k + T - 1) // T
    with em.kernel(((m + T - 1) // T * T, (n + T - 1) // T * T), group=(T, T)) as (i, j):
        As = em.group_buffer((T, T), em.f32)
        Bs = em.group_buffer((T, T), em.f32)
        li, lj = em.local_index()
        acc = em.var(0.0)
        with em.loop(tiles) as t:
            ka = t * T + lj
            kb = t * T + li
            As[li, lj] = em.where(ka < k, A[i, ka], 0.0)
            Bs[li, lj] = em.where(kb < k, B[kb, j], 0.0)
            em.barrier()
            with em.loop(T) as q:
                acc.val += As[li, q] * Bs[q, lj]
            em.barrier()
        with em.if_((i < m) & (j < n)):
            C[i, j] = acc
    return C


@pytest.mark.parametrize("mkn", [(50, 37, 45), (32, 16, 64)], ids=str)
def test_tiled_matmul(rng, mkn):
    m, k, n = mkn
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.testing.assert_allclose(tiled_matmul(a, b).numpy(), a @ b, rtol=1e-4, atol=1e-5)


S = 64


@em.compile
def stencil(X: em.f32["N"]):
    n = X.shape[0]
    Y = em.zeros((n,), em.f32)
    with em.kernel(n, group=S) as i:
        buf = em.group_buffer(S + 2, em.f32)  # the group's elements and one halo element per side
        l = em.local_index()
        c = X[i]
        buf[l + 1] = c
        with em.if_(l == 0):
            buf[0] = X[i - 1]  # clamped at the left edge
        with em.if_((l == S - 1) | (i == n - 1)):
            buf[l + 2] = X[i + 1]  # clamped at the right edge
        em.barrier()
        Y[i] = 0.25 * buf[l] + 0.5 * c + 0.25 * buf[l + 2]
    return Y


@pytest.mark.parametrize("n", [300, 64, 1])
def test_stencil_with_halo(rng, n):
    x = rng.uniform(-1, 1, n).astype(np.float32)
    p = np.pad(x, 1, mode="edge")
    want = np.float32(0.25) * p[:-2] + np.float32(0.5) * x + np.float32(0.25) * p[2:]
    np.testing.assert_allclose(stencil(x).numpy(), want, rtol=1e-5, atol=1e-6)


def test_group_and_local_index_2d():
    @em.compile
    def coords(X: em.f32["H", "W"]):
        h, w = X.shape
        L = em.zeros((h, w, 2), em.i32)
        Gr = em.zeros((h, w, 2), em.i32)
        with em.kernel((h, w), group=(4, 8)) as (i, j):
            li, lj = em.local_index()
            gi, gj = em.group_index()
            L[i, j, 0] = li
            L[i, j, 1] = lj
            Gr[i, j, 0] = gi
            Gr[i, j, 1] = gj
        return L, Gr
    L, Gr = coords(np.zeros((10, 21), np.float32))
    i, j = np.meshgrid(np.arange(10), np.arange(21), indexing="ij")
    np.testing.assert_array_equal(L.numpy(), np.stack([i % 4, j % 8], axis=-1))
    np.testing.assert_array_equal(Gr.numpy(), np.stack([i // 4, j // 8], axis=-1))


def test_group_histogram_with_atomics(rng):
    @em.compile
    def hist(X: em.i32["N"]):
        n = X.shape[0]
        out = em.zeros(((n + 127) // 128, 8), em.i32)
        with em.kernel(n, group=128) as i:
            bins = em.group_buffer(8, em.i32)
            l = em.local_index()
            em.atomic_add(bins[X[i] & 7], 1)
            em.barrier()
            with em.if_(l < 8):
                out[em.group_index(), l] = bins[l]
        return out
    x = rng.integers(0, 1000, 500).astype(np.int32)
    got = hist(x).numpy()
    padded = np.full(512, -1)
    padded[:500] = x & 7
    want = np.stack([(padded.reshape(-1, 128) == b).sum(axis=1) for b in range(8)], axis=1)
    np.testing.assert_array_equal(got, want)


def test_barriers_in_nested_uniform_loops_and_if_else(rng):
    """Barriers inside uniform loops (a short one the compiler unrolls) inside a uniform if/else;
    a var carried across all of them."""
    @em.compile
    def f(X: em.i32["N"]):
        n = X.shape[0]
        Y = em.zeros((n,), em.i32)
        with em.kernel(n, group=16) as i:
            buf = em.group_buffer(16, em.i32)
            l = em.local_index()
            v = em.var(X[i])
            with em.if_(em.group_index() % 2 == 0):
                with em.loop(2) as a:
                    with em.loop(3) as b:
                        buf[l] = v
                        em.barrier()
                        v.val = v + buf[(l + 1) % 16] * (a + b)
                        em.barrier()
            with em.else_():
                buf[l] = v * 3
                em.barrier()
                v.val = buf[15 - l]
            Y[i] = v
        return Y
    x = rng.integers(-5, 5, 64).astype(np.int32)
    want = x.astype(np.int64).reshape(-1, 16).copy()
    for g in range(want.shape[0]):
        if g % 2 == 0:
            for a in range(2):
                for b in range(3):
                    want[g] = want[g] + np.roll(want[g], -1) * (a + b)
        else:
            want[g] = (want[g] * 3)[::-1]
    np.testing.assert_array_equal(f(x).numpy(), want.reshape(-1).astype(np.int32))


# ---- errors --------------------------------------------------------------------------------


def test_barrier_outside_a_kernel():
    where = []

    @em.compile
    def f(X: em.f32["N"]):
        where.append(line_of_next_statement())
        em.barrier()
        return X
    with pytest.raises(em.CompileError) as e:
        f(np.zeros(4, np.float32))
    assert "em.barrier() outside an em.kernel" in str(e.value)
    assert f"test_group.py:{where[0]}" in str(e.value)


def test_group_buffer_outside_a_kernel():
    where = []

    @em.compile
    def f(X: em.f32["N"]):
        where.append(line_of_next_statement())
        em.group_buffer(64, em.f32)
        return X
    with pytest.raises(em.CompileError) as e:
        f(np.zeros(4, np.float32))
    assert "em.group_buffer() outside an em.kernel" in str(e.value)
    assert f"test_group.py:{where[0]}" in str(e.value)


def test_workgroup_calls_outside_a_traced_function():
    with pytest.raises(em.CompileError, match="em.barrier"):
        em.barrier()
    with pytest.raises(em.CompileError, match="em.group_buffer"):
        em.group_buffer(4)


def test_barrier_inside_a_divergent_if():
    where = []

    @em.compile
    def f(X: em.f32["N"]):
        with em.kernel(X.shape[0], group=64) as i:
            where.append(line_of_next_statement())
            with em.if_(X[i] > 0):
                where.append(line_of_next_statement())
                em.barrier()
        return X
    with pytest.raises(em.CompileError) as e:
        f(np.zeros(4, np.float32))
    msg = str(e.value)
    assert "em.barrier() inside an em.if_ whose condition may differ between the threads" in msg
    assert f"test_group.py:{where[1]}" in msg  # the barrier
    assert f"test_group.py:{where[0]}" in msg  # the if


def test_barrier_inside_a_per_thread_loop_and_early_exit():
    @em.compile
    def f(X: em.f32["N"]):
        with em.kernel(X.shape[0], group=64):
            with em.loop(em.local_index()):
                em.barrier()
        return X
    with pytest.raises(em.CompileError, match="whose bounds may differ"):
        f(np.zeros(4, np.float32))

    @em.compile
    def g(X: em.f32["N"]):
        with em.kernel(X.shape[0], group=64) as i:
            with em.loop(4):
                em.barrier()
                with em.if_(X[i] > 0):
                    em.break_()
        return X
    with pytest.raises(em.CompileError, match="cannot be left early"):
        g(np.zeros(4, np.float32))


def test_barrier_in_a_kernel_without_a_group():
    @em.compile
    def f(X: em.f32["N"]):
        with em.kernel(X.shape[0]):
            em.barrier()
        return X
    with pytest.raises(em.CompileError, match="without a group"):
        f(np.zeros(4, np.float32))


def test_bad_group_shapes_and_accesses():
    @em.compile
    def rank(X: em.f32["H", "W"]):
        with em.kernel(X.shape, group=8):
            pass
        return X
    with pytest.raises(em.ShapeError, match="the group has 1 dims"):
        rank(np.zeros((4, 4), np.float32))

    @em.compile
    def whole(X: em.f32["N"]):
        with em.kernel(X.shape[0], group=8):
            buf = em.group_buffer(8)
            y = buf + 1.0  # noqa: F841
        return X
    with pytest.raises(em.TypeError, match="cannot be used as a whole value"):
        whole(np.zeros(4, np.float32))

    with pytest.raises(em.TypeError, match="must be a Python int"):
        @em.compile
        def bad(X: em.f32["N"]):
            with em.kernel(X.shape[0], group=8.0):
                pass
            return X
        bad(np.zeros(4, np.float32))
