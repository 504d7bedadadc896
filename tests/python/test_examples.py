"""The programs in examples/ against NumPy on random inputs (their compiled functions are imported
from the example modules), em.random, and each example run as a script.

The last tests are minimal reproducers of fusion bugs found while writing the examples (a var
gathered and assigned in one loop body, recomputation inside a kernel that overwrites its
input, dce of a var read only before a break)."""
import functools
import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember as em
from conftest import _BUILD


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@functools.lru_cache(maxsize=None)
def example(name):
    """Imports examples/<name>.py as a module (its programs compile on first call)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))  # for the examples' shared _ember_path
    spec = importlib.util.spec_from_file_location(f"ember_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def rand(rng, *shape, lo=-1.0, hi=1.0):
    x = rng.uniform(lo, hi, size=shape).astype(np.float32)
    x[x == 0] = 0.25
    return x


def assert_close(got, want, rtol=1e-4, atol_rel=1e-5, what=""):
    """assert_allclose with rtol and an absolute tolerance relative to max |want| (for sums whose
    terms cancel)."""
    want = np.asarray(want)
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol_rel * float(np.max(np.abs(want))),
                               err_msg=what)


# em.random ----------------------------------------------------------------------------------------

_M32 = np.uint64(0xFFFFFFFF)


def xxhash32_numpy(x, y):
    """NumPy version of em.random.hash (xxHash32 of two words), the contract of the bit pattern."""
    x, y = np.asarray(x).astype(np.uint64) & _M32, np.asarray(y).astype(np.uint64) & _M32
    P2, P3, P4, P5 = (np.uint64(p) for p in (2246822519, 3266489917, 668265263, 374761393))

    def rotl17(h):
        return ((h << np.uint64(17)) | (h >> np.uint64(15))) & _M32
    h = (y + P5 + x * P3) & _M32
    h = (rotl17(h) * P4) & _M32
    h = (h + y * P3) & _M32
    h = (rotl17(h) * P4) & _M32
    h = ((h ^ (h >> np.uint64(15))) * P2) & _M32
    h = ((h ^ (h >> np.uint64(13))) * P3) & _M32
    return (h ^ (h >> np.uint64(16))).astype(np.uint32)


@em.compile
def _random_all(X: em.f32["H", "W"], seed: em.i32):  # noqa: F821
    return (em.random.rand(X.shape, seed), em.random.randn(X.shape, seed),
            em.random.randint(X.shape, seed, -3, 7), em.random.rand(X.shape, 7))


def _draw(seed, shape=(256, 256)):
    return [t.numpy() for t in _random_all(np.ones(shape, np.float32), seed)]


def test_random_hash_is_xxhash32_of_index_and_key(backend):
    @em.compile
    def f(C: em.u32["N"], K: em.i32["N"], key: em.i32):
        return em.random.hash(C, K), em.random.hash(C, key), em.random.hash(5, 9)
    rng = np.random.default_rng(3)
    C = rng.integers(0, 2 ** 32, size=1000, dtype=np.uint64).astype(np.uint32)
    K = rng.integers(-2 ** 31, 2 ** 31, size=1000).astype(np.int32)
    a, b, c = f(C, K, -12345)
    np.testing.assert_array_equal(a.numpy(), xxhash32_numpy(C, K.view(np.uint32)))
    np.testing.assert_array_equal(b.numpy(), xxhash32_numpy(C, np.uint32(2 ** 32 - 12345)))
    assert int(c) == int(xxhash32_numpy(5, 9)) and c.dtype == em.u32


def test_rand_uniform_statistics(backend):
    u = _draw(11)[0]
    n = u.size
    assert u.dtype == np.float32 and u.shape == (256, 256)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert np.all(u * 2 ** 24 == np.floor(u * 2 ** 24))  # multiples of 2**-24
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 5 * math.sqrt((1 / 80 - 1 / 144) / n)
    counts = np.bincount((u.ravel() * 16).astype(np.int64), minlength=16)
    chi2 = float(np.sum((counts - n / 16) ** 2 / (n / 16)))
    assert chi2 < 60, chi2  # 15 degrees of freedom: the 1e-6 quantile is about 55
    flat = u.ravel().astype(np.float64)
    assert abs(np.corrcoef(flat[:-1], flat[1:])[0, 1]) < 5 / math.sqrt(n)  # neighbours uncorrelated
    assert abs(np.corrcoef(u[:, :-1].ravel(), u[:, 1:].ravel())[0, 1]) < 5 / math.sqrt(n)


def test_randn_normal_statistics(backend):
    z = _draw(12)[1]
    n = z.size
    assert z.dtype == np.float32 and np.all(np.isfinite(z))
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2 / n)
    within1 = np.mean(np.abs(z) < 1.0)  # 68.27% within one standard deviation
    assert abs(within1 - 0.6827) < 5 * math.sqrt(0.6827 * 0.3173 / n)
    assert abs(float(np.mean(z ** 3))) < 5 * math.sqrt(15 / n)  # symmetric


def test_randint_range_and_uniformity(backend):
    r = _draw(13)[2]
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 6
    counts = np.bincount(r.ravel() + 3, minlength=10)
    expected = r.size / 10
    assert float(np.sum((counts - expected) ** 2 / expected)) < 45  # 9 degrees of freedom


def test_random_reproducible_and_seed_dependent(backend):
    a, b = _draw(5), _draw(5)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)  # equal seeds: equal numbers
    c = _draw(6)
    for x, y in zip(a[:2], c[:2]):
        assert np.mean(x == y) < 1e-3  # different seeds: different numbers
        assert abs(np.corrcoef(x.ravel(), y.ravel())[0, 1]) < 0.02
    assert np.mean(a[2] == c[2]) < 0.2  # randint: about 1 in 10 agree by chance
    np.testing.assert_array_equal(a[3], c[3])  # a constant seed does not depend on the argument
    np.testing.assert_array_equal(_draw(7)[0], a[3])  # a traced seed equals the same Python int seed
    small = _draw(5, shape=(16, 256))[0]
    np.testing.assert_array_equal(small, a[0][:16])  # element (i, j) depends on its flat index only


def test_random_in_a_fused_expression_and_scalar_shape(rng, backend):
    @em.compile
    def f(X: em.f32["N"], seed: em.u32):
        noisy = X + 0.01 * em.random.randn(X.shape, seed)
        return noisy, em.random.rand((), seed), em.random.randint((3, 4), seed, 0, 2)
    X = rand(rng, 1000)
    noisy, s, bits = f(X, 2 ** 32 - 1)
    assert np.max(np.abs(noisy.numpy() - X)) < 0.1 and np.std(noisy.numpy() - X) > 0.005
    assert s.shape == () and 0.0 <= float(s) < 1.0
    assert bits.shape == (3, 4) and set(np.unique(bits.numpy())) <= {0, 1}

    @em.compile
    def full(X: em.f32["N"]):  # noqa: F821
        return em.random.randint(X.shape, 3, -2 ** 31, 2 ** 31), em.random.randint(X.shape, 3, X.shape[0], 2000)
    a, b = (t.numpy() for t in full(np.ones(1000, np.float32)))
    assert a.min() < -2 ** 30 and a.max() > 2 ** 30 and len(np.unique(a)) == 1000  # the whole i32 range
    assert b.min() >= 1000 and b.max() < 2000  # traced bounds


def test_random_argument_errors():
    with pytest.raises(em.Error, match="em.random.rand can only be used inside"):
        em.random.rand((3,), 0)

    def trace(body):
        @em.compile
        def f(X: em.f32["N"]):  # noqa: F821
            return body(X)
        f(np.ones(4, np.float32))
    with pytest.raises(em.Error, match="low < high.*low=5, high=2"):
        trace(lambda X: em.random.randint(X.shape, 0, 5, 2))
    with pytest.raises(em.TypeError, match="low must be an int"):
        trace(lambda X: em.random.randint(X.shape, 0, 0.5, 2))
    with pytest.raises(em.TypeError, match="seed or counter must be an int"):
        trace(lambda X: em.random.rand(X.shape, 1.5))


# Examples ------------------------------------------------------------------------------------------

def test_histogram(rng, backend):
    h = example("histogram")
    V = rng.normal(0.0, 1.5, 20000).astype(np.float32)
    V[V == 0] = 0.5
    for lo, scale, nbins in ((-4.0, 4.0, 32), (-1.0, 10.0, 7), (0.0, 1.0, 1)):
        got = h.histogram(V, lo, scale, nbins).numpy()
        assert got.dtype == np.int32 and got.shape == (nbins,)
        np.testing.assert_array_equal(got, h.histogram_numpy(V, lo, scale, nbins))
    assert h.histogram.kernel_count == 1
    ints = rng.integers(0, 100, 5000).astype(np.float32)  # integer data: compare with np.bincount directly
    np.testing.assert_array_equal(h.histogram(ints, 0.0, 1.0, 100).numpy(), np.bincount(ints.astype(np.int64)))


def _random_board(rng, h, w):
    return (rng.random((h, w)) < 0.35).astype(np.int32)


def test_life_generations(rng, backend):
    life = example("life")
    G = _random_board(rng, 37, 50)
    got = want = G
    for s in range(6):  # one compiled generation per call, the em.Tensor fed back
        want = life.life_numpy(want, 1)
        got = life.life_step(got)
        np.testing.assert_array_equal(got.numpy(), want, err_msg=f"generation {s + 1}")
    assert life.life_step.kernel_count == 1
    glider = np.zeros((8, 8), np.int32)
    glider[0, 1] = glider[1, 2] = glider[2, 0] = glider[2, 1] = glider[2, 2] = 1
    g = glider
    for _ in range(32):  # a glider crosses the wrap-around border and comes back: period 4, shift (1, 1)
        g = life.life_step(g).numpy()
    np.testing.assert_array_equal(g, np.roll(glider, (8, 8), axis=(0, 1)))


def test_life_host_loop(rng, backend):
    life = example("life")
    G = _random_board(rng, 24, 30)
    np.testing.assert_array_equal(life.life(G, 3).numpy(), life.life_numpy(G, 3))


def test_mandelbrot(backend):
    m = example("mandelbrot")
    args = [(48, 64, -2.2, -1.2, 3.0 / 64, 100), (33, 40, -0.8, 0.05, 0.01, 300)]
    for a in args:
        n, mag = (t.numpy() for t in m.mandelbrot(*a))
        want_n, want_mag = m.mandelbrot_numpy(*a)
        # The same float32 operations in the same order (Ember compiles with -ffp-contract=off),
        # so the counts agree exactly, even at the boundary of the set.
        np.testing.assert_array_equal(n, want_n)
        np.testing.assert_allclose(mag, want_mag, rtol=1e-4)
        assert 0 < np.mean(n == a[-1]) < 1  # some pixels inside, some escape
        assert len(np.unique(n)) > 10
    assert m.mandelbrot.kernel_count == 1


def test_softmax(rng, backend):
    s = example("softmax")
    X = rand(rng, 67, 301, lo=-8.0, hi=8.0)
    for prog in (s.softmax, s.softmax_rows):
        np.testing.assert_allclose(prog(X).numpy(), s.softmax_numpy(X), rtol=1e-4, atol=1e-7, err_msg=prog.name)
    assert s.softmax_rows.kernel_count == 1


def kernel_blocks(prog):
    """The final IR split into kernels: (header line, body text) per kernel."""
    blocks = prog.ir().split("\n  kernel #")[1:]
    return [(b.split("\n", 1)[0], b) for b in blocks]


def test_softmax_kernel_count(rng, backend):
    s = example("softmax")
    s.softmax(rand(rng, 4, 5))
    assert s.softmax.kernel_count == 1  # one thread per row: max, sum, then exp / divide (bound: <= 2)
    for header, body in kernel_blocks(s.softmax):  # and no row reduction recomputed per element (O(N M^2))
        assert not ("[N, M]" in header and "= loop" in body), header


def test_sph(rng, backend):
    sph = example("sph")
    X, _, mass = sph.make_particles(400, seed=5)
    V = rand(rng, 400, 3, lo=-0.2, hi=0.2)
    X[:10, 2] = 0.999  # some particles hit a wall this step
    V[:10, 2] = 2.0
    params = (sph.H, mass, sph.STIFFNESS, sph.RHO0, sph.MU, sph.GRAVITY, 0.01)
    got = [t.numpy() for t in sph.sph_step(X, V, *params)]
    want = sph.sph_step_numpy(X, V, *params)
    for g, w, what in zip(got, want, ("X'", "V'", "rho")):
        assert_close(g, w, what=what)
    assert np.all(got[0] <= 1.0) and np.all(got[1][:10, 2] < 0)  # reflected
    self_density = mass * 315 / (64 * math.pi) / sph.H ** 3  # W(0) of the particle itself
    assert np.mean(got[2]) > 1.2 * self_density  # neighbours contribute
    assert sph.sph_step.kernel_count == 2  # the density pass and the force pass


def test_nbody_loop(rng, backend):
    nb = example("nbody_loop")
    X, V = rand(rng, 300, 3), rand(rng, 300, 3, lo=-0.1, hi=0.1)
    X2, V2 = nb.step_loop(X, V, 0.01)
    wX, wV = nb.step_numpy(X, V, 0.01)
    assert_close(V2.numpy(), wV, atol_rel=1e-4, what="V'")
    assert_close(X2.numpy(), wX, what="X'")
    assert nb.step_loop.kernel_count == 1
    X3, _ = nb.step_loop(X2, V2, 0.01)  # results feed the next call
    assert X3.shape == (300, 3)


def _fluid_inputs(rng, h=40, w=56):
    return rand(rng, h, w, lo=-1.5, hi=1.5), rand(rng, h, w, lo=-1.5, hi=1.5), rand(rng, h, w, lo=0.1, hi=1.0)


def _check_fluid(got, want):
    for g, w, what in zip(got, want, ("U'", "V'", "D'", "pressure")):
        assert_close(g.numpy(), w, what=what)


def test_fluid_step_unrolled(rng, backend):
    fl = example("fluid")
    U, V, D = _fluid_inputs(rng)
    for iters in (0, 6):
        prog = fl.fluid_step_unrolled(iters)
        _check_fluid(prog(U, V, D, 0.8), fl.fluid_numpy(U, V, D, 0.8, iters))
    before = np.abs(fl.divergence(*fl.fluid_numpy(U, V, D, 0.8, 0)[:2])).max()
    after = np.abs(fl.divergence(*[t.numpy() for t in prog(U, V, D, 0.8)][:2])).max()
    assert after < 0.7 * before  # the projection removes divergence


def test_fluid_step_em_loop_without_iterations(rng, backend):
    fl = example("fluid")
    U, V, D = _fluid_inputs(rng)
    _check_fluid(fl.fluid_step(U, V, D, 0.8, 0), fl.fluid_numpy(U, V, D, 0.8, 0))


def test_fluid_step_em_loop(rng, backend):
    fl = example("fluid")
    U, V, D = _fluid_inputs(rng)
    _check_fluid(fl.fluid_step(U, V, D, 0.8, 5), fl.fluid_numpy(U, V, D, 0.8, 5))


SCRIPTS = [
    ("histogram", ["--n", "20000", "--bins", "8"], "equal to np.bincount: True"),
    ("life", ["--size", "24", "--steps", "1"], "equal to NumPy: True"),
    ("mandelbrot", ["--width", "40", "--height", "12", "--iters", "32"], "kernel(s)"),
    ("softmax", ["--rows", "64", "--cols", "100"], "softmax_rows"),
    ("sph", ["--n", "256", "--steps", "3"], "kernel(s) per step"),
    ("nbody_loop", ["--n", "128", "--steps", "2"], "kernel(s)"),
    ("fluid", ["--size", "32", "--steps", "4", "--iters", "2"], "Jacobi iterations"),
]


@pytest.mark.parametrize("name,args,marker", SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_example_runs_as_a_script(name, args, marker, backend):
    env = dict(os.environ, EMBER_BUILD_DIR=str(_BUILD))
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), *args, "--backend", backend],
                          capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert marker in proc.stdout, proc.stdout


# Minimal reproducers of the bugs the examples hit -----------------------------------------------------

def test_var_stencil_in_loop_is_not_updated_in_place(backend):
    @em.compile
    def roll_left(X: em.f32["N"], n: em.i32):  # noqa: F821
        v = em.var(X)
        with em.loop(n):
            (i,) = em.indices(X.shape)
            v.val = v.val[(i + 1) % X.shape[0]]
        return v.val
    X = np.arange(1, 9, dtype=np.float32)
    np.testing.assert_array_equal(roll_left(X, 1).numpy(), np.roll(X, -1))  # got [2 .. 8 2]


def test_fuse_loads_does_not_recompute_an_overwritten_input(backend):
    @em.compile
    def rotate_in_place(X: em.f32["N"]):  # noqa: F821
        n = X.shape[0]
        B = em.buffer(X.shape, em.f32)
        with em.kernel(n) as i:
            B[i] = X[(i + 1) % n]
        with em.kernel(n) as i:
            X[i] = B[i]
    X = np.arange(1, 9, dtype=np.float32)
    want = np.roll(X, -1)
    rotate_in_place(X)
    np.testing.assert_array_equal(X, want)  # got [2 .. 8 2]: one kernel reads X while writing it


def test_dce_keeps_a_var_read_only_before_break(backend):
    @em.compile
    def doublings(X: em.i32["N"], n: em.i32):  # noqa: F821
        out = em.zeros(X.shape, em.i32)
        with em.kernel(X.shape[0]) as i:
            x, count = em.var(X[i]), em.var(0)
            with em.loop(n):
                with em.if_(x > 100):
                    em.break_()
                x.val = x * 2
                count.val += 1
            out[i] = count
        return out
    got = doublings(np.array([1, 3, 50, 200], np.int32), 20).numpy()
    np.testing.assert_array_equal(got, [7, 6, 2, 0])  # got [20 20 20 0]: the set of x was deleted
