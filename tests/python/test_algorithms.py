"""Reductions (prod norm any all argmax argmin, with sum/mean/max/min), prefix_sum, matmul/dot
and softmax, against NumPy on random inputs."""
import numpy as np
import pytest

import ember as em

SHAPE = (4, 5, 6)
AXES = [None, 0, 1, -1, (0, 2), (1, 2), (0, 1, 2)]


def _reduction(fn, dtype):
    t = em.f32 if dtype == np.float32 else em.i32

    @em.compile
    def prog(x: t["A", "B", "C"]):  # noqa: F821
        return fn(x)
    return prog


def _random(rng, shape, dtype):
    if dtype == np.float32:
        return rng.uniform(-1, 1, shape).astype(np.float32)
    return rng.integers(-3, 4, shape).astype(np.int32)  # small range: many ties and zeros


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "any", "all", "norm"])
def test_reductions_match_numpy(rng, backend, name, keepdims, dtype):
    x = _random(rng, SHAPE, dtype)
    em_fn = getattr(em, name)
    prog = _reduction(lambda v: tuple(em_fn(v, axis=axis, keepdims=keepdims) for axis in AXES), dtype)
    x64 = x.astype(np.float64) if dtype == np.float32 else x
    for axis, got in zip(AXES, prog(x)):
        got = got.numpy()
        if name == "norm":
            want = np.sqrt(np.sum(x64.astype(np.float64) ** 2, axis=axis, keepdims=keepdims))
        elif dtype == np.int32 and name in ("sum", "prod"):  # i32 arithmetic (wraps like NumPy's int32)
            want = getattr(np, name)(x, axis=axis, keepdims=keepdims, dtype=np.int32)
        else:
            want = getattr(np, name)(x64, axis=axis, keepdims=keepdims)
        assert got.shape == np.shape(want), axis
        if name in ("any", "all"):
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got, want, err_msg=f"axis={axis}")
        elif dtype == np.int32 and name not in ("mean", "norm"):
            np.testing.assert_array_equal(got, want, err_msg=f"axis={axis}")
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"axis={axis}")


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_match_numpy(rng, backend, name, keepdims, dtype):
    axes = [None, 0, 1, 2, -1]
    x = _random(rng, SHAPE, dtype)
    prog = _reduction(lambda v: tuple(getattr(em, name)(v, axis=a, keepdims=keepdims) for a in axes), dtype)
    for axis, got in zip(axes, prog(x)):
        got = got.numpy()
        want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
        assert got.dtype == np.int32
        assert got.shape == np.shape(want), axis
        np.testing.assert_array_equal(got, want, err_msg=f"axis={axis}")  # ties: the first occurrence


def test_argmax_first_nan_and_infinities(backend):
    @em.compile
    def prog(x: em.f32["N", 5]):  # noqa: F821
        return em.argmax(x, axis=1), em.argmin(x, axis=1), em.argmax(x), em.argmin(x, axis=0)

    x = np.array([[1, 3, 3, -2, -2],
                  [0, np.nan, 7, np.nan, -9],
                  [-np.inf] * 5,
                  [2, 8, np.inf, 8, -np.inf]], np.float32)
    a, b, c, d = prog(x)
    np.testing.assert_array_equal(a.numpy(), np.argmax(x, axis=1))
    np.testing.assert_array_equal(b.numpy(), np.argmin(x, axis=1))
    assert int(c.numpy()) == np.argmax(x) == 6
    np.testing.assert_array_equal(d.numpy(), np.argmin(x, axis=0))


def test_argmax_needs_one_axis():
    with pytest.raises(em.TypeError):
        _reduction(lambda v: em.argmax(v, axis=(0, 1)), np.float32)(np.zeros(SHAPE, np.float32))


def test_bool_reductions(rng, backend):
    @em.compile
    def prog(x: em.f32["N", "M"]):  # noqa: F821
        b = x > 0.3
        return em.any(b, axis=1), em.all(b, axis=0), em.sum(b, axis=1), em.prod(b), em.argmax(b, axis=1)

    x = rng.uniform(-1, 1, (7, 9)).astype(np.float32)
    b = x > 0.3
    got = [t.numpy() for t in prog(x)]
    np.testing.assert_array_equal(got[0], b.any(axis=1))
    np.testing.assert_array_equal(got[1], b.all(axis=0))
    np.testing.assert_array_equal(got[2], b.sum(axis=1))
    assert int(got[3]) == int(np.prod(b))
    np.testing.assert_array_equal(got[4], np.argmax(b, axis=1))


# ---- prefix_sum -------------------------------------------------------------------------------

@em.compile
def _cumsum_f(x: em.f32["N"]):  # noqa: F821
    return em.prefix_sum(x)


@em.compile
def _cumsum_i(x: em.i32["N"]):  # noqa: F821
    return em.prefix_sum(x, axis=0)


