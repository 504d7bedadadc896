"""Kernels compiled once per distinct body, cached one by one, compiled in parallel (issue 17).

A program unrolled by a Python loop holds many kernels that are the same code bound to other
buffers and params: each distinct body is printed and compiled once (prog.stats
distinct_kernels), each compiled kernel is its own cache entry (a program that changes one kernel
recompiles that one: compiled_kernels; another program reuses it), and the missing kernels are
compiled concurrently (cpu: translation_units, one per job of EMBER_COMPILE_JOBS; GPU: one per
shader). Cache processes run in subprocesses with their own EMBER_CACHE_DIR.

  program                                   backend        kernels  distinct
  the 200-step stencil of issue 17          every backend  210      4
  (per 20-step period: the normalization's sum and divide, and two alternating step kernels:
   fuse_loads recomputes v_k in the next step's kernel every other step, never copies of copies)
  30 heat steps, normalized every 10        every backend  35       6
"""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember as em

REPO = Path(__file__).resolve().parents[2]
# The counts below are fusion's and the kernel cache's: without split_reductions' stage kernels.
pytestmark = pytest.mark.usefixtures("no_split_reductions")
BUILD = Path(os.environ.get("EMBER_BUILD_DIR") or REPO / "build").resolve()


def clamped(u, axis, step):
    """u at index + step along `axis`, indices clamped into the array (em's default gather)."""
    n = u.shape[axis]
    idx = np.clip(np.arange(n) + step, 0, n - 1)
    return np.take(u, idx, axis=axis)


def stencil_reference(u, v, steps, every, couple_v=True):
    u, v = u.astype(np.float64), v.astype(np.float64)
    for k in range(steps):
        lap = clamped(u, 0, 1) + clamped(u, 0, -1) + clamped(u, 1, 1) + clamped(u, 1, -1) - 4.0 * u
        if couple_v:
            u, v = u + 0.1 * lap * np.tanh(v), v + np.sin(u) * 0.01
        else:
            u = u + 0.1 * lap * np.tanh(v)
        if k % every == 0:
            u = u / np.sqrt(np.sum(u * u) + 1.0)
    return u, v


def close(got, want, rtol=1e-4):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@em.compile
def big(u: em.f32["H", "W"], v: em.f32["H", "W"]):  # noqa: F821
    i, j = em.indices(u.shape)
    for k in range(200):
        lap = u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1] - 4.0 * u[i, j]
        u, v = u + 0.1 * lap * em.tanh(v), v + em.sin(u) * 0.01
        if k % 20 == 0:
            u = u / em.sqrt(em.sum(u * u) + 1.0)
    return u, v


@em.compile
def heat(u: em.f32["H", "W"], v: em.f32["H", "W"]):  # noqa: F821
    i, j = em.indices(u.shape)
    for k in range(30):
        lap = u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1] - 4.0 * u[i, j]
        u = u + 0.1 * lap * em.tanh(v)
        if k % 10 == 0:
            u = u / em.sqrt(em.sum(u * u) + 1.0)
    return u


