"""The program cache (backends/compiled_program.cpp): a new process compiling a program that an
earlier process lowered loads the lowered program from $EMBER_CACHE_DIR instead of running the
pass pipeline, with the same results bit for bit; a bad entry is rebuilt with a warning; another
program, backend build or option misses. Each case runs in subprocesses with a fresh cache."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember as em

BUILD_PYTHON = str(Path(em.__file__).resolve().parents[1])

# The 200-step stencil of issue 17 (item 4); STEPS and C from the command line.
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ember as em
    backend, steps, c, out, want_ir = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
    em.init(backend=backend)

    @em.compile
    def big(u: em.f32["H", "W"], v: em.f32["H", "W"]):
        i, j = em.indices(u.shape)
        for k in range(steps):
            lap = u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1] - 4.0 * u[i, j]
            u, v = u + c * lap * em.tanh(v), v + em.sin(u) * 0.01
            if k % 20 == 0:
                u = u / em.sqrt(em.sum(u * u) + 1.0)
        return u, v

    rng = np.random.default_rng(5)
    u = rng.standard_normal((13, 9)).astype(np.float32)
    v = rng.standard_normal((13, 9)).astype(np.float32)
    a, b = big(u, v)
    np.save(out, np.stack([a.numpy(), b.numpy()]))
    st = big.stats
    info = {k: st[k] for k in ("program_cache_hit", "program_cache_key", "passes_ms", "kernels", "cache_hit", "cache_key",
                               "linked", "codegen_ms", "compiled_kernels")}
    info["passes"] = [p["name"] for p in st["passes"]]
    if want_ir:
        info["fuse_kernels"] = big.ir("fuse_kernels")
        info["final"] = big.ir()
    print(json.dumps(info))
""")


def run_child(backend, cache, tmp_path, steps, c=0.1, want_ir=False, env=None, tag="r"):
    out = tmp_path / f"{tag}.npy"
    e = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=BUILD_PYTHON)
    for k in ("EMBER_VERIFY", "EMBER_PROGRAM_CACHE", "EMBER_DEBUG"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", CHILD, backend, str(steps), str(c), str(out), "1" if want_ir else "0"],
                       env=e, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout.strip().splitlines()[-1])
    return info, np.load(out), p.stderr


@pytest.fixture(scope="module")
def kernels_only(tmp_path_factory):
    """make(backend, steps, c, dest): a cache directory at `dest` that holds the program's compiled
    kernels but no saved program, so the program cache starts cold while the kernels (whose C++
    compile would take most of the time) do not. The kernels are compiled once per module; on cpu
    through the suite's shared cache ($EMBER_CACHE_DIR), so later runs find them there."""
    seeds = {}

    def make(backend, steps, c, dest):
        if (backend, steps, c) not in seeds:
            seed = tmp_path_factory.mktemp("seed")
            # Kernels compile once per distinct body (4 for the 200-step program), so a fresh
            # directory costs about a second.
            run_child(backend, seed, seed, steps, c, tag="seed")
            for f in list(seed.glob("prog-*")) + list(seed.glob("link-*")) + list(seed.glob("*.npy")):
                f.unlink()
            seeds[(backend, steps, c)] = seed
        shutil.copytree(seeds[(backend, steps, c)], dest, dirs_exist_ok=True)
        return dest

    return make


def warnings_in(stderr):
    return [line for line in stderr.splitlines() if line.startswith("ember: warning:")]


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


# Fewer steps where the 200-step program is not needed (the GPU backends compile each kernel slowly).
SMALL = 21


