"""Hostile inputs (issue 10, parts 5 and 6): every input below gets either a clear ember.Error
subclass naming the argument, the expected and the actual, or the result NumPy gives; never a
crash, a hang, a silent conversion, or a write into memory the program was not meant to write.
Then the compile cache's failures (corrupt entries, concurrent writers, unwritable or full
directories, temporaries of killed compiles) and resource steadiness (RSS and fds flat over many
calls and compiles). Anything that changes process-wide state runs in a subprocess.

The table (input -> outcome):
  float64 / int64 / float16 / uint8 array for f32 or i32  -> ember.TypeError naming arg, dtypes
  non-contiguous array (strided, transposed, negative)    -> read correctly
  non-contiguous / bool array the program writes          -> the write reaches the caller's array
  read-only array the program writes                      -> ember.TypeError, array untouched
  read-only array the program only reads                  -> works
  zero-size arrays                                        -> NumPy's empty result (sum 0, prod 1, mean nan,
                                                             matmul with K = 0 zeros)
  NaN / inf arrays                                        -> NumPy's results (NaN propagates; em.max/min
                                                             are fmax/fmin, as documented)
  2^31 elements or a dimension >= 2^31 (argument, em.zeros
  outside or inside a program with symbolic N)            -> ember.ShapeError naming size and limit,
                                                             before anything is copied, allocated or run
  em.Tensor of another backend                            -> works (tensors are host-visible memory: read
                                                             in place or copied), writes reach it
  tensor results after later calls reuse pooled storage   -> still hold their values
  a tensor written by another thread's calls meanwhile    -> consistent results, final value exact
  8 threads x 50 calls of one program                     -> correct results
  corrupt / truncated / foreign-version / other key's
  cache entry                                             -> warning on stderr, rebuilt, correct result
  two processes compiling one program into one cache      -> both succeed, one entry, no temporaries
  unwritable cache directory / full disk                  -> compiles, one warning per process
  no writable place at all (RLIMIT_FSIZE 0)               -> GPU: compiles, warns; cpu: ember.BackendError
  temporaries of a killed compile                         -> removed at the next start (live ones kept)
"""
import gc
import glob
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ember as em
from conftest import SANITIZED

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("EMBER_BUILD_DIR") or REPO / "build").resolve()
GPU = ("vulkan", "vulkan-hlsl", "opengl")


def available(name):
    if name not in em._program._BUILT_BACKENDS:
        return False
    return not em._ember.backend_unavailable(name)


def selected():
    sel = [b for b in os.environ.get("EMBER_TEST_BACKENDS", "cpu,vulkan,vulkan-hlsl,opengl").split(",") if b]
    return [b for b in sel if available(b)]


@em.compile
def double(X: em.f32["N"]):  # noqa: F821
    return X * 2.0


@em.compile
def bump(X: em.f32["N"]):  # noqa: F821
    X[:] = X * 2.0 + 1.0


@em.compile
def bump2d(X: em.f32["N", "M"]):  # noqa: F821
    X[:, :] = X * 2.0 + 1.0


@em.compile
def scale2d(X: em.f32["N", "M"]):  # noqa: F821
    return X * 3.0 - 1.0


@em.compile
def negate_flags(P: em.bool["N"]):  # noqa: F821
    P[:] = ~P


@em.compile
def add_i(X: em.i32["N"], k: em.i32):  # noqa: F821
    return X + k


# Wrong dtypes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float64, np.int64, np.float16, np.uint8, np.int32])
def test_wrong_dtype_for_f32_is_a_type_error_naming_both(backend, dt):
    a = np.arange(6).astype(dt)
    before = a.copy()
    with pytest.raises(em.TypeError) as ei:
        bump(a)
    msg = str(ei.value)
    assert "'X'" in msg and "float32" in msg and np.dtype(dt).name in msg, msg
    assert isinstance(ei.value, TypeError)
    np.testing.assert_array_equal(a, before)  # nothing ran, nothing converted


