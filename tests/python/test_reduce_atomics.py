"""Atomics that need no atomicity (core/passes/reduce_atomics.h): an atomic whose address ignores
an axis of its kernel becomes a reduction loop over that axis in each remaining thread, and an
atomic whose address isl proves injective becomes a plain load/op/store. Histograms (indirect
addresses) keep their atomics. Results against NumPy on every backend (float sums with a
tolerance: their order changes); the final IR and the generated code are checked for atomics."""
import re

import numpy as np
import pytest

import ember as em

N, M = 70, 37


def rand(rng, *shape):
    return rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)


def ir_atomics(f):
    return len(re.findall(r"= atomic |^\s*atomic", f.ir("final"), re.M))


def source_atomic_lines(f):
    """Lines of the generated code that name an atomic, less those of a program without any
    (the backend's prelude). HLSL names them Interlocked*."""
    @em.compile
    def plain(x: em.f32[4]):
        return x + 1.0
    def count(src):
        return sum(1 for line in src.splitlines() if "atomic" in line.lower() or "interlocked" in line.lower())
    return count(f.source()) - count(plain.source())


def filled(shape, value):
    """em.zeros(shape) set to `value` by a kernel."""
    A = em.zeros(shape)
    with em.kernel(shape) as ix:
        A[ix] = value
    return A


