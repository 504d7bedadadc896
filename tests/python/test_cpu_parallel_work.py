"""The cpu backend's OpenMP regions go parallel on estimated total work (codegen/c_printer.cpp
parallel_condition): a cheap elementwise kernel stays on one thread up to hundreds of thousands
of threads, a loop bounded by a kernel parameter counts at its run-time trip count, a packed
product goes parallel from 128K multiply-adds; the results are the same on either side of each
threshold and with the contention policy off (EMBER_CPU_ADAPT=0, backends/cpu/cpu_threads.h)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ember as em


@pytest.fixture(autouse=True)
def _cpu_only(backend):
    if backend != "cpu":
        pytest.skip("OpenMP regions are the cpu backend's")


@em.compile
def affine(x: em.f32["N"]):  # noqa: F821
    return x * 2.0 + 1.0


@em.compile
def row_sums(x: em.f32["R", "C"]):  # noqa: F821
    return em.sum(x, axis=1)


@em.compile
def matmul(a: em.f32["N", "K"], b: em.f32["K", "M"]):  # noqa: F821
    return a @ b


def _thresholds(src):
    return [int(t) for t in re.findall(r"omp parallel for schedule\(static\) if \(end - begin >= (\d+)\)", src)]


def test_cheap_elementwise_kernel_stays_on_one_thread_below_much_work(rng):
    for n in (1000, 300_000):
        x = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(affine(x).numpy(), x * np.float32(2) + np.float32(1))
    (t,) = _thresholds(affine.source("cpp"))
    assert 10_000 < t <= 300_000, t  # a few ALU ops per thread: parallel from ~10^5 threads


def test_loop_bounded_by_a_parameter_counts_its_trips_at_run_time(rng):
    src = row_sums.source("cpp")
    cond = re.search(r"omp parallel for schedule\(static\) if \((.*)\)\n", src).group(1)
    assert "(double)(end - begin) *" in cond and re.search(r"\bp\d+\b", cond), cond
    for shape in ((3, 5), (64, 4000), (2000, 700)):  # serial, then parallel by the trip count
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(row_sums(x).numpy(), x.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-3)


def test_packed_product_goes_parallel_from_128k_multiply_adds(rng):
    src = matmul.source("cpp")
    assert "ember_B * ember_M * len * ember_K >= 131072" in src
    assert "const auto ember_l_m0 = m0;" in src  # the epilogue's locals
    for n in (32, 256):  # 32K (one thread) and 16.8M multiply-adds (parallel)
        a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        np.testing.assert_allclose(matmul(a, b).numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_same_bits_with_the_contention_policy_off(rng, tmp_path):
    """Row sums and a product large enough to run in parallel give the same bits whether the
    policy may drop to one thread or not, and on one thread."""
    a = rng.uniform(-1, 1, (300, 200)).astype(np.float32)
    b = rng.uniform(-1, 1, (200, 300)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    child = ("import sys, numpy as np, ember as em\n"
             "sys.path.insert(0, %r)\n"
             "from test_cpu_parallel_work import row_sums, matmul\n"
             "a, b = np.load(%r), np.load(%r)\n"
             "np.save(%r, np.concatenate([row_sums(a).numpy(), matmul(a, b).numpy().ravel()]))\n")
    results = []
    for i, env in enumerate(({"EMBER_CPU_ADAPT": "0"}, {}, {"OMP_NUM_THREADS": "1"})):
        out = tmp_path / f"out{i}.npy"
        code = child % (os.path.dirname(__file__), str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), str(out))
        r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        results.append(np.load(out))
    np.testing.assert_allclose(results[0][:300], a.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
