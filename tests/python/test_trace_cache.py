"""The trace cache (python/ember/_trace_cache.py): a new process calling a program that an earlier
process compiled skips tracing (trace_cache_hit, trace_ms == 0) and gives the same results bit for
bit; any edit to what the trace depends on (the function's code or line numbers, a closure or
global constant, a helper in a user module, an EMBER_* variable) misses; a function that reaches
a mutable value is never cached; bad or orphaned entries are traced again. Each case runs in
subprocesses with a fresh cache directory holding a user module written by the test."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember import _trace_cache

BUILD_PYTHON = str(Path(em.__file__).resolve().parents[1])

HELPERS = textwrap.dedent("""
    import ember as em

    def smooth(u, i, j):
        return (u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1]) * 0.25
""")

# The user's program, in a module of its own; {extra} adds lines above it, {glob} is a global.
USERPROG = textwrap.dedent("""
    import ember as em
    import helpers
    {extra}
    RATE = {rate}
    TABLE = {table}

    def make(steps, c, cache=True):
        @em.compile(trace_cache=cache)
        def sim(u: em.f32["H", "W"], v: em.f32["H", "W"]):
            i, j = em.indices(u.shape)
            for k in range(steps):
                u, v = u + c * (helpers.smooth(u, i, j) - u) * em.tanh(v), v + em.sin(u) * RATE
            return u, v + {use_table}
        return sim
""")

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ember as em
    backend, out, want_ir, cache = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
    sys.path.insert(0, sys.argv[5])
    import userprog
    em.init(backend=backend)
    sim = userprog.make(3, 0.2, cache)
    rng = np.random.default_rng(5)
    u = rng.standard_normal((13, 9)).astype(np.float32)
    v = rng.standard_normal((13, 9)).astype(np.float32)
    a, b = sim(u, v)
    np.save(out, np.stack([a.numpy(), b.numpy()]))
    st = sim.stats
    info = {k: st[k] for k in ("trace_cache_hit", "trace_ms", "program_cache_hit", "kernels", "traced_digest")}
    info["kernel_count"] = sim.kernel_count
    if want_ir:
        info["fuse_kernels"] = sim.ir("fuse_kernels")
        info["traced"] = sim.ir("traced")
        info["final"] = sim.ir()
    print(json.dumps(info))
""")


def write_user(d, rate="0.01", table="(1.0, 2.0)", use_table="TABLE[0]", extra="", helpers=HELPERS):
    d.mkdir(exist_ok=True)
    (d / "helpers.py").write_text(helpers)
    (d / "userprog.py").write_text(USERPROG.format(rate=rate, table=table, use_table=use_table, extra=extra))
    for pyc in d.glob("__pycache__/*"):
        pyc.unlink()


def run_child(backend, cache, user, tag, want_ir=False, env=None, trace_cache=True):
    out = user / f"{tag}.npy"
    e = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=BUILD_PYTHON, PYTHONDONTWRITEBYTECODE="1")
    for k in ("EMBER_VERIFY", "EMBER_PROGRAM_CACHE", "EMBER_DEBUG", "EMBER_TRACE_CACHE"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", CHILD, backend, str(out), "1" if want_ir else "0",
                        "1" if trace_cache else "0", str(user)], env=e, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), np.load(out), p.stderr


def entries(cache, ext):
    return sorted(cache.glob(f"*.{ext}"))


def test_warm_process_skips_tracing(backend, tmp_path):
    """Cold, then warm: the warm process traces nothing, loads the lowered program, gives the same
    bits, and its IR stages (traced again on request) equal the cold process's."""
    user, cache = tmp_path / "user", tmp_path / "cache"
    write_user(user)
    cold, r_cold, _ = run_child(backend, cache, user, "cold", want_ir=True)
    assert not cold["trace_cache_hit"] and cold["trace_ms"] > 0 and not cold["program_cache_hit"]
    assert len(entries(cache, "trace")) == 1
    warm, r_warm, err = run_child(backend, cache, user, "warm", want_ir=True)
    assert warm["trace_cache_hit"] and warm["trace_ms"] == 0 and warm["program_cache_hit"], err
    np.testing.assert_array_equal(r_warm, r_cold)
    for k in ("kernels", "kernel_count", "traced_digest", "final", "fuse_kernels", "traced"):
        assert warm[k] == cold[k], k


