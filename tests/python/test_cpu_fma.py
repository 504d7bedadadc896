"""contract_fma on the cpu backend: where the host has fused multiply-add, a * b + c becomes one
fma (the N-body force loop, its gradient), elementwise kernels still agree with the interpreter
bit for bit (reductions within the rounding of their SIMD order), sums that decide a comparison
stay unfused, and EMBER_CPU_FLAGS=-mno-fma turns it off."""
from pathlib import Path

import numpy as np
import pytest

import ember as em
from gpu_test_helpers import run_child

HOST_FMA = "fma" in next((line for line in Path("/proc/cpuinfo").read_text().splitlines()
                          if line.startswith("flags")), "").split()


@em.compile
def force(X: em.f32["N", 3]):  # noqa: F821
    d = X[:, None, :] - X[None, :, :]
    r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-4
    return em.sum(-d / (r2 * em.sqrt(r2)), axis=1)


@em.compile
def energy_grad(X: em.f32["N", 3]):  # noqa: F821
    d = X[:, None, :] - X[None, :, :]
    r2 = em.sum(d * d, axis=-1) + 1e-4
    return em.grad(-0.5 * em.sum(1.0 / em.sqrt(r2)), X)


@em.compile
def axpy(a: em.f32["N"], b: em.f32["N"], c: em.f32["N"]):  # noqa: F821
    return a * b + c, c - a * b


@em.compile
def escape(x: em.f32["N"], y: em.f32["N"]):  # noqa: F821
    """A count decided by x*x + y*y > 4, as examples/mandelbrot.py's."""
    return em.where(x * x + y * y > 4.0, 1, 0), x * y + 1.0


def interpreted(prog, *args):
    """The interpreter's outputs after the whole CPU pipeline (contract_fma included)."""
    return prog._interpret_stages(*args, lower_groups=True, tile_threads=True)[-1][1]


@pytest.fixture
def cpu():
    em.init(backend="cpu")


@pytest.mark.skipif(not HOST_FMA, reason="this CPU has no FMA: contract_fma is off")
@pytest.mark.parametrize("prog", [force, energy_grad], ids=lambda p: p.name)
def test_nbody_loops_fuse(rng, cpu, prog):
    X = rng.uniform(-1, 1, (67, 3)).astype(np.float32)
    got = prog(X).numpy()
    src = prog.source("cpp")
    assert src.count("__builtin_fmaf(") >= 5, src  # the squared distance (2) and the three sums
    assert "#pragma omp simd reduction(ember_fadd:" in src, src  # v = fma(a, b, v) is still a reduction (a sum from -0.0)
    # The sums over bodies run in SIMD lanes: equal to the interpreter's sequential order within rounding.
    np.testing.assert_allclose(got, interpreted(prog, X)[0], rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(not HOST_FMA, reason="this CPU has no FMA: contract_fma is off")
def test_fused_elementwise_math_matches_the_interpreter_bit_for_bit(rng, cpu):
    a, b, c = (rng.uniform(-2, 2, 4099).astype(np.float32) for _ in range(3))
    got = [t.numpy() for t in axpy(a, b, c)]
    assert axpy.source("cpp").count("__builtin_fmaf(") == 2
    for g, w in zip(got, interpreted(axpy, a, b, c)):
        np.testing.assert_array_equal(g, w)
    # One rounding: at least some elements differ from NumPy's two (a * b, then + c).
    assert np.any(got[0] != a * b + c)


@pytest.mark.skipif(not HOST_FMA, reason="this CPU has no FMA: contract_fma is off")
def test_the_gradient_divides_once_by_r2_sqrt_r2(rng, cpu):
    """fold_reciprocal_powers: the cube of 1 / sqrt(r2) the reverse mode makes is 1 / (r2 sqrt(r2))."""
    X = rng.uniform(-1, 1, (9, 3)).astype(np.float32)
    energy_grad(X)
    kernel = energy_grad.source("cpp").split("// kernel #0")[1]
    assert kernel.count("__builtin_sqrtf(") == 1 and kernel.count(" / ") == 1, kernel


def test_a_sum_that_decides_a_comparison_is_not_fused(rng, cpu):
    x, y = (rng.uniform(-3, 3, 1000).astype(np.float32) for _ in range(2))
    count, other = escape(x, y)
    src = escape.source("cpp")
    assert src.count("__builtin_fmaf(") == (1 if HOST_FMA else 0), src  # x * y + 1 only
    np.testing.assert_array_equal(count.numpy(), (x * x + y * y > np.float32(4)).astype(np.int32))
    np.testing.assert_allclose(other.numpy(), x * y + 1, rtol=1e-6, atol=1e-6)


def test_ember_cpu_flags_can_turn_it_off(tmp_path):
    code = """
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import ember as em
    em.init(backend="cpu")

    @em.compile
    def f(a: em.f32["N"], b: em.f32["N"]):
        return a * b + 1.0

    a = np.linspace(-1, 1, 64, dtype=np.float32)
    f(a, a)
    print(f.source("cpp").count("__builtin_fmaf("))
    """
    env = {"EMBER_CACHE_DIR": str(tmp_path), "EMBER_CPU_FLAGS": "-mno-fma"}
    off = run_child(code, env=env)
    assert off.returncode == 0, off.stderr
    assert off.stdout.split()[-1] == "0", off.stdout
    env.pop("EMBER_CPU_FLAGS")
    on = run_child(code, env=env, unset=("EMBER_CPU_FLAGS",))
    assert on.returncode == 0, on.stderr
    assert on.stdout.split()[-1] == ("1" if HOST_FMA else "0"), on.stdout
