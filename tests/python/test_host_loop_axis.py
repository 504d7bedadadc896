"""Host loops → kernel axes (core/passes/parallelize_host_loops.h): a host `em.loop` whose
iterations carry no dependence (the dependence analysis decides, with the counter as an iteration
dimension) becomes a leading axis of its kernels — one dispatch instead of one per iteration; a
loop that carries one (a scan, an accumulation) stays a host loop. Results against NumPy on every
backend; the final IR is checked for host loops and kernel shapes."""
import re

import numpy as np

import ember as em

L, H, K = 6, 8, 5


def rand(rng, *shape):
    return rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)


def host_loops(f):
    """Host-level loops left in the final IR (each dispatches its kernels once per iteration)."""
    return len(re.findall(r"^  %\d+ = loop i32 \(", f.ir("final"), re.M))


def kernel_shapes(f):
    return re.findall(r"^\s*kernel #\d+\[([^\]]*)\]", f.ir("final"), re.M)


def test_independent_matvecs_become_one_kernel(rng, backend):
    """The issue's example: y[t, i] = sum_k w[i, k] x[t, k] per t is one kernel over [L, H]."""
    @em.compile
    def f(w: em.f32[H, K], x: em.f32[L, K]):
        y = em.zeros((L, H))
        i, k = em.indices([H, K])
        with em.loop(L) as t:
            y[t, i] = em.sum(w[i, k] * x[t, k], axis=1)
        return y
    w, x = rand(rng, H, K), rand(rng, L, K)
    np.testing.assert_allclose(f(w, x).numpy(), x @ w.T, rtol=1e-5, atol=1e-5)
    assert f.kernel_count == 1
    assert host_loops(f) == 0
    assert kernel_shapes(f) == [f"{L}, {H}"]
    # y[t, i] is stored once per thread, not once per k (hoist_invariants drops the store loop
    # the row merge leaves: on the CPU's gemm path it cost more than the sums).
    assert f.ir("final").count("store[") == 1


def test_scan_stays_sequential(rng, backend):
    """y[t + 1] = 0.5 y[t] + x[t]: iteration t + 1 reads what t wrote, the loop stays."""
    @em.compile
    def f(x: em.f32[L, H]):
        y = em.zeros((L + 1, H))
        with em.kernel(H) as i:
            y[0, i] = 1.0
        with em.loop(L) as t:
            with em.kernel(H) as i:
                y[t + 1, i] = y[t, i] * 0.5 + x[t, i]
        return y
    x = rand(rng, L, H)
    want = np.zeros((L + 1, H), np.float32)
    want[0] = 1.0
    for t in range(L):
        want[t + 1] = want[t] * 0.5 + x[t]
    np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-5, atol=1e-5)
    assert host_loops(f) == 1


def test_accumulation_stays_sequential(rng, backend):
    """acc[i] += x[t, i] writes one element in every iteration: a carried dependence."""
    @em.compile
    def f(x: em.f32[L, H]):
        acc = em.zeros((H,))
        with em.loop(L) as t:
            with em.kernel(H) as i:
                acc[i] = acc[i] + x[t, i] * x[t, i]
        return acc
    x = rand(rng, L, H)
    np.testing.assert_allclose(f(x).numpy(), (x * x).sum(axis=0), rtol=1e-5, atol=1e-5)
    assert host_loops(f) == 1


def test_body_buffer_gets_a_row_per_iteration(rng, backend):
    """Two kernels per iteration joined by a buffer made in the body and read at other threads
    (reversed, next): both become kernels over [L, H], the buffer one row per iteration."""
    @em.compile
    def f(x: em.f32[L, H]):
        y = em.zeros((L, H))
        with em.loop(L) as t:
            tmp = em.zeros((H,))
            with em.kernel(H) as i:
                acc = em.var(0.0)
                with em.loop(H) as j:
                    acc.val += x[t, j] * em.cast(i + j, em.f32)
                tmp[i] = acc
            with em.kernel(H) as i:
                y[t, i] = tmp[H - 1 - i] - tmp[(i + 1) % H] * x[t, i]
        return y
    x = rand(rng, L, H)
    tmp = x @ (np.arange(H)[:, None] + np.arange(H)[None, :]).astype(np.float32)
    np.testing.assert_allclose(f(x).numpy(), tmp[:, ::-1] - np.roll(tmp, -1, axis=1) * x, rtol=1e-5, atol=1e-4)
    assert f.kernel_count == 2
    assert host_loops(f) == 0
    assert kernel_shapes(f) == [f"{L}, {H}", f"{L}, {H}"]