@pytest.mark.parametrize("dt", [np.int64, np.float32, np.uint8, np.uint32])
def test_wrong_dtype_for_i32_is_a_type_error_naming_both(backend, dt):
    with pytest.raises(em.TypeError) as ei:
        add_i(np.arange(4).astype(dt), 1)
    msg = str(ei.value)
    assert "'X'" in msg and "int32" in msg and np.dtype(dt).name in msg, msg


# Non-contiguous and read-only arrays -------------------------------------------------------------

def views():
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    return {
        "strided": lambda b: b[::2, ::3],
        "transposed": lambda b: b.T,
        "negative": lambda b: b[::-1, ::-2],
        "column": lambda b: b[:, 3:4],
        "offset": lambda b: b[1:5, 2:9],
    }, base


@pytest.mark.parametrize("kind", ["strided", "transposed", "negative", "column", "offset"])
def test_non_contiguous_arrays_are_read_correctly(backend, kind):
    make, base = views()
    v = make[kind](base)
    got = scale2d(v).numpy()
    np.testing.assert_array_equal(got, v * 3.0 - 1.0)
    np.testing.assert_array_equal(base, np.arange(60, dtype=np.float32).reshape(6, 10))  # untouched


@pytest.mark.parametrize("kind", ["strided", "transposed", "negative", "column", "offset"])
def test_writes_into_a_non_contiguous_argument_reach_the_callers_array(backend, kind):
    make, base = views()
    want = base.copy()
    make[kind](want)[...] = make[kind](want) * 2.0 + 1.0
    assert bump2d(make[kind](base)) is None
    np.testing.assert_array_equal(base, want)  # the view's elements changed, and only those


def test_writes_into_a_1d_negative_stride_view(backend):
    a = np.arange(10, dtype=np.float32)
    bump(a[::-3])
    want = np.arange(10, dtype=np.float32)
    want[::-3] = want[::-3] * 2 + 1
    np.testing.assert_array_equal(a, want)


def test_writes_into_a_bool_argument_reach_the_caller(backend):
    p = np.array([True, False, False, True, True])
    negate_flags(p)
    np.testing.assert_array_equal(p, [False, True, True, False, False])
    q = np.zeros(8, bool)
    negate_flags(q[::2])
    np.testing.assert_array_equal(q, [True, False] * 4)


def test_read_only_array_written_by_the_program_is_an_error(backend):
    a = np.arange(5, dtype=np.float32)
    a.flags.writeable = False
    with pytest.raises(em.TypeError) as ei:
        bump(a)
    msg = str(ei.value)
    assert "'X'" in msg and "read-only" in msg and "bump" in msg, msg
    np.testing.assert_array_equal(a, np.arange(5, dtype=np.float32))
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = b.T
    v.flags.writeable = False
    with pytest.raises(em.TypeError, match="'X'.*read-only"):
        bump2d(v)
    np.testing.assert_array_equal(b, np.arange(12, dtype=np.float32).reshape(3, 4))


def test_read_only_array_only_read_works(backend):
    a = np.arange(5, dtype=np.float32)
    a.flags.writeable = False
    np.testing.assert_array_equal(double(a).numpy(), a * 2)
    big = np.broadcast_to(np.float32(3), (4, 5))  # read-only, zero strides
    np.testing.assert_array_equal(scale2d(big).numpy(), np.full((4, 5), 8, np.float32))


# Zero-size arrays --------------------------------------------------------------------------------

