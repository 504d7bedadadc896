"""Fusion decided by the dependence analysis (core/analysis/dependence.h): two kernels run as one
when every dependence between them stays in one thread, not only at the thread's own element
(a row producer and a consumer reading any element of that row); a dependence that crosses
threads keeps them apart. Kernel counts asserted, results against NumPy on every backend."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember as em
from conftest import _BUILD

M = 12


def rand(rng, *shape):
    return rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)


def row_pair(read_row, read_col):
    """Kernel 1 writes row i of A (a loop over its columns); kernel 2 sums A[read_row(i, N),
    read_col(k)] * (k + 1) over k into Y[i]."""
    @em.compile
    def f(X: em.f32["N", M]):
        n = X.shape[0]
        A = em.zeros((n, M))
        Y = em.zeros((n,))
        with em.kernel(n) as i:
            with em.loop(M) as j:
                A[i, j] = X[i, j] * 2.0 + 1.0
        with em.kernel(n) as i:
            acc = em.var(0.0)
            with em.loop(M) as k:
                acc.val += A[read_row(i, n), read_col(k)] * em.cast(k + 1, em.f32)
            Y[i] = acc
        return Y
    return f


def want(X, rows, cols):
    A = X * 2.0 + 1.0
    w = np.arange(1, M + 1, dtype=np.float32)
    return (A[rows][:, cols] * w).sum(axis=1)


@pytest.mark.parametrize("case", ["own_row", "reversed_cols", "rotated_cols", "min_identity", "halved_double"])
def test_same_row_dependences_fuse(rng, backend, case):
    """Every read of A is in the row its thread wrote: one kernel."""
    read_row = {
        "min_identity": lambda i, n: em.min(i, n - 1),  # isl proves min(i, N - 1) = i
        "halved_double": lambda i, n: (i * 2) // 2,     # floor(2i / 2) = i, a quasi-affine index
    }.get(case, lambda i, n: i)
    read_col = {
        "reversed_cols": lambda k: M - 1 - k,
        "rotated_cols": lambda k: (k + 5) % M,
    }.get(case, lambda k: k)
    f = row_pair(read_row, read_col)
    X = rand(rng, 37, M)
    cols = np.arange(M)
    cols = {"reversed_cols": M - 1 - cols, "rotated_cols": (cols + 5) % M}.get(case, cols)
    np.testing.assert_allclose(f(X).numpy(), want(X, np.arange(37), cols), rtol=1e-5, atol=1e-4)
    assert f.kernel_count == 1


@pytest.mark.parametrize("case", ["next_row", "mirrored_row", "indirect_row"])
def test_cross_thread_dependences_keep_kernels_apart(rng, backend, case):
    """A read of another thread's row (a neighbour, a mirror, an index only known at run time)
    needs every row written first: two kernels."""
    read_row = {
        "next_row": lambda i, n: i + 1,                       # clamped to N - 1 at the end
        "mirrored_row": lambda i, n: n - 1 - i,
        "indirect_row": lambda i, n: em.cast(em.cast(i, em.f32) * 0.5, em.i32) * 2,
    }[case]
    f = row_pair(read_row, lambda k: k)
    X = rand(rng, 37, M)
    i = np.arange(37)
    rows = {"next_row": np.minimum(i + 1, 36), "mirrored_row": 36 - i, "indirect_row": (i // 2) * 2}[case]
    np.testing.assert_allclose(f(X).numpy(), want(X, rows, np.arange(M)), rtol=1e-5, atol=1e-4)
    assert f.kernel_count == 2


def test_disjoint_elements_fuse(rng, backend):
    """Kernel 1 writes the even elements of A, kernel 2 reads the odd ones and writes B: no
    element is shared (isl shows 2i = 2i' + 1 has no solution), so they fuse."""
    @em.compile
    def f(X: em.f32["N"]):
        n = X.shape[0]
        A = em.zeros((n * 2,))
        B = em.zeros((n,))
        with em.kernel(n) as i:
            A[i * 2] = X[i] * 3.0
        with em.kernel(n) as i:
            B[i] = A[i * 2 + 1] + X[i]
        return A, B
    X = rand(rng, 29)
    A, B = f(X)
    wa = np.zeros(58, np.float32)
    wa[0::2] = X * 3.0
    np.testing.assert_allclose(A.numpy(), wa, rtol=1e-6)
    np.testing.assert_allclose(B.numpy(), X, rtol=1e-6)
    assert f.kernel_count == 1


@pytest.mark.parametrize("shift", [0, 1])
def test_snapshot_recomputed_in_in_place_update(rng, backend, shift, no_split_reductions):
    """An in-place update that reads a value computed from the memory it writes earlier (Adam's
    p -= lr * m / (sqrt(v) + eps) reads p as it was): the value is recomputed in the update's
    kernel when each thread reads and writes only its own element (2 kernels, no snapshot
    buffer); reading a neighbour's old element keeps the snapshot (3 kernels)."""
    @em.compile
    def f(P: em.f32["N"], G: em.f32["N"]):
        n = P.shape[0]
        s = P * 2.0 + 1.0
        t = em.sum(G * G)  # a kernel of another shape between the snapshot and the update
        if shift:
            with em.kernel(n) as i:
                P[i] = s[(i + 1) % n] * t
        else:
            P[...] = s * t - P
        return t

    P0, G = rand(rng, 53), rand(rng, 53)
    P = em.tensor(P0.copy())
    f(P, G)
    s = P0 * 2.0 + 1.0
    t = float(np.sum(G.astype(np.float64) ** 2))
    want = np.roll(s, -1) * t if shift else s * t - P0
    np.testing.assert_allclose(P.numpy(), want, rtol=1e-5, atol=1e-4)
    assert f.kernel_count == (3 if shift else 2)


def test_affine_relations_equal_piecewise_ones_under_verify(tmp_path):
    """Relations built from affine constraints are checked against the piecewise builder under
    EMBER_VERIFY (an internal error if they differ): the examples whose pipelines ask isl most
    (wrapped stencils, a checkpointed gradient with host loops, a bitonic sort) compile and give
    the results their scripts check."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    env = dict(os.environ, EMBER_BUILD_DIR=str(_BUILD), EMBER_VERIFY="1", EMBER_PROGRAM_CACHE="0")
    for script, args, marker in [("fluid.py", ["--size", "24", "--steps", "2", "--iters", "2"], "Jacobi iterations"),
                                 ("checkpointed_sim.py", ["--n", "32", "--steps", "20"], "gradients identical: True"),
                                 ("bitonic_sort.py", ["--n", "1024"], "equal to np.sort: True")]:
        proc = subprocess.run([sys.executable, str(examples / script), *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert marker in proc.stdout, proc.stdout


def test_fluid_asks_isl_nothing(tmp_path):
    """The fluid step's dependence questions are answered by syntax (issue 14's cost bar): its
    run-time-indexed advection loads are not their thread's own element, and its Jacobi loop's
    neighbour reads of the pressure var cross threads by an explicit witness (checked against
    isl under EMBER_VERIFY by the test above). Still 4 kernels."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    env = dict(os.environ, EMBER_BUILD_DIR=str(_BUILD), EMBER_DEBUG="time", EMBER_PROGRAM_CACHE="0",
               EMBER_TRACE_CACHE="0")
    proc = subprocess.run([sys.executable, str(examples / "fluid.py"), "--size", "24", "--steps", "1", "--iters", "2"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r"dependence analysis [0-9.]+ ms: \d+ queries, (\d+) access pairs \((\d+) syntactic, (\d+) isl",
                  proc.stderr)
    assert m, proc.stderr[-2000:]
    assert int(m.group(1)) > 0 and int(m.group(3)) == 0, m.group(0)
    assert re.search(r"\b4 kernels\b", proc.stderr), proc.stderr[-2000:]