def test_row_sums_and_maxima_become_reductions(rng, backend):
    """atomic_add(S[i], v) and atomic_max/min(T[i], w) in a kernel over [N, M]: one kernel over
    [N] with a loop over M, no atomic left."""
    @em.compile
    def f(v: em.f32[N, M], w: em.i32[N, M]):
        S = em.zeros((N,))
        T = em.zeros((N,), dtype=em.i32)
        U = em.zeros((N,), dtype=em.i32)
        with em.kernel((N, M)) as (i, j):
            em.atomic_add(S[i], v[i, j] * 2.0)
            em.atomic_max(T[i], w[i, j])
            em.atomic_min(U[i], w[i, j])
        return S, T, U
    v = rand(rng, N, M)
    w = rng.integers(-1000, 1000, (N, M)).astype(np.int32)
    S, T, U = f(v, w)
    np.testing.assert_allclose(S.numpy(), (v * 2.0).sum(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(T.numpy(), np.maximum(w.max(axis=1), 0))
    np.testing.assert_array_equal(U.numpy(), np.minimum(w.min(axis=1), 0))
    assert f.kernel_count == 1
    assert ir_atomics(f) == 0
    assert re.search(r"kernel #\d+\[70\]", f.ir("final"))
    assert source_atomic_lines(f) == 0


def test_float_max_and_column_sums(rng, backend):
    """A reduced axis other than the last (S[j] over i), and float max (NaN identity)."""
    C = 96  # at least 64 threads remain (fewer keep their atomics: a GPU would idle)
    @em.compile
    def f(v: em.f32[N, C]):
        S = em.zeros((C,))
        T = filled((C,), -5.0)
        with em.kernel((N, C)) as (i, j):
            em.atomic_add(S[j], v[i, j])
            em.atomic_max(T[j], v[i, j] * 3.0)
        return S, T
    v = rand(rng, N, C)
    S, T = f(v)
    np.testing.assert_allclose(S.numpy(), v.sum(axis=0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(T.numpy(), np.maximum((v * 3.0).max(axis=0), -5.0), rtol=1e-6)
    assert ir_atomics(f) == 0


def test_histogram_keeps_atomics(rng, backend):
    """An address loaded from memory (a histogram bin) is not a function isl knows: atomics stay."""
    @em.compile
    def f(b: em.i32[N, M]):
        H = em.zeros((16,), dtype=em.i32)
        with em.kernel((N, M)) as (i, j):
            em.atomic_add(H[b[i, j]], 1)
        return H
    b = rng.integers(0, 16, (N, M)).astype(np.int32)
    np.testing.assert_array_equal(f(b).numpy(), np.bincount(b.ravel(), minlength=16))
    assert ir_atomics(f) == 1
    assert source_atomic_lines(f) > 0


@pytest.mark.parametrize("case", ["odd", "transpose", "shift"])
def test_injective_atomics_become_stores(rng, backend, case):
    """A[2i + 1], a transpose and a shift: no two threads share an element, plain updates."""
    @em.compile
    def f(x: em.f32[N, M]):
        if case == "odd":
            A = filled((N, 2 * M + 1), 1.0)
            with em.kernel((N, M)) as (i, j):
                em.atomic_add(A[i, 2 * j + 1], x[i, j])
        elif case == "transpose":
            A = filled((M, N), 1.0)
            with em.kernel((N, M)) as (i, j):
                em.atomic_add(A[j, i], x[i, j])
        else:
            A = filled((N + 1, M), 1.0)
            with em.kernel((N, M)) as (i, j):
                em.atomic_add(A[i + 1, j], x[i, j])
        return A
    x = rand(rng, N, M)
    if case == "odd":
        want = np.ones((N, 2 * M + 1), np.float32)
        want[:, 1::2] += x
    elif case == "transpose":
        want = 1.0 + x.T
    else:
        want = np.ones((N + 1, M), np.float32)
        want[1:] += x
    np.testing.assert_array_equal(f(x).numpy(), want)
    assert ir_atomics(f) == 0
    assert source_atomic_lines(f) == 0


def test_clamped_shift_keeps_atomics(rng, backend):
    """A[i + 1] clamped into N elements: threads N - 2 and N - 1 both add to A[N - 1]."""
    @em.compile
    def f(x: em.f32[N]):
        A = em.zeros((N,))
        with em.kernel(N) as i:
            em.atomic_add(A[i + 1], x[i])
        return A
    x = rand(rng, N)
    want = np.zeros(N, np.float32)
    want[1:] += x[:-1]
    want[N - 1] += x[N - 1]
    np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-6, atol=1e-6)
    assert ir_atomics(f) == 1


def test_reduced_row_sums_fuse_with_their_consumer(rng, backend):
    """Row sums by atomics (tensor level, indices over [N, M]) then S * 2 + 1: once the atomics
    are a reduction in each row's thread, the consumer joins that kernel (2 kernels before)."""
    @em.compile
    def f(v: em.f32[N, M]):
        S = em.zeros((N,))
        i, j = em.indices([N, M])
        em.atomic_add(S[i], v[i, j])
        return S * 2.0 + 1.0
    v = rand(rng, N, M)
    np.testing.assert_allclose(f(v).numpy(), v.sum(axis=1) * 2.0 + 1.0, rtol=1e-5, atol=1e-4)
    assert f.kernel_count == 1
    assert ir_atomics(f) == 0


def test_gradients_of_injective_gathers_need_no_atomics(rng, backend):
    """The adjoint of a gather is an atomic scatter-add; where the gather's index is injective
    (x[2i + 1, j], a transpose) isl shows no two threads meet and the adds become plain (3
    atomics before)."""
    n = 64
    @em.compile
    def f(x: em.f32[2 * n + 1, n]):
        i, j = em.indices([n, n])
        y = em.sum(x[2 * i + 1, j] * x[2 * i + 1, j] + x[j, i] * 3.0)
        return em.grad(y, [x])[0]
    x = rand(rng, 2 * n + 1, n)
    want = np.zeros_like(x)
    want[1::2] += 2.0 * x[1::2]
    want[:n, :n] += 3.0
    np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-6, atol=1e-6)
    assert ir_atomics(f) == 0
    assert source_atomic_lines(f) == 0


def test_few_threads_over_long_loops_keep_atomics(rng):
    """Column sums of a tall [4096, 64] matrix: 64 threads each looping 4096 times would leave a
    GPU idle, so the atomics stay; a narrow [70, 8] keeps them too (8 threads)."""
    for rows, cols in ((4096, 64), (70, 8)):
        @em.compile
        def f(v: em.f32[rows, cols]):
            S = em.zeros((cols,))
            with em.kernel((rows, cols)) as (i, j):
                em.atomic_add(S[j], v[i, j])
            return S
        v = rand(rng, rows, cols)
        np.testing.assert_allclose(f(v).numpy(), v.sum(axis=0), rtol=1e-4, atol=1e-3)
        assert ir_atomics(f) == 1


ADDRESSES = {  # name: (traced address of S over [R, C] threads, NumPy address, S's length)
    "row": (lambda i, j: i, lambda i, j: i, lambda R, C: R),
    "col": (lambda i, j: j, lambda i, j: j, lambda R, C: C),
    "half_row": (lambda i, j: i // 2, lambda i, j: i // 2, lambda R, C: (R + 1) // 2),
    "mirror_row": (lambda i, j: 95 - i, lambda i, j: 95 - i, lambda R, C: 96),
    "diagonal": (lambda i, j: (i + j) % 7, lambda i, j: (i + j) % 7, lambda R, C: 7),
    "bin": (None, None, lambda R, C: 16),  # S[b[i, j]]: indirect
}


CASES = [  # (address, kind, under an if, columns, atomics left): every route of the pass
    ("row", "add", True, 40, 0), ("row", "max", False, 7, 0), ("mirror_row", "min", True, 40, 0),
    ("half_row", "add", False, 40, 1), ("col", "max", True, 80, 0), ("diagonal", "add", False, 40, 1),
    ("bin", "max", True, 40, 1), ("half_row", "min", True, 7, 1),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_random_integer_atomics_match_numpy(case):
    """Kinds add/min/max, addresses that ignore an axis (injective on the rest or not), that
    ignore none, or indirect ones, with and without a condition, on random i32 (exact): NumPy's
    results."""
    addr, kind, cond, C, left = CASES[case]
    r = np.random.default_rng(case)
    R = 96
    em_addr, np_addr, length = ADDRESSES[addr]
    n = length(R, C)
    atomic = {"add": em.atomic_add, "min": em.atomic_min, "max": em.atomic_max}[kind]

    @em.compile
    def f(v: em.i32[R, C], b: em.i32[R, C], s0: em.i32[n]):
        S = em.zeros((n,), dtype=em.i32)
        with em.kernel(n) as q:
            S[q] = s0[q]
        with em.kernel((R, C)) as (i, j):
            at = b[i, j] if em_addr is None else em_addr(i, j)
            if cond:
                with em.if_(v[i, j] % 3 != 0):
                    atomic(S[at], v[i, j])
            else:
                atomic(S[at], v[i, j])
        return S
    v = r.integers(-1000, 1000, (R, C)).astype(np.int32)
    b = r.integers(0, 16, (R, C)).astype(np.int32)
    s0 = r.integers(-500, 500, n).astype(np.int32)
    want = s0.astype(np.int64)
    ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum}[kind]
    i, j = np.indices((R, C))
    idx = b if np_addr is None else np_addr(i, j)
    keep = (v % 3 != 0) if cond else np.ones_like(v, bool)
    ufunc.at(want, idx[keep], v[keep].astype(np.int64))
    np.testing.assert_array_equal(f(v, b, s0).numpy(), want.astype(np.int32))
    assert ir_atomics(f) == left