def test_zero_size_arrays_give_numpys_empty_results(backend):
    @em.compile
    def reds(X: em.f32["N", "M"]):  # noqa: F821
        return em.sum(X), em.prod(X), em.mean(X), em.sum(X, axis=1), X * 2.0

    for shape in [(0, 3), (3, 0), (0, 0)]:
        x = np.zeros(shape, np.float32)
        s, p, m, s1, d = reds(x)
        assert float(s) == 0.0 and float(p) == 1.0 and np.isnan(float(m))
        np.testing.assert_array_equal(s1.numpy(), x.sum(axis=1))
        assert d.numpy().shape == shape

    @em.compile
    def mm(A: em.f32["N", "K"], B: em.f32["K", "M"]):  # noqa: F821
        return A @ B

    np.testing.assert_array_equal(mm(np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)).numpy(),
                                  np.zeros((2, 3), np.float32))
    assert mm(np.zeros((0, 2), np.float32), np.ones((2, 3), np.float32)).numpy().shape == (0, 3)
    e = np.zeros(0, np.float32)
    assert bump(e) is None and double(e).numpy().shape == (0,)


# NaN and inf -------------------------------------------------------------------------------------

def test_nan_and_inf_give_numpys_results(backend):
    @em.compile
    def f(X: em.f32["N"]):  # noqa: F821
        return (X * 2.0 + 1.0, em.exp(X), em.sqrt(X), X / X, em.sum(X), em.mean(X), X > 0.0, em.isnan(X),
                em.max(X, 0.0))

    x = np.array([1.0, np.nan, -np.inf, np.inf, 0.0, -2.0], np.float32)
    got = f(x)
    with np.errstate(all="ignore"):
        want = (x * 2 + 1, np.exp(x), np.sqrt(x), x / x, x.sum(), x.mean(), x > 0, np.isnan(x), np.fmax(x, 0))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-6, equal_nan=True)
    full = np.full(7, np.nan, np.float32)
    s, m = f(full)[4:6]
    assert np.isnan(float(s)) and np.isnan(float(m))
    infs = np.full(5, np.inf, np.float32)
    assert float(f(infs)[4]) == np.inf


def test_max_and_min_reductions_with_nan_follow_fmax(backend):
    """em.max/em.min are C's fmax/fmin (core/IR.md): a NaN among numbers is skipped, as
    numpy.fmax.reduce does; argmax follows numpy.argmax (the first NaN wins)."""
    @em.compile
    def f(X: em.f32["N"]):  # noqa: F821
        return em.max(X), em.min(X), em.argmax(X)

    x = np.array([1.0, np.nan, 3.0, -np.inf], np.float32)
    mx, mn, am = f(x)
    assert float(mx) == np.fmax.reduce(x) and float(mn) == np.fmin.reduce(x) and int(am) == np.argmax(x)


def test_max_and_min_of_all_nan_rows_are_nan(backend):
    """A row of only NaNs has no number to pick: NaN, as numpy.fmax.reduce / nanmax (the
    reductions start from NaN, which any number replaces). argmax still reports the first NaN."""
    @em.compile
    def f(X: em.f32[3, 4]):
        return em.max(X, axis=1), em.min(X, axis=1), em.argmax(X, axis=1), em.max(X)

    x = np.array([[np.nan] * 4, [1.0, np.nan, 3.0, -2.0], [-np.inf] * 4], np.float32)
    mx, mn, am, total = f(x)
    np.testing.assert_array_equal(mx.numpy(), np.fmax.reduce(x, axis=1))
    np.testing.assert_array_equal(mn.numpy(), np.fmin.reduce(x, axis=1))
    np.testing.assert_array_equal(am.numpy(), np.argmax(x, axis=1))
    assert float(total) == 3.0


# Sizes of 2^31 elements and more -----------------------------------------------------------------

def test_argument_of_2_31_elements_is_a_shape_error_before_any_copy(backend):
    big = np.broadcast_to(np.zeros(1, np.float32), (2 ** 16, 2 ** 15))  # 8 GiB if it were copied
    t0 = time.time()
    with pytest.raises(em.ShapeError) as ei:
        scale2d(big)
    msg = str(ei.value)
    assert "'X'" in msg and "2147483648" in msg and "2147483647" in msg, msg
    assert time.time() - t0 < 5  # nothing was copied