@pytest.mark.parametrize("n", [1, 5, 255, 256, 257, 1000, 5000, 100_000])
def test_prefix_sum_f32_matches_cumsum(rng, backend, n):
    x = rng.standard_normal(n).astype(np.float32)
    want = np.cumsum(x.astype(np.float64))
    np.testing.assert_allclose(_cumsum_f(x).numpy(), want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("n", [1, 5, 1000, 5000, 100_000])
def test_prefix_sum_i32_is_exact(rng, backend, n):
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    np.testing.assert_array_equal(_cumsum_i(x).numpy(), np.cumsum(x))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_prefix_sum_axes(rng, backend, axis):
    @em.compile
    def prog(x: em.f32["A", "B", "C"], y: em.i32["A", "B", "C"]):  # noqa: F821
        return em.prefix_sum(x * 2.0, axis=axis) + 1.0, em.prefix_sum(y, axis=axis)

    for shape in [(3, 700, 2), (600, 2, 3), (2, 3, 1000), (1, 1, 1)]:
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        y = rng.integers(-50, 50, shape).astype(np.int32)
        a, b = prog(x, y)
        np.testing.assert_allclose(a.numpy(), np.cumsum(2.0 * x.astype(np.float64), axis=axis) + 1.0, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(b.numpy(), np.cumsum(y, axis=axis))


def test_prefix_sum_is_parallel_blocked_scan(backend):
    # Symbolic length: per-block scans, a scan of the block totals, and the block offsets.
    assert _cumsum_f.kernel_count == 3
    src = _cumsum_f.source("cpp")
    assert src.count("#pragma omp parallel for") == 3

    @em.compile
    def small(x: em.f32[100]):
        return em.prefix_sum(x)

    assert small.kernel_count == 1  # one block
    x = np.arange(100, dtype=np.float32)
    np.testing.assert_array_equal(small(x).numpy(), np.cumsum(x))


def test_prefix_sum_of_bool_counts(backend):
    @em.compile
    def prog(x: em.f32["N"]):  # noqa: F821
        return em.prefix_sum(x > 0)

    x = np.random.default_rng(3).uniform(-1, 1, 3000).astype(np.float32)
    got = prog(x).numpy()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.cumsum(x > 0))


# ---- matmul / dot -----------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((7,), (7,)),
    ((5, 7), (7, 3)),
    ((7,), (7, 3)),
    ((5, 7), (7,)),
    ((2, 5, 7), (7, 3)),
    ((5, 7), (4, 7, 3)),
    ((2, 1, 5, 7), (3, 7, 4)),
    ((1, 64), (64, 1)),
    ((33, 65), (65, 17)),
]


def _matmul_prog(sa, sb, dtype, fn):
    t = em.f32 if dtype == np.float32 else em.i32

    @em.compile
    def prog(a: t[sa], b: t[sb]):
        return fn(a, b)
    return prog


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_matches_numpy(rng, backend, sa, sb, dtype):
    a, b = _random(rng, sa, dtype), _random(rng, sb, dtype)
    for fn in (lambda x, y: x @ y, em.matmul):
        got = _matmul_prog(sa, sb, dtype, fn)(a, b).numpy()
        want = np.matmul(a, b)
        assert got.shape == want.shape
        if dtype == np.int32:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa,sb", [((7,), (7,)), ((5, 7), (7, 3)), ((7,), (7, 3)), ((5, 7), (7,)),
                                   ((2, 4, 7), (3, 7, 5)), ((2, 4, 7), (7,)), ((), (3, 4))])
def test_dot_matches_numpy(rng, backend, sa, sb):
    a = rng.uniform(-1, 1, sa).astype(np.float32)
    b = rng.uniform(-1, 1, sb).astype(np.float32)
    if sa == ():
        @em.compile
        def prog(a: em.f32, b: em.f32[sb]):
            return em.dot(a, b)
        got = prog(float(a), b).numpy()
    else:
        got = _matmul_prog(sa, sb, np.float32, em.dot)(a, b).numpy()
    want = np.dot(a, b)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_matmul_symbolic_dims_and_mismatch(rng, backend):
    @em.compile
    def prog(a: em.f32["N", "K"], b: em.f32["K", "M"]):  # noqa: F821
        return em.max(a @ b, 0.0)  # relu of the product: an epilogue on the reduction

    a = rng.uniform(-1, 1, (9, 13)).astype(np.float32)
    b = rng.uniform(-1, 1, (13, 6)).astype(np.float32)
    np.testing.assert_allclose(prog(a, b).numpy(), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)

    @em.compile
    def bad(a: em.f32[3, 4], b: em.f32[5, 2]):
        return a @ b

    with pytest.raises(em.ShapeError):
        bad(np.zeros((3, 4), np.float32), np.zeros((5, 2), np.float32))


def test_matmul_fuses_the_product_into_packed_panels(rng, backend):
    @em.compile
    def mm(a: em.f32["N", "K"], b: em.f32["K", "M"]):  # noqa: F821
        return a @ b

    # 37 x 45: whole 6 x 16 micro-tiles and edge tiles on both axes.
    for n, m in ((20, 10), (37, 45)):
        a = rng.uniform(-1, 1, (n, 30)).astype(np.float32)
        b = rng.uniform(-1, 1, (30, m)).astype(np.float32)
        np.testing.assert_allclose(mm(a, b).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert mm.kernel_count == 1
    if backend == "cpu":
        # The sums come from packed panels and a register-blocked micro-kernel (codegen/cpu_gemm.h);
        # a call of part of the threads runs the rows form, each k loop a SIMD reduction
        # (tile_threads leaves contraction kernels alone).
        src = mm.source("cpp")
        assert "ember_gemm::run(" in src
        lines = [ln.strip() for ln in src.splitlines()]
        assert not any(ln.startswith("#pragma omp simd simdlen(1)") for ln in lines)
        assert any(ln.startswith("#pragma omp simd reduction(ember_fadd:") for ln in lines)  # lanes start at -0.0


# ---- softmax ----------------------------------------------------------------------------------

def test_softmax_rows_in_one_kernel(rng, backend):
    @em.compile
    def softmax(x: em.f32["N", "M"]):  # noqa: F821
        e = em.exp(x - em.max(x, axis=1, keepdims=True))
        return e / em.sum(e, axis=1, keepdims=True)

    x = rng.standard_normal((37, 53)).astype(np.float32) * 4
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax(x).numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert softmax.kernel_count == 1  # each row's thread: max, sum, then the row (issue bound: <= 2)