def inputs(seed=3, shape=(64, 48)):
    """Random u, and v in [2.5, 3.5]: tanh(v) > 0 keeps the explicit diffusion stable over 200 steps
    (v moves by at most 0.01 a step), so float32 and float64 stay close (with tanh(v) < 0 the
    steps amplify rounding without bound)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32), rng.uniform(2.5, 3.5, shape).astype(np.float32)


def test_200_step_stencil_compiles_each_distinct_kernel_once(backend):
    """The issue's program: 210 kernels, 4 distinct bodies, results as NumPy's."""
    U, V = inputs()
    u, v = big(U, V)
    s = big.stats
    assert big.kernel_count == 210 and s["kernels"] == 210
    assert s["distinct_kernels"] == 4, s["distinct_kernels"]
    assert 0 <= s["compiled_kernels"] <= 4 and s["cache_hit"] == (s["compiled_kernels"] == 0)
    assert s["translation_units"] <= max(1, s["compiled_kernels"])
    want_u, want_v = stencil_reference(U, V, 200, 20)
    close(u.numpy(), want_u)
    close(v.numpy(), want_v)
    # The listing prints each distinct kernel once and names the kernels that run it.
    src = big.source("cpp")
    assert src.count('extern "C" void ember_') == 4, src[:2000]
    assert "// kernel #0, #21, #42, #63, #84, #105, #126, #147, #168, #189 (10 kernels, one function)" in src
    assert "kernel #" not in re.sub(r"(?m)^// kernel #.*$", "", src)  # kernel ids only in the listing's comments


def test_unrolled_steps_share_kernels(backend):
    U, V = inputs(4, (40, 24))
    got = heat(U, V).numpy()
    s = heat.stats
    assert (heat.kernel_count, s["distinct_kernels"]) == (35, 6), (heat.kernel_count, s["distinct_kernels"])
    close(got, stencil_reference(U, V, 30, 10, couple_v=False)[0])
    src = heat.source()  # one shader or function per distinct kernel, naming the kernels that run it
    assert len(set(re.findall(r"ember_[0-9a-f]{16}", src))) == 6, src[:3000]
    named = [int(k) for line in re.findall(r"(?m)^// kernel (#.*)$", src) for k in re.findall(r"#(\d+)", line)]
    assert sorted(named) == list(range(35)), named


# Per-kernel cache hits across processes -------------------------------------------------------

CHILD = textwrap.dedent("""
    import json, sys, numpy as np, ember as em
    backend, which, c = sys.argv[1], sys.argv[2], float(sys.argv[3])
    em.init(backend)

    def A(X: em.f32["N"], Y: em.f32["N"]):       # 3 kernels: sum(X * X), max|Y|, the outputs
        s = em.sum(X * X)
        m = em.max(em.abs(Y))
        return X * c + s, em.sin(Y) / (m + 1.0)

    def B(X: em.f32["N"]):                        # 2 kernels: A's sum(X * X), and its output
        s = em.sum(X * X)
        return em.cos(X) - s

    X = np.linspace(-2, 2, 1000).astype(np.float32)
    Y = np.linspace(3, -1, 1000).astype(np.float32)
    prog = em.compile(A if which == "A" else B)
    out = prog(X, Y) if which == "A" else prog(X)
    s = np.sum(X.astype(np.float64) ** 2)
    if which == "A":
        np.testing.assert_allclose(out[0].numpy(), X * c + s, rtol=1e-5)
        np.testing.assert_allclose(out[1].numpy(), np.sin(Y) / (np.abs(Y).max() + 1.0), rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(out.numpy(), np.cos(X) - s, rtol=1e-5)
    st = prog.stats
    print(json.dumps({k: st[k] for k in ("kernels", "distinct_kernels", "compiled_kernels", "translation_units",
                                          "cache_hit")}))
""")


def run_child(backend, cache, which, c=1.5, env=None):
    e = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=str(BUILD / "python"))
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", CHILD, backend, which, str(c)], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def warnings_in(stderr):
    return [line for line in stderr.splitlines() if line.startswith("ember: warning:")]


def disk_entries_of(backend, cache):
    """The entries `backend` keeps on disk here: one per kernel (OpenGL: only with a binary format),
    except cuda's one NVRTC module per program (its kernels are one translation unit)."""
    ext = {"cpu": "ref", "vulkan": "spv", "vulkan-hlsl": "spv", "opengl": "glbin", "cuda": "cubin"}[backend]
    return sorted(p for p in os.listdir(cache) if p.endswith("." + ext))


def test_editing_one_kernel_recompiles_only_that_kernel(backend, tmp_path):
    cache = tmp_path / "cache"
    first, err = run_child(backend, cache, "A", 1.5)
    assert (first["kernels"], first["distinct_kernels"], first["compiled_kernels"]) == (3, 3, 3), first
    assert not first["cache_hit"] and not warnings_in(err), err
    if not disk_entries_of(backend, cache):
        pytest.skip(f"{backend} keeps no compiled kernels on disk here (no program binary format)")
    edited, err = run_child(backend, cache, "A", 2.5)  # another constant in one kernel
    # cuda: the program's module is compiled again, every kernel in it
    want = 3 if backend == "cuda" else 1
    assert (edited["distinct_kernels"], edited["compiled_kernels"], edited["cache_hit"]) == (3, want, False), edited
    assert edited["translation_units"] == 1, edited
    again, err = run_child(backend, cache, "A", 1.5)
    assert (again["compiled_kernels"], again["translation_units"], again["cache_hit"]) == (0, 0, True), again
    assert not warnings_in(err), err


def test_another_program_reuses_a_shared_kernel(backend, tmp_path):
    cache = tmp_path / "cache"
    alone, _ = run_child(backend, tmp_path / "other", "B")
    assert (alone["distinct_kernels"], alone["compiled_kernels"]) == (2, 2), alone
    run_child(backend, cache, "A", 1.5)
    if not disk_entries_of(backend, cache):
        pytest.skip(f"{backend} keeps no compiled kernels on disk here (no program binary format)")
    b, err = run_child(backend, cache, "B")
    want = 2 if backend == "cuda" else 1  # A's sum(X * X) reused (cuda: B's own module)
    assert (b["distinct_kernels"], b["compiled_kernels"], b["cache_hit"]) == (2, want, False), b
    assert not warnings_in(err), err


def test_corrupt_kernel_entry_is_rebuilt_with_a_warning(backend, tmp_path):
    cache = tmp_path / "cache"
    run_child(backend, cache, "A", 1.5)
    entries = disk_entries_of(backend, cache)
    if not entries:
        pytest.skip(f"{backend} keeps no compiled kernels on disk here (no program binary format)")
    assert len(entries) == (1 if backend == "cuda" else 3), entries
    if backend == "cpu":
        # A kernel that shared its translation unit: compiled alone, it makes a new unit. (One that
        # had a unit to itself would find that unit's library on disk and be loaded, not compiled.)
        unit_of = {e: (cache / e).read_text().split()[2] for e in entries}  # "ember-kernel-ref 1 <unit> <symbol>"
        entries = [e for e in entries if list(unit_of.values()).count(unit_of[e]) > 1]
    victim = cache / entries[0]
    victim.write_bytes(victim.read_bytes()[:-4] + b"junk")  # its checksum no longer matches
    r, err = run_child(backend, cache, "A", 1.5)  # the child checks the results
    assert (r["compiled_kernels"], r["cache_hit"]) == (3 if backend == "cuda" else 1, False), r
    w = warnings_in(err)
    assert len(w) == 1 and entries[0] in w[0] and "rebuilding it" in w[0], err
    r, err = run_child(backend, cache, "A", 1.5)
    assert r["cache_hit"] and not warnings_in(err), (r, err)


def test_deleted_translation_unit_library_is_rebuilt_with_a_warning(tmp_path):
    """cpu: each kernel's `.ref` names the library of the unit it was compiled in; deleting that
    library makes its kernels misses (each reference warned about), never a crash."""
    cache = tmp_path / "cache"
    first, _ = run_child("cpu", cache, "A", 1.5, env={"EMBER_COMPILE_JOBS": "2"})
    assert first["translation_units"] == 2, first
    libs = sorted(p for p in os.listdir(cache) if p.endswith(".so"))
    assert len(libs) == 2, os.listdir(cache)
    refs = {p: (cache / p).read_text().splitlines()[1] for p in os.listdir(cache) if p.endswith(".ref")}
    assert len(refs) == 3 and set(refs.values()) == {lib[:-3] for lib in libs}, refs
    gone = libs[0]
    (cache / gone).unlink()
    users = sorted(p for p, unit in refs.items() if unit + ".so" == gone)
    r, err = run_child("cpu", cache, "A", 1.5)
    assert (r["compiled_kernels"], r["cache_hit"]) == (len(users), False), (r, users)
    w = warnings_in(err)
    assert len(w) == len(users) and all(gone in line and "rebuilding it" in line for line in w), err
    assert sorted(u for u in users if any(u in line for line in w)) == users, err
    r, err = run_child("cpu", cache, "A", 1.5)
    assert r["cache_hit"] and not warnings_in(err), (r, err)


# Parallel compiles ---------------------------------------------------------------------------

def test_compile_jobs_split_missing_kernels_into_units(backend, tmp_path):
    """EMBER_COMPILE_JOBS=2 with 3 missing kernels: two cpu translation units compiled at once
    (EMBER_DEBUG=time shows both started before either ended); GPU backends compile one shader
    per distinct kernel (cuda: one NVRTC unit per program). EMBER_COMPILE_JOBS=1: one unit."""
    r, err = run_child(backend, tmp_path / "two", "A", 1.5, env={"EMBER_COMPILE_JOBS": "2", "EMBER_DEBUG": "time"})
    assert r["compiled_kernels"] == 3, r
    if backend == "cpu":
        assert r["translation_units"] == 2, r
        units = re.findall(r"ember: cpu unit (\d)/2 cpu-[0-9a-f]{32} cpp->so \d+ KiB \(compiled\) "
                           r"\[\+([0-9.]+) -> \+([0-9.]+) ms\], (\d) kernels?", err)
        assert sorted(u[0] for u in units) == ["1", "2"], err
        assert sum(int(u[3]) for u in units) == 3, err
        starts, ends = [float(u[1]) for u in units], [float(u[2]) for u in units]
        assert max(starts) < min(ends), err  # the two compilers ran at the same time
        one, err = run_child(backend, tmp_path / "one", "A", 1.5, env={"EMBER_COMPILE_JOBS": "1",
                                                                          "EMBER_DEBUG": "time"})
        assert (one["compiled_kernels"], one["translation_units"]) == (3, 1), one
        assert re.search(r"ember: cpu unit 1/1 .*\(compiled\) \[.*\], 3 kernels", err), err
    elif backend == "cuda":  # one NVRTC translation unit for the program's kernels
        assert r["translation_units"] == 1, r
        assert re.search(r"ember: cuda module [0-9a-f]{16} nvrtc->(cubin|ptx) sm_\d+ .*\(compiled\)", err), err
    else:
        assert r["translation_units"] == 3, r
        lines = re.findall(r"ember: shader ember_[0-9a-f]{16} .*\(compiled\).* \[\+[0-9.]+ -> \+[0-9.]+ ms\], 1 kernel",
                           err)
        assert len(lines) == 3, err