EDITS = {
    "global constant": dict(rate="0.02"),
    "global tuple element": dict(table="(3.0, 2.0)"),
    "code": dict(use_table="TABLE[1]"),
    "line numbers": dict(extra="\n\n"),
    "helper module": dict(helpers=HELPERS.replace("0.25", "0.2")),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_edits_miss(edit, tmp_path):
    """Each edit of what the trace depends on misses, and the new process computes the edited program."""
    user, cache = tmp_path / "user", tmp_path / "cache"
    write_user(user)
    run_child("cpu", cache, user, "first")
    write_user(user, **EDITS[edit])
    edited, r_edited, _ = run_child("cpu", cache, user, "edited")
    assert not edited["trace_cache_hit"]
    fresh, r_fresh, _ = run_child("cpu", tmp_path / "fresh-cache", user, "fresh")
    np.testing.assert_array_equal(r_edited, r_fresh)
    assert len(entries(cache, "trace")) == 2


def test_environment_and_switches_miss(tmp_path):
    """EMBER_* variables are part of the key; EMBER_TRACE_CACHE=0 and em.compile(trace_cache=False)
    turn the cache off."""
    user, cache = tmp_path / "user", tmp_path / "cache"
    write_user(user)
    run_child("cpu", cache, user, "first")
    assert run_child("cpu", cache, user, "warm")[0]["trace_cache_hit"]
    assert not run_child("cpu", cache, user, "env", env={"EMBER_TAPE_BUDGET_MB": "32"})[0]["trace_cache_hit"]
    assert not run_child("cpu", cache, user, "off", env={"EMBER_TRACE_CACHE": "0"})[0]["trace_cache_hit"]
    assert not run_child("cpu", cache, user, "nocache", trace_cache=False)[0]["trace_cache_hit"]
    assert not run_child("cpu", cache, user, "noprog", env={"EMBER_PROGRAM_CACHE": "0"})[0]["trace_cache_hit"]


def test_mutable_global_is_never_cached(tmp_path):
    """A function that reaches a list is traced in every process (its content could change)."""
    user, cache = tmp_path / "user", tmp_path / "cache"
    write_user(user, table="[1.0, 2.0]")
    first, r1, _ = run_child("cpu", cache, user, "first")
    second, r2, _ = run_child("cpu", cache, user, "second")
    assert not first["trace_cache_hit"] and not second["trace_cache_hit"]
    assert second["program_cache_hit"]  # the program cache still serves it, after tracing
    assert entries(cache, "trace") == []
    np.testing.assert_array_equal(r1, r2)


def test_bad_and_orphaned_entries_trace_again(tmp_path):
    """A corrupt trace entry is removed with a warning and rebuilt; a trace entry whose lowered
    program is gone traces again; both give the right results."""
    user, cache = tmp_path / "user", tmp_path / "cache"
    write_user(user)
    _, want, _ = run_child("cpu", cache, user, "first")
    (entry,) = entries(cache, "trace")
    entry.write_bytes(entry.read_bytes()[:-3] + b"xyz")
    info, got, err = run_child("cpu", cache, user, "corrupt")
    assert not info["trace_cache_hit"] and "warning" in err
    np.testing.assert_array_equal(got, want)
    assert run_child("cpu", cache, user, "rebuilt")[0]["trace_cache_hit"]
    for p in entries(cache, "prog"):
        p.unlink()
    info, got, _ = run_child("cpu", cache, user, "orphan")
    assert not info["trace_cache_hit"] and not info["program_cache_hit"]
    np.testing.assert_array_equal(got, want)
    assert run_child("cpu", cache, user, "again")[0]["trace_cache_hit"]


def test_fingerprint_in_process():
    """key() follows closure values and reached globals; it is None for what it cannot fingerprint."""
    def make(c, extra):
        def f(u: em.f32["N"]):
            return u * c + len(extra)
        return f
    params = [("u", em.f32["N"])]
    k1 = _trace_cache.key(make(2.0, (1,)), "f", params)
    assert k1 and k1 == _trace_cache.key(make(2.0, (1,)), "f", params)
    assert _trace_cache.key(make(3.0, (1,)), "f", params) != k1
    assert _trace_cache.key(make(2.0, (1, 2)), "f", params) != k1
    assert _trace_cache.key(make(2.0, (1,)), "g", params) != k1
    assert _trace_cache.key(make(2.0, (1,)), "f", [("u", em.f32["M"])]) != k1
    # A script's or notebook's functions (module __main__, maybe without a file) count by content.
    def script(c):
        ns = {"__name__": "__main__", "C": c}
        exec("def f(u):\n    return u * C\n", ns)
        return ns["f"]
    assert _trace_cache.key(script(1.0), "f", params) != _trace_cache.key(script(2.0), "f", params)
    # User classes count by content: editing a method misses.
    def with_class(body):
        ns = {"__name__": "usermod"}
        exec("class Model:\n    SCALE = 2.0\n    def forward(self, u):\n        return " + body + "\n", ns)
        return ns["Model"]
    k_a = _trace_cache.key(make(2.0, with_class("u * self.SCALE")), "f", params)
    assert k_a and k_a == _trace_cache.key(make(2.0, with_class("u * self.SCALE")), "f", params)
    assert k_a != _trace_cache.key(make(2.0, with_class("u + self.SCALE")), "f", params)
    assert _trace_cache.key(make(2.0, (1,)), "f", params, extra=(with_class("u"),)) != k1
    assert _trace_cache.key(make(2.0, with_class("u")()), "f", params) is None  # an instance: mutable
    assert _trace_cache.key(make(2.0, [1]), "f", params) is None
    assert _trace_cache.key(make(2.0, np.ones(1)), "f", params) is None
    assert _trace_cache.key(make(2.0, object()), "f", params) is None