def test_a_dimension_of_2_31_is_a_shape_error_even_when_empty(backend):
    e = np.empty((0, 2 ** 31), np.float32)
    with pytest.raises(em.ShapeError, match=r"'X'.*dimension 1.*2147483648.*2147483647"):
        scale2d(e)


def test_em_zeros_of_2_31_elements_outside_a_program():
    with pytest.raises(em.ShapeError, match="4294967296 elements.*2147483647"):
        em.zeros((2 ** 16, 2 ** 16), em.f32)
    with pytest.raises(em.ShapeError, match="2147483647"):
        em.tensor(np.broadcast_to(np.float32(0), (2 ** 16, 2 ** 15)))


def test_allocation_of_symbolic_n_by_n_is_a_shape_error_before_running(backend):
    @em.compile
    def square(X: em.f32["N"]):  # noqa: F821
        X[0] = 5.0  # would run before the allocation if the check came late
        return em.zeros([X.shape[0], X.shape[0]], em.f32) + 1.0

    x = np.zeros(2 ** 16, np.float32)
    with pytest.raises(em.ShapeError) as ei:
        square(x)
    msg = str(ei.value)
    assert "[N, N]" in msg and "(65536, 65536)" in msg and "4294967296" in msg and "2147483647" in msg, msg
    assert "test_hostile.py" in msg  # the user's line
    assert x[0] == 0.0  # nothing ran
    np.testing.assert_array_equal(square(np.zeros(3, np.float32)).numpy(), np.ones((3, 3), np.float32))


# Tensors of other backends, reused storage, threads ----------------------------------------------

def backend_pairs():
    bs = [b for b in ("cpu", "vulkan", "vulkan-hlsl", "opengl")
          if b in os.environ.get("EMBER_TEST_BACKENDS", "cpu,vulkan,vulkan-hlsl,opengl").split(",")]
    return [(a, b) for a in bs for b in bs if a != b]


@pytest.mark.parametrize("made_on,used_on", backend_pairs())
def test_tensor_of_another_backend_works_and_takes_writes(made_on, used_on):
    for b in (made_on, used_on):
        if not available(b):
            pytest.skip(f"backend {b} unavailable")
    em.init(made_on)
    x = np.arange(8, dtype=np.float32)
    t = double(x)  # lives in made_on's memory
    em.init(used_on)
    np.testing.assert_array_equal(double(t).numpy(), x * 4)
    np.testing.assert_array_equal(t.numpy(), x * 2)  # read, not written
    bump(t)  # the program writes it: the write reaches the tensor
    np.testing.assert_array_equal(t.numpy(), x * 4 + 1)
    em.init(made_on)
    np.testing.assert_array_equal(double(t).numpy(), x * 8 + 2)


def test_results_keep_their_values_when_later_calls_reuse_storage(backend):
    xs = [np.full(100, i, np.float32) for i in range(20)]
    outs = [double(x) for x in xs]
    for k in range(5):  # results dropped and made again: pooled buffers are reused
        tmp = [double(x) for x in xs]
        del tmp
        gc.collect()
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o.numpy(), np.full(100, 2 * i, np.float32))
    again = double(outs[3])  # a result passed back in (in place on its own backend)
    np.testing.assert_array_equal(again.numpy(), np.full(100, 12, np.float32))


def test_argument_written_by_another_threads_calls_meanwhile(backend):
    @em.compile
    def inc(X: em.f32["N"]):  # noqa: F821
        X[:] = X + 1.0

    x = np.zeros(4096, np.float32)
    errors, seen = [], []

    def writer():
        try:
            for _ in range(100):
                inc(x)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def reader():
        try:
            for _ in range(100):
                seen.append(double(x).numpy())
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts), "hang"
    assert not errors, errors
    np.testing.assert_array_equal(x, np.full(4096, 100, np.float32))  # no update lost
    for r in seen:  # each element a value x had at some point
        assert np.all((r >= 0) & (r <= 200) & (r % 2 == 0))


