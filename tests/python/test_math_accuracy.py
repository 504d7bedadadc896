"""Transcendental functions against NumPy's own accuracy vectors (issue 39, part 5).

NumPy ships, for each ufunc it validates, a CSV of float32 inputs, the correctly rounded outputs
and the largest error it allows in ulp (2 to 4): numpy/core/tests/data/umath-validation-set-*.csv
(Debian's python3-numpy; numpy/_core/tests/data in NumPy 2). Every float32 row of the thirteen
files for Ember's sin cos tan exp exp2 log log2 tanh sinh cosh asin acos atan runs through one
compiled program per function on every backend; the result's word is compared with the CSV's in
ulp (positions on the ordered line of floats; a zero of the wrong sign is a mismatch; NaN matches
any NaN). No row may be over its tolerance, except the
driver exceptions of _driver_exceptions: the subnormal rows on a backend whose driver flushes
subnormals (a probe decides; none of this machine's do: README "Backends", GPU math).

`PYTHONPATH=build/python /usr/bin/python3 tests/python/test_math_accuracy.py [backend ...]` prints
the table of rows over tolerance per function and backend (and the worst row of each), without
asserting anything."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import ember as em

# (NumPy's ufunc name in the file name, Ember's function)
FUNCTIONS = [("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("exp", "exp"), ("exp2", "exp2"), ("log", "log"),
             ("log2", "log2"), ("tanh", "tanh"), ("sinh", "sinh"), ("cosh", "cosh"), ("arcsin", "asin"),
             ("arccos", "acos"), ("arctan", "atan")]

def _subnormal_rows(x, want):
    """Rows whose input or correctly rounded output is subnormal."""
    def sub(w):
        return ((w & 0x7F800000) == 0) & ((w & 0x007FFFFF) != 0)
    return sub(x) | sub(want)


_FLUSHES = {}


def _flushes_subnormals(backend):
    """Whether the backend's float arithmetic flushes subnormals to zero (x * 0.5 of the smallest
    normal float is 0, or a subnormal times 2^23 is 0). Not on this project's CPU devices (lavapipe
    and llvmpipe keep them); GPU drivers without DenormPreserve (Vulkan: no
    shaderDenormPreserveFloat32; OpenGL: no control at all) may."""
    if backend not in _FLUSHES:
        @em.compile
        def probe(x: em.f32["N"]):  # noqa: F821
            return x * 0.5, x * 8388608.0
        x = np.array([1.1754944e-38, 1e-40], np.float32)
        half, scaled = (t.numpy() for t in probe(x))
        _FLUSHES[backend] = bool(half[0] == 0 or scaled[1] == 0)
    return _FLUSHES[backend]


def _driver_exceptions(backend):
    """[(predicate over (input words, expected words) -> bool mask, reason)]: rows a backend's driver
    cannot get right. They are still run and reported, but as an expected failure. README
    "Backends" lists them."""
    if _flushes_subnormals(backend):
        return [(_subnormal_rows, f"the {backend} driver flushes subnormal floats to zero (no DenormPreserve): "
                                  "subnormal inputs read as 0 and subnormal results are 0")]
    return []


def _data_dir():
    for sub in ("core", "_core"):
        d = Path(np.__file__).parent / sub / "tests" / "data"
        if (d / "umath-validation-set-sin.csv").is_file():
            return d
    return None


def load_vectors(ufunc):
    """(inputs, expected outputs, tolerances): the float32 rows of NumPy's CSV for `ufunc`, as
    uint32 words and int ulp tolerances."""
    rows = []
    with open(_data_dir() / f"umath-validation-set-{ufunc}.csv") as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) == 4 and parts[0] == "np.float32":
                rows.append((int(parts[1], 16), int(parts[2], 16), int(parts[3])))
    a = np.array(rows, dtype=np.int64)
    return a[:, 0].astype(np.uint32), a[:, 1].astype(np.uint32), a[:, 2]


def ulp_distance(got, want):
    """Distance in ulp between float32 words (arrays of uint32): the difference of their positions
    on the ordered line of floats (-0 and +0 share one position). A NaN matches any NaN and
    nothing else; a zero of the wrong sign, or NaN against a number, is infinitely far."""
    got = got.astype(np.int64)
    want = want.astype(np.int64)

    def key(w):
        return np.where(w >= 0x80000000, -(w & 0x7FFFFFFF), w)

    def isnan(w):
        return (w & 0x7FFFFFFF) > 0x7F800000

    d = np.abs(key(got) - key(want)).astype(np.float64)
    gn, wn = isnan(got), isnan(want)
    d[gn | wn] = np.inf
    d[gn & wn] = 0.0
    zeros = ((got & 0x7FFFFFFF) == 0) & ((want & 0x7FFFFFFF) == 0)
    d[zeros & (got != want)] = np.inf
    return d


_PROGRAMS = {}


def _program(name):
    """One compiled program per function (kept across backends and tests: cache-friendly)."""
    if name not in _PROGRAMS:
        fn = getattr(em, name)

        def f(x: em.f32["N"]):  # noqa: F821
            return fn(x)
        _PROGRAMS[name] = em.compile(f, name=f"accuracy_{name}")
    return _PROGRAMS[name]


def evaluate(ufunc, name):
    """(inputs, expected, got, tolerance, distance) for one function on the current backend."""
    x, want, tol = load_vectors(ufunc)
    got = _program(name)(x.view(np.float32)).numpy().view(np.uint32)
    return x, want, got, tol, ulp_distance(got, want)


def _f(w):
    return f"{float(np.uint32(w).view(np.float32))!r} (0x{int(w):08x})"


def describe(ufunc, name, x, want, got, tol, dist, rows):
    """The worst of `rows` in words, for failure messages and the table."""
    if not np.any(rows):
        return ""
    i = np.flatnonzero(rows)[np.argmax(dist[rows] - tol[rows])]
    return (f"{name}({_f(x[i])}) = {_f(got[i])}, expected {_f(want[i])}: {dist[i]:g} ulp "
            f"(tolerance {tol[i]})")


needs_data = pytest.mark.skipif(_data_dir() is None,
                                reason="NumPy's accuracy vectors (umath-validation-set-*.csv) are not installed")


@needs_data
@pytest.mark.parametrize("ufunc,name", FUNCTIONS, ids=[n for _, n in FUNCTIONS])
def test_numpy_validation_vectors(backend, ufunc, name):
    x, want, got, tol, dist = evaluate(ufunc, name)
    over = dist > tol
    excused = np.zeros_like(over)
    reasons = []
    for predicate, reason in _driver_exceptions(backend):
        m = predicate(x, want) & over
        if np.any(m):
            excused |= m
            reasons.append(reason)
    bad = over & ~excused
    assert not np.any(bad), (f"{int(np.sum(bad))} of {len(x)} rows over NumPy's tolerance on {backend}; worst: "
                             + describe(ufunc, name, x, want, got, tol, dist, bad))
    if np.any(excused):
        pytest.xfail(f"{int(np.sum(excused))} rows over tolerance, driver exceptions: " + "; ".join(reasons))


# NumPy's float64 function per Ember name, for the random-word sweep.
_NUMPY = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "exp2": np.exp2, "log": np.log,
          "log2": np.log2, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin,
          "acos": np.arccos, "atan": np.arctan}


def _random_words(n=1 << 16, seed=39):
    """n float32 words drawn uniformly over all words (every exponent, both signs, NaN and infinity
    among them), plus a dense band of each function's interesting range [-16, 16]."""
    rng = np.random.default_rng(seed)
    w = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    band = rng.uniform(-16, 16, size=n).astype(np.float32).view(np.uint32)
    return np.concatenate([w, band])