def test_second_process_loads_the_lowered_program(backend, tmp_path, kernels_only):
    steps = 200 if backend == "cpu" else SMALL
    cache = kernels_only(backend, steps, 0.1, tmp_path / "cache")
    first, r1, err1 = run_child(backend, cache, tmp_path, steps, want_ir=True, tag="first")
    assert first["program_cache_hit"] is False and "fuse_kernels" in first["passes"]
    key = first["program_cache_key"]
    assert key.startswith("prog-") and (cache / (key + ".prog")).exists() and (cache / (key + ".sum")).exists()
    second, r2, err2 = run_child(backend, cache, tmp_path, steps, want_ir=True, tag="second")
    assert second["program_cache_hit"] is True, err2
    assert second["program_cache_key"] == key
    assert second["passes"] == []  # the pipeline did not run
    assert second["kernels"] == first["kernels"]
    assert same_bits(r1, r2)
    # Intermediate stages still print (the pipeline runs on a copy of the traced program when
    # asked), and the loaded program prints as the lowered one did.
    assert second["fuse_kernels"] == first["fuse_kernels"] and "kernel" in second["fuse_kernels"]
    assert second["final"] == first["final"]
    assert not warnings_in(err1 + err2), err1 + err2


def test_warm_process_binds_kernels_through_the_link_record(tmp_path, kernels_only):
    """cpu: the link record saved with the program (each distinct kernel's cache key and symbol,
    and which one each kernel node runs) lets a new process bind the kernels without generating
    code; a record whose kernels are gone from the cache, or a garbled one, falls back to code
    generation with the same results."""
    cache = kernels_only("cpu", SMALL, 0.1, tmp_path / "cache")
    first, want, _ = run_child("cpu", cache, tmp_path, SMALL, tag="first")
    assert first["linked"] is False and first["codegen_ms"] > 0
    links = list(cache.glob("link-*.link"))
    assert len(links) == 1 and links[0].read_text().startswith("ember-cpu-link 1\n")
    warm, got, err = run_child("cpu", cache, tmp_path, SMALL, tag="warm")
    assert warm["program_cache_hit"] and warm["linked"] is True and warm["codegen_ms"] == 0, err
    assert warm["kernels"] == first["kernels"] and warm["cache_key"] == first["cache_key"]
    assert same_bits(got, want) and not warnings_in(err), err
    # The kernels' references removed: the record names kernels no cache has, so code is generated
    # (and the libraries found again) and a good record saved for the next process.
    for ref in cache.glob("cpuk-*.ref"):
        ref.unlink()
    gone, got2, err2 = run_child("cpu", cache, tmp_path, SMALL, tag="gone")
    assert gone["program_cache_hit"] and gone["linked"] is False and gone["codegen_ms"] > 0
    assert same_bits(got2, want) and not warnings_in(err2), err2
    again, got3, _ = run_child("cpu", cache, tmp_path, SMALL, tag="again")
    assert again["linked"] is True and same_bits(got3, want)
    # A garbled record with a matching checksum: not used, no crash, same results.
    link = links[0]
    text = link.read_text().splitlines()
    link.write_text("\n".join(text[:3] + ["nonsense"] + text[4:]) + "\n")
    s = cache / (link.stem + ".sum")
    s.write_text(s.read_text().splitlines()[0] + "\n" + link.stem + "\n" +
                 em._ember._content_hash(link.read_bytes()) + f" {len(link.read_bytes())}\n")
    bad, got4, err4 = run_child("cpu", cache, tmp_path, SMALL, tag="bad")
    assert bad["program_cache_hit"] and bad["linked"] is False and same_bits(got4, want), err4