def test_threads_calling_one_program(backend):
    @em.compile
    def f(X: em.f32["N"], s: em.f32):  # noqa: F821
        return em.sum(X * s), X * s + 1.0

    errors = []

    def work(k):
        try:
            for i in range(50):
                x = np.arange(64 + k, dtype=np.float32) + i
                tot, y = f(x, float(k + 1))
                np.testing.assert_allclose(float(tot), (x * (k + 1)).sum(), rtol=1e-5)
                np.testing.assert_array_equal(y.numpy(), x * np.float32(k + 1) + 1)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not any(t.is_alive() for t in ts), "hang"
    assert not errors, errors[:3]


# The compile cache (each case in subprocesses with their own EMBER_CACHE_DIR) ---------------------

PROGRAM = """
import sys, numpy as np, ember as em
em.init(sys.argv[1])
c = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
def f(X: em.f32["N"]):
    return X * 3.0 + c
prog = em.compile(f)
x = np.arange(10, dtype=np.float32)
r = prog(x).numpy()
assert np.array_equal(r, x * 3 + np.float32(c)), r
print("OK", prog.stats["cache_hit"])
"""


def run_py(code, backend, cache, *args, env=None, preexec=None, timeout=240):
    e = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=str(BUILD / "python"))
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), backend, *map(str, args)], env=e,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          preexec_fn=preexec)


ARTIFACT = {"cpu": "so", "vulkan": "spv", "vulkan-hlsl": "spv", "opengl": "glbin", "cuda": "cubin"}


def entries(cache, ext):
    return sorted(p for p in os.listdir(cache) if p.endswith("." + ext))


def warnings_in(stderr):
    return [line for line in stderr.splitlines() if line.startswith("ember: warning:")]


@pytest.mark.parametrize("mode", ["garbage", "truncated", "foreign-version", "other-key", "no-sum"])
def test_bad_cache_entry_is_rebuilt_with_a_warning(backend, mode, tmp_path):
    ext = ARTIFACT[backend]
    cache = tmp_path / "cache"
    p = run_py(PROGRAM, backend, cache, 1.0)
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr
    first = entries(cache, ext)
    if not first:
        pytest.skip(f"{backend} keeps no disk entries here (no program binary format)")
    p = run_py(PROGRAM, backend, cache, 2.0)  # another program: another key
    assert p.returncode == 0, p.stderr
    other = [e for e in entries(cache, ext) if e not in first][0]
    for name in first:
        art, key = cache / name, name[: -len(ext) - 1]
        s = cache / (key + ".sum")
        if mode == "garbage":
            art.write_bytes(os.urandom(3000))
            s.write_text("nonsense")
        elif mode == "truncated":
            art.write_bytes(art.read_bytes()[: art.stat().st_size // 2])
        elif mode == "foreign-version":
            s.write_text(s.read_text().replace("ember-cache-sum 2", "ember-cache-sum 99"))
        elif mode == "other-key":  # a consistent entry, but of another program
            art.write_bytes((cache / other).read_bytes())
            s.write_bytes((cache / (other[: -len(ext) - 1] + ".sum")).read_bytes())
        else:
            s.unlink()
    p = run_py(PROGRAM, backend, cache, 1.0)
    assert p.returncode == 0 and "OK False" in p.stdout, p.stdout + p.stderr  # rebuilt, correct
    w = warnings_in(p.stderr)
    assert w and all("rebuilding" in line for line in w), p.stderr
    assert any(first[0] in line for line in w), p.stderr
    p = run_py(PROGRAM, backend, cache, 1.0)
    assert p.returncode == 0 and "OK True" in p.stdout and not warnings_in(p.stderr), p.stdout + p.stderr


def test_two_processes_compiling_one_program_into_one_cache(backend, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    go = tmp_path / "go"
    code = textwrap.dedent("""
        import os, sys, time
        while not os.path.exists(sys.argv[3]):
            time.sleep(0.001)
        """) + PROGRAM.replace("c = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0", "c = 7.0")
    e = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=str(BUILD / "python"))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), backend, "0", str(go)], env=e,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(1.0)  # both imported ember and wait
    go.touch()
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and "OK" in out, err
        assert not warnings_in(err), err
    ext = ARTIFACT[backend]
    names = os.listdir(cache)
    assert not [n for n in names if ".tmp." in n], names
    arts = entries(cache, ext)
    if backend != "opengl" or arts:
        assert len(arts) == 1, names  # one kernel: exactly one entry
        key = arts[0][: -len(ext) - 1]
        source = {"so": ["cpp"], "spv": ["hlsl" if backend == "vulkan-hlsl" else "glsl"], "glbin": ["glsl"],
                  "cubin": []}[ext]  # cuda keeps the image only (prog.source("cuda") prints the text)
        assert sorted(n for n in names if n.startswith(key)) == sorted(
            [arts[0], key + ".sum"] + [key + "." + e for e in source]), names
    p = run_py(PROGRAM.replace("c = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0", "c = 7.0"), backend, cache)
    assert p.returncode == 0 and ("OK True" in p.stdout or not arts), p.stdout + p.stderr