@needs_data
@pytest.mark.parametrize("ufunc,name", FUNCTIONS, ids=[n for _, n in FUNCTIONS])
def test_random_words_within_numpy_tolerance(backend, ufunc, name):
    """128K float32 words, half over the whole range, half in [-16, 16], against NumPy's float64
    function rounded to float32 (nearly always the correctly rounded result), within the function's
    tolerance from NumPy's file: the vectors above are few (113 to 814 rows per function)."""
    _, _, tol = load_vectors(ufunc)
    x = _random_words()
    with np.errstate(all="ignore"):
        want = _NUMPY[name](x.view(np.float32).astype(np.float64)).astype(np.float32).view(np.uint32)
    got = _program(name)(x.view(np.float32)).numpy().view(np.uint32)
    dist = ulp_distance(got, want)
    t = np.full(len(x), tol.max())
    bad = dist > t
    assert not np.any(bad), (f"{int(np.sum(bad))} of {len(x)} random words over {tol.max()} ulp on {backend}; worst: "
                             + describe(ufunc, name, x, want, got, t, dist, bad))


def test_mesa_cpu_devices_keep_subnormals(backend):
    """lavapipe and llvmpipe do not flush subnormals (no DenormPreserve is asked for on lavapipe,
    which does not report it; OpenGL has no way to ask): so no row is excused on them."""
    if "llvmpipe" not in em.device_info():
        pytest.skip(f"{backend} does not run on Mesa's llvmpipe here")
    assert not _flushes_subnormals(backend)


