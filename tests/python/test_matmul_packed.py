"""CPU matrix products through packed panels (codegen/cpu_gemm.h): every shape, transposition,
batch and epilogue against NumPy in float64, and bit for bit against the reference interpreter
(the packed path adds each element's products in the loop's order, without fused multiply-add)."""
import numpy as np
import pytest

import ember as em

PACKED = "ember_gemm::run("


def _interpreted(prog, *args):
    stages = prog._interpret_stages(*args, tile_threads=True)
    name, outs = stages[-1]
    assert not name.startswith("error"), outs
    return outs[0]


def _check(prog, want, *args, exact=True):
    got = prog(*args).numpy()
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-5, atol=1e-5 * scale)
    if exact:  # the same sums, in the same order, as the interpreter's loop
        np.testing.assert_array_equal(got, _interpreted(prog, *args))
    assert PACKED in prog.source("cpp")


@pytest.mark.parametrize("n,k,m", [(1, 1, 1), (7, 13, 5), (65, 129, 33), (6, 300, 16), (97, 257, 258), (512, 512, 512)])
def test_matmul_shapes(rng, n, k, m):
    @em.compile
    def mm(a: em.f32["N", "K"], b: em.f32["K", "M"]):  # noqa: F821
        return a @ b

    a = rng.uniform(-1, 1, (n, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, m)).astype(np.float32)
    _check(mm, a.astype(np.float64) @ b.astype(np.float64), a, b, exact=n * k * m < 10**6)


def test_transposed_operands_and_epilogue(rng):
    @em.compile
    def tn(a: em.f32["K", "N"], b: em.f32["K", "M"]):  # noqa: F821  A^T B (a weight gradient)
        return a.T @ b

    @em.compile
    def nt(a: em.f32["N", "K"], b: em.f32["M", "K"], bias: em.f32["M"]):  # noqa: F821  x W^T + b, relu
        return em.nn.relu(a @ b.T + bias) * 0.5

    a = rng.uniform(-1, 1, (37, 21)).astype(np.float32)
    b = rng.uniform(-1, 1, (37, 70)).astype(np.float32)
    _check(tn, a.T.astype(np.float64) @ b, a, b)
    x = rng.uniform(-1, 1, (45, 64)).astype(np.float32)
    w = rng.uniform(-1, 1, (19, 64)).astype(np.float32)
    bias = rng.uniform(-1, 1, 19).astype(np.float32)
    _check(nt, np.maximum(x.astype(np.float64) @ w.T + bias, 0) * 0.5, x, w, bias)


def test_batched_and_broadcast(rng):
    @em.compile
    def bmm(a: em.f32[3, "N", "K"], b: em.f32[3, "K", "M"]):  # noqa: F821
        return a @ b

    @em.compile
    def bcast(a: em.f32[2, 1, "N", "K"], b: em.f32[4, "K", "M"]):  # noqa: F821
        return a @ b - 1.0

    a = rng.uniform(-1, 1, (3, 11, 17)).astype(np.float32)
    b = rng.uniform(-1, 1, (3, 17, 23)).astype(np.float32)
    _check(bmm, a.astype(np.float64) @ b, a, b)
    a = rng.uniform(-1, 1, (2, 1, 9, 8)).astype(np.float32)
    b = rng.uniform(-1, 1, (4, 8, 20)).astype(np.float32)
    _check(bcast, a.astype(np.float64) @ b - 1.0, a, b)


def test_gathered_rows(rng):
    # The rows of A are gathered by an index tensor (a minibatch of a dataset): A's row offsets are
    # loads, its step along k stays 1.
    @em.compile
    def lin(x: em.f32["S", 64], idx: em.i32["B"], w: em.f32[40, 64]):  # noqa: F821
        return x[idx] @ w.T

    x = rng.uniform(-1, 1, (100, 64)).astype(np.float32)
    idx = rng.integers(0, 100, 33).astype(np.int32)
    w = rng.uniform(-1, 1, (40, 64)).astype(np.float32)
    _check(lin, x[idx].astype(np.float64) @ w.T, x, idx, w)


def test_mlp_gradients(rng):
    # The backward pass's products (dz^T h, dz W) take the packed path too.
    @em.compile
    def grads(x: em.f32["B", 16], w: em.f32[24, 16], v: em.f32[5, 24]):  # noqa: F821
        h = em.nn.relu(x @ w.T)
        loss = em.sum((h @ v.T) ** 2)
        return em.grad(loss, [w, v])

    x = rng.uniform(-1, 1, (30, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (24, 16)).astype(np.float32)
    v = rng.uniform(-1, 1, (5, 24)).astype(np.float32)
    gw, gv = (t.numpy() for t in grads(x, w, v))
    x64, w64, v64 = (t.astype(np.float64) for t in (x, w, v))
    hp = x64 @ w64.T
    h = np.maximum(hp, 0)
    z = h @ v64.T
    dz = 2 * z
    want_v = dz.T @ h
    want_w = ((dz @ v64) * (hp > 0)).T @ x64
    np.testing.assert_allclose(gv, want_v, rtol=1e-4, atol=1e-4 * np.abs(want_v).max())
    np.testing.assert_allclose(gw, want_w, rtol=1e-4, atol=1e-4 * np.abs(want_w).max())
    assert grads.source("cpp").count(PACKED) >= 2


def test_integer_matmul_is_not_packed(rng):
    @em.compile
    def mm(a: em.i32[9, 7], b: em.i32[7, 20]):
        return a @ b

    a = rng.integers(-5, 5, (9, 7)).astype(np.int32)
    b = rng.integers(-5, 5, (7, 20)).astype(np.int32)
    np.testing.assert_array_equal(mm(a, b).numpy(), a @ b)
    assert PACKED not in mm.source("cpp")


def test_prelude_has_the_packed_products_only_where_a_kernel_uses_them(rng):
    """The packed-product text (and <omp.h>) goes into a unit only when one of its kernels calls
    it, and no unit parses <cmath> or <vector> (they were most of a small program's C++ compile):
    an elementwise program with sqrt, floor and isnan still matches NumPy without them."""
    @em.compile
    def mm(a: em.f32["N", "K"], b: em.f32["K", "M"]):  # noqa: F821
        return a @ b

    @em.compile
    def ew(x: em.f32["N"]):  # noqa: F821
        y = em.sqrt(em.abs(x)) + em.floor(x * 3.0)
        return em.where(em.isnan(y), 0.0, y)

    a, b = (rng.uniform(-1, 1, (9, 9)).astype(np.float32) for _ in range(2))
    x = rng.uniform(-4, 4, 1000).astype(np.float32)
    np.testing.assert_allclose(mm(a, b).numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    want = np.sqrt(np.abs(x)) + np.floor(x * np.float32(3.0))
    np.testing.assert_allclose(ew(x).numpy(), want, rtol=1e-6, atol=1e-6)
    src_mm, src_ew = mm.source("cpp"), ew.source("cpp")
    assert "namespace ember_gemm" in src_mm and "namespace ember_gemm" not in src_ew
    for src in (src_mm, src_ew):
        assert "#include <cmath>" not in src and "#include <vector>" not in src