THREE_PROGRAMS = """
import sys, numpy as np, ember as em
em.init(sys.argv[1])
x = np.arange(10, dtype=np.float32)
for c in (1.0, 2.0, 3.0):
    def f(X: em.f32["N"]):
        return X * 3.0 + c
    r = em.compile(f)(x).numpy()
    assert np.array_equal(r, x * 3 + np.float32(c)), r
print("OK")
"""


def test_unwritable_cache_directory_compiles_and_warns_once(backend, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a regular file: nothing can be made under it, even as root")
    p = run_py(THREE_PROGRAMS, backend, blocker / "cache")
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr
    w = warnings_in(p.stderr)
    assert len(w) == 1 and "compile cache cannot be written" in w[0], p.stderr
    if os.geteuid() != 0:  # a read-only directory (root writes through chmod)
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        p = run_py(THREE_PROGRAMS, backend, ro)
        assert p.returncode == 0 and len(warnings_in(p.stderr)) == 1, p.stderr


def mount_tiny_tmpfs(path):
    if os.geteuid() != 0:
        return "not root"
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], stderr=subprocess.PIPE,
                       text=True)
    return "" if r.returncode == 0 else r.stderr.strip() or "mount failed"


def test_full_disk_for_the_cache_compiles_and_warns_once(backend, tmp_path):
    mnt = tmp_path / "full"
    why = mount_tiny_tmpfs(mnt)
    if why:
        pytest.skip(f"cannot mount a 64k tmpfs ({why}); test_no_writable_place_at_all covers the GPU backends")
    try:
        try:
            with open(mnt / "filler", "wb") as f:  # fill it to the last block
                while True:
                    f.write(b"\0" * 1024)
                    f.flush()
        except OSError:
            pass
        p = run_py(THREE_PROGRAMS, backend, mnt / "cache")
        assert p.returncode == 0 and "OK" in p.stdout, p.stderr
        w = warnings_in(p.stderr)
        assert len(w) == 1 and "compile cache cannot be written" in w[0], p.stderr
        assert not [n for n in os.listdir(mnt) if ".tmp." in n]
    finally:
        subprocess.run(["umount", str(mnt)])