_ALL_MATH = ("sin", "cos", "tan", "exp", "exp2", "log", "log2", "sinh", "cosh", "tanh", "asin", "acos", "atan")


def _every_function(x: em.f32["N"]):  # noqa: F821
    out = [getattr(em, n)(x) for n in _ALL_MATH]
    return tuple(out) + (em.atan2(x, x + 1.0), em.pow(em.abs(x), x))


def test_fast_math_prints_the_builtins():
    """em.compile(fast_math=True): the shading languages' builtins (sin, expf, ...), not Ember's
    functions; without it, a shader carries only the functions it calls."""
    accurate = em.compile(_every_function, name="every_function")
    fast = em.compile(_every_function, name="every_function", fast_math=True)
    x = np.linspace(0.1, 0.9, 7, dtype=np.float32)
    accurate(x)
    fast(x)
    for lang in ("glsl", "hlsl", "cuda"):
        a, f = accurate.source(lang), fast.source(lang)
        assert "float ember_sin(" in a and "ember_rem_pio2" in a and "ember_tanh(" in a
        assert "ember_sin(" not in f and "ember_rem_pio2" not in f and "ember_fast_pow(" in f
        builtin = "sinf(" if lang == "cuda" else "sin("
        assert builtin in f.replace("ember_", "#")

    @em.compile
    def only_exp(x: em.f32["N"]):  # noqa: F821
        return em.exp(x)
    only_exp(x)
    src = only_exp.source("glsl")
    assert "float ember_exp(" in src and "ember_rem_pio2" not in src and "ember_log_split" not in src


def test_fast_math_runs_on_every_backend(backend):
    """The builtins' results, on any backend: close to NumPy's on a benign range (the cpu backend
    ignores the switch)."""
    fast = em.compile(_every_function, name="every_function", fast_math=True)
    x = np.linspace(0.1, 0.9, 64, dtype=np.float32)
    got = [t.numpy() for t in fast(x)]
    ref = [_NUMPY[n](x.astype(np.float64)) for n in _ALL_MATH]
    ref += [np.arctan2(x, x + 1.0), np.power(x, x)]
    for n, g, r in zip(_ALL_MATH + ("atan2", "pow"), got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6, err_msg=n)


def test_math_compiles_with_nvrtc():
    """Every function, Ember's and the builtins (fast_math), printed in the cuda dialect and
    compiled by NVRTC to PTX for sm_80 and sm_90 (no GPU here: tests/python/test_cuda_codegen.py)."""
    _C = em._ember
    if not _C._nvrtc_built():
        pytest.skip("this Ember was built without NVRTC (EMBER_WITH_CUDA)")
    prog = em.compile(_every_function, name="every_function_cuda", trace_cache=False)
    prog._trace()
    for fast in (False, True):
        kernels = dict(_C._cuda_kernels(prog._tracer, fast))
        unit = _C._cuda_translation_unit(list(kernels.values()), fast)
        assert ("ember_rem_pio2" in unit) != fast
        for arch in (80, 90):
            ptx, log, _ = _C._nvrtc_compile(unit, "math.cu", arch)
            text = ptx.decode(errors="replace")
            assert f".target sm_{arch}" in text, log
            assert set(re.findall(r"\.entry\s+(ember_[0-9a-f]{16})\b", text)) == set(kernels), log


def _table(backends):
    em_backends = [b for b in backends if not em._ember.backend_unavailable(b)]
    print("| function | " + " | ".join(em_backends) + " |")
    print("|---|" + "---|" * len(em_backends))
    worst = []
    for ufunc, name in FUNCTIONS:
        cells = []
        for b in em_backends:
            em.init(b)
            x, want, got, tol, dist = evaluate(ufunc, name)
            over = dist > tol
            cells.append(f"{int(np.sum(over))} / {len(x)}")
            if np.any(over):
                worst.append(f"{b}: " + describe(ufunc, name, x, want, got, tol, dist, over))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    for w in worst:
        print(w)


if __name__ == "__main__":
    _table(sys.argv[1:] or ["cpu", "vulkan", "vulkan-hlsl", "opengl"])