def test_strided_loop_and_nest(rng, backend):
    """A nest of independent loops (one strided, with an offset) gives one kernel of rank 3."""
    @em.compile
    def f(x: em.f32[L, 4, H]):
        y = em.zeros((L, 4, H))
        with em.loop(1, L, 2) as t:
            with em.loop(4) as u:
                with em.kernel(H) as i:
                    y[t, u, i] = x[t, u, i] * em.cast(t * 10 + u, em.f32)
        return y
    x = rand(rng, L, 4, H)
    want = np.zeros_like(x)
    for t in range(1, L, 2):
        for u in range(4):
            want[t, u] = x[t, u] * (t * 10 + u)
    np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-6)
    assert host_loops(f) == 0
    assert kernel_shapes(f) == [f"{(L - 1 + 1) // 2}, 4, {H}"]


def test_symbolic_trip_count(rng, backend):
    """Bounds known only at run time (a shape dim, a scalar argument): one kernel, right trips.
    (With a start that may be negative, clamped rows would repeat: isl sees the output dependence.)"""
    @em.compile
    def f(x: em.f32["T", H], start: em.i32):
        n = x.shape[0]
        y = em.zeros((n, H))
        with em.loop(em.max(start, 0), n) as t:
            with em.kernel(H) as i:
                y[t, i] = x[t, i] + 3.0
        return y
    x = rand(rng, 7, H)
    for start in (2, 0, 9, -4):
        want = np.zeros_like(x)
        want[max(start, 0):] = x[max(start, 0):] + 3.0
        np.testing.assert_allclose(f(x, start).numpy(), want, rtol=1e-6)
    assert host_loops(f) == 0


def test_possibly_negative_start_stays_sequential(rng):
    """em.loop(start, n) writing y[t] (clamped): for start < 0 rows 0 is written by several
    iterations, the last one wins; the loop must stay."""
    @em.compile
    def f(x: em.f32["T", H], start: em.i32):
        n = x.shape[0]
        y = em.zeros((n, H))
        with em.loop(start, n) as t:
            with em.kernel(H) as i:
                y[t, i] = x[em.max(t, 0), i] + em.cast(t, em.f32)
        return y
    x = rand(rng, 7, H)
    want = x + np.arange(7, dtype=np.float32)[:, None]
    np.testing.assert_allclose(f(x, -3).numpy(), want, rtol=1e-6)
    assert host_loops(f) == 1


def test_widened_kernel_fuses_with_its_consumer(rng, backend):
    """After the loop becomes an axis, the kernel over [L, H] and tanh(y) * 2 over [L, H] merge
    (2 kernels and L + 1 dispatches before)."""
    @em.compile
    def f(w: em.f32[H, K], x: em.f32[L, K]):
        y = em.zeros((L, H))
        i, k = em.indices([H, K])
        with em.loop(L) as t:
            y[t, i] = em.sum(w[i, k] * x[t, k], axis=1)
        return em.tanh(y) * 2.0
    w, x = rand(rng, H, K), rand(rng, L, K)
    np.testing.assert_allclose(f(w, x).numpy(), np.tanh(x @ w.T) * 2.0, rtol=1e-5, atol=1e-5)
    assert f.kernel_count == 1
    assert host_loops(f) == 0


def test_triangular_nest_stays(rng):
    """A kernel whose shape is the counter (em.kernel(t + 1)) cannot take t as an axis."""
    @em.compile
    def f(x: em.f32[L, L]):
        y = em.zeros((L, L))
        with em.loop(L) as t:
            with em.kernel(t + 1) as i:
                y[t, i] = x[t, i] * 2.0
        return y
    x = rand(rng, L, L)
    np.testing.assert_allclose(f(x).numpy(), np.tril(x) * 2.0, rtol=1e-6)
    assert host_loops(f) == 1