def test_no_writable_place_at_all(backend, tmp_path):
    """RLIMIT_FSIZE 0: no file can be written anywhere. The GPU backends compile in process (one
    warning); cpu must write the compiler's output somewhere, so it is a clear BackendError naming
    both places it tried."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    p = run_py(THREE_PROGRAMS.replace("print(\"OK\")", "print('OK')"), backend, tmp_path / "cache", preexec=limit)
    if backend == "cpu":
        assert p.returncode == 1 and "ember.BackendError" in p.stderr, p.stderr
        assert "compile cache" in p.stderr and "temporary directory" in p.stderr and "can be written" in p.stderr
    else:
        assert p.returncode == 0 and "OK" in p.stdout, p.stderr
        assert len(warnings_in(p.stderr)) == 1, p.stderr


def test_temporaries_of_a_killed_compile_are_removed_at_the_next_start(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    hang = tmp_path / "hanging-cxx"
    hang.write_text("#!/bin/sh\n# a compiler killed mid-compile: writes part of its output, then hangs\n"
                    "for a in \"$@\"; do case \"$prev\" in -o) printf 'partial' > \"$a\";; esac; prev=$a; done\n"
                    "exec sleep 600\n")
    hang.chmod(0o755)
    e = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=str(BUILD / "python"), EMBER_CXX=str(hang))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PROGRAM), "cpu"], env=e, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not glob.glob(str(cache / "*.tmp.*.so")):
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the process and its compiler, mid-compile
        proc.wait()
    left = [n for n in os.listdir(cache) if ".tmp." in n]
    assert left, os.listdir(cache)
    # Another process compiling right now (alive) and an ancient one: kept and removed.
    live = subprocess.Popen(["sleep", "60"])
    try:
        busy = cache / f"cpu-0123.tmp.{live.pid}.1.0.so"
        busy.write_text("in progress")
        ancient = cache / f"cpu-4567.tmp.{live.pid}.1.1.so"
        ancient.write_text("old")
        old = time.time() - 3 * 3600
        os.utime(ancient, (old, old))
        for n in left:  # dead process's files, a minute old
            os.utime(cache / n, (time.time() - 60, time.time() - 60))
        p = run_py(PROGRAM, "cpu", cache)
        assert p.returncode == 0 and "OK" in p.stdout, p.stderr
        now = os.listdir(cache)
        assert not [n for n in left if n in now], now
        assert busy.name in now and ancient.name not in now, now
    finally:
        live.kill()
        live.wait()


# Resource steadiness (CI-sized: bench/steadiness.py runs the big numbers) ------------------------

def steadiness(tmp_path, backend, calls, compiles, env=None):
    out = tmp_path / "s.json"
    e = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    e.update(env or {})
    p = subprocess.run([sys.executable, str(REPO / "bench" / "steadiness.py"), "--backend", backend, "--calls",
                        str(calls), "--compiles", str(compiles), "--samples", "4", "--json", str(out)], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    import json
    return json.loads(out.read_text())[backend]


def test_calls_keep_rss_and_fds_flat(backend, tmp_path):
    r = steadiness(tmp_path, backend, 2000, 0)["calls"]
    rss = [row[1] for row in r]
    fds = [row[2] for row in r]
    assert max(fds) - min(fds) <= 1, r
    if SANITIZED:
        pytest.skip("RSS under ASan grows with its quarantine of freed memory (open files checked)")
    assert rss[-1] - rss[0] < 8 * 1024, r  # KiB: 2 000 calls may not keep 8 MiB


def test_distinct_compiles_keep_rss_and_fds_flat(tmp_path):
    """200 distinct OpenGL programs with a memory cache of 16 entries: once the cache is full, each
    compile evicts (and unloads) one, so RSS stops growing."""
    if not available("opengl"):
        pytest.skip("backend opengl unavailable")
    r = steadiness(tmp_path, "opengl", 10, 200, env={"EMBER_MEMORY_CACHE_ENTRIES": "16"})
    rows = r["compiles"]
    fds = [row[2] for row in rows]
    assert max(fds) - min(fds) <= 1, rows
    assert r["memory_cache"][0] <= 16, r["memory_cache"]
    if SANITIZED:
        pytest.skip("RSS under ASan grows with its quarantine of freed memory (open files checked)")
    assert rows[-1][1] - rows[1][1] < 16 * 1024, rows  # KiB, between 50 and 200 compiles