@pytest.mark.parametrize("mode", ["flipped", "consistent-garbage"])
def test_bad_entry_is_rebuilt_with_a_warning(backend, mode, tmp_path, kernels_only):
    cache = kernels_only(backend, SMALL, 0.1, tmp_path / "cache")
    first, want, _ = run_child(backend, cache, tmp_path, SMALL, tag="first")
    key = first["program_cache_key"]
    prog, s = cache / (key + ".prog"), cache / (key + ".sum")
    data = bytearray(prog.read_bytes())
    data[len(data) // 2] ^= 0x04
    prog.write_bytes(bytes(data))
    if mode == "consistent-garbage":
        # The checksum file made to match: the loader itself must refuse the bytes (its own
        # checksum, then its structural checks and the verifier).
        s.write_text(s.read_text().splitlines()[0] + "\n" + key + "\n" + em._ember._content_hash(bytes(data)) +
                     f" {len(data)}\n")
    info, got, err = run_child(backend, cache, tmp_path, SMALL, tag="again")
    assert info["program_cache_hit"] is False and info["passes"], info
    assert same_bits(got, want)
    w = warnings_in(err)
    assert len(w) == 1 and key in w[0] and "rebuilding" in w[0], err
    if mode == "consistent-garbage":
        assert "cannot load the saved program" in w[0], w
    third, got3, err3 = run_child(backend, cache, tmp_path, SMALL, tag="third")  # the rebuilt entry is good
    assert third["program_cache_hit"] is True and same_bits(got3, want) and not warnings_in(err3), err3


def test_another_program_misses(backend, tmp_path, kernels_only):
    cache = kernels_only(backend, SMALL, 0.1, tmp_path / "cache")
    kernels_only(backend, SMALL, 0.125, cache)
    a, ra, _ = run_child(backend, cache, tmp_path, SMALL, c=0.1, tag="a")
    b, rb, _ = run_child(backend, cache, tmp_path, SMALL, c=0.125, tag="b")  # another constant
    assert b["program_cache_hit"] is False and b["program_cache_key"] != a["program_cache_key"]
    assert not same_bits(ra, rb)
    a2, ra2, _ = run_child(backend, cache, tmp_path, SMALL, c=0.1, tag="a2")
    assert a2["program_cache_hit"] is True and same_bits(ra, ra2)


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    """An in-process test's own cache directory, with the switches that turn the program cache off unset."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    for k in ("EMBER_VERIFY", "EMBER_PROGRAM_CACHE", "EMBER_DEBUG"):
        monkeypatch.delenv(k, raising=False)


@pytest.mark.parametrize("env", [{"EMBER_PROGRAM_CACHE": "0"}, {"EMBER_VERIFY": "1"}, {"EMBER_DEBUG": "time"}])
def test_switches_that_bypass_the_program_cache(env, tmp_path, monkeypatch, cache_on):

    def compiled():
        @em.compile
        def f(x: em.f32["N"]):
            return em.sin(x) * 2.0 + 1.0
        np.testing.assert_allclose(f(np.ones(5, np.float32)).numpy(), np.sin(1.0) * 2 + 1, rtol=1e-6)
        return f.stats

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for _ in range(2):
        st = compiled()
        assert st["program_cache_hit"] is False and st["program_cache_key"] == "" and st["passes"]
    assert not list((tmp_path / "cache").glob("*.prog"))
    for k in env:
        monkeypatch.delenv(k)
    assert compiled()["program_cache_hit"] is False
    assert compiled()["program_cache_hit"] is True  # the same process loads it too


def test_a_failing_program_is_never_cached(tmp_path, monkeypatch, cache_on):
    """A program whose compile fails (here the C++ compiler) saves nothing: the next process
    lowers it again. (A pass's own errors, raised before anything is saved: tests/cpp.)"""

    def f(x: em.f32["N"]):
        return em.cos(x) * 1.2345 + 0.5

    monkeypatch.setenv("EMBER_CXX", "/bin/false")
    for _ in range(2):
        with pytest.raises(em.Error):
            em.compile(f)(np.ones(3, np.float32))
    assert not list((tmp_path / "cache").glob("*.prog"))
    monkeypatch.delenv("EMBER_CXX")
    prog = em.compile(f)
    np.testing.assert_allclose(prog(np.ones(3, np.float32)).numpy(), np.cos(1.0) * 1.2345 + 0.5, rtol=1e-6)
    assert prog.stats["program_cache_hit"] is False
    assert len(list((tmp_path / "cache").glob("*.prog"))) == 1


def test_source_lines_are_part_of_the_key(tmp_path, cache_on):
    """Equal text, other source lines: a runtime error must name the caller's line, so the
    program of the other lines is not reused."""
    src = "def f(x: em.f32['N']):\n    return em.exp(x)\n"
    keys = []
    for pad in ("", "\n\n"):
        ns = {"em": em}
        exec(compile(pad + src, str(tmp_path / "mod.py"), "exec"), ns)
        prog = em.compile(ns["f"])
        prog(np.ones(3, np.float32))
        keys.append(prog.stats["program_cache_key"])
    assert keys[0] != keys[1]
