"""How bench/workloads/compile_scaling.py counts pass-time growth (issue 17): pass times in the
compiling thread's CPU time (prog.stats passes_cpu_ms, per pass cpu_ms), the minimum of several
compiles per size (round-robin, in a few processes started at different moments), growth per
doubling from those minima."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import ember as em

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "workloads"))
import compile_scaling as cs  # noqa: E402


def test_pass_cpu_time_in_stats(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_PROGRAM_CACHE", "0")  # the pipeline runs: passes are timed
    prog = em.compile(cs.stencil_program(em, 6).fn, name="stencil6_cpu_time", trace_cache=False)
    rng = np.random.default_rng(7)
    u, v = (rng.random((9, 11), dtype=np.float32) for _ in range(2))
    got_u, got_v = prog(u, v)
    want_u, want_v = cs._numpy_steps(u.astype(np.float64), v.astype(np.float64), 6)
    np.testing.assert_allclose(got_u.numpy(), want_u, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_v.numpy(), want_v, rtol=1e-4, atol=1e-5)
    st = prog.stats
    assert not st["program_cache_hit"] and st["passes"]
    assert st["passes_cpu_ms"] > 0
    per_pass = [p["cpu_ms"] for p in st["passes"]]
    assert all(t >= 0 for t in per_pass)
    # The passes run on the compiling thread inside the span passes_cpu_ms measures.
    assert sum(per_pass) <= st["passes_cpu_ms"] + 0.5
    # CPU time cannot exceed wall time on one thread (clock granularity aside).
    assert st["passes_cpu_ms"] <= st["passes_ms"] + 1.0


def run_passes_child(tmp_path, mode, sizes, reps):
    """The workload's pass-time child ("passes": the stencil, "gradient": its gradient program) in
    a new process: {steps: {"cpu": [...], "wall": [...], "visits": n}}."""
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), EMBER_PROGRAM_CACHE="0", EMBER_REPS=str(reps))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(cs.ember_python_dir()), env.get("PYTHONPATH")) if p)
    r = subprocess.run([sys.executable, cs.__file__, mode, ",".join(map(str, sizes)), "cpu"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return {int(k): v for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}


def test_workload_counts_min_of_repetitions_per_size(tmp_path):
    out = run_passes_child(tmp_path, "passes", (5, 10), 2)
    assert sorted(out) == [5, 10]
    for times in out.values():
        assert len(times["cpu"]) == 2 and len(times["wall"]) == 2
        assert all(t > 0 for t in times["cpu"] + times["wall"])
    # Growth from the minima: synthetic times whose minima double exactly give 2.00x.
    m = {"passes": {50: {"cpu": [9.0, 4.0, 5.0], "wall": [1, 2, 3]}, 100: {"cpu": [8.0, 8.5, 30.0], "wall": [2, 4, 6]},
                    200: {"cpu": [20.0, 16.0, 17.0], "wall": [4, 8, 9]}}}
    assert cs.pass_growth(m, (50, 100, 200)) == [(50, 100, 2.0), (100, 200, 2.0)]
    assert cs.pass_growth({}, (50, 100)) == []


def test_child_counts_node_visits_that_grow_linearly(tmp_path):
    """The table's "node visits" row: every pass's visits summed, from a cold compile in a new
    process; doubling the steps doubles them (the work the passes do, free of cache effects)."""
    visits = {}
    for steps in (20, 40):
        r = cs._run_child(steps, "cpu", str(tmp_path / f"cache{steps}"))
        assert not r["program_cache_hit"]
        visits[steps] = r["node_visits"]
    assert visits[20] > 1000
    assert 1.9 <= visits[40] / visits[20] <= 2.1, visits


def test_table_gives_time_per_node_visit():
    """format_table's rows from synthetic measurements: the pass-time minimum per node visit is flat
    when time and visits double together, and the growth line reads the minima."""
    sizes = (50, 100)
    cold = {50: {"node_visits": 1000, "first_ms": 500.0, "slowest_passes": []},
            100: {"node_visits": 2000, "first_ms": 600.0, "slowest_passes": [("fuse_loads", 1.0)]}}
    warm = {"first_ms": 20.0, "trace_ms": 0.0, "program_cache_hit": True, "trace_cache_hit": True}
    m = {s: (cold[s], warm) for s in sizes}
    m["passes"] = {50: {"cpu": [3.0, 2.0], "wall": [3.0, 2.0]}, 100: {"cpu": [4.0, 5.0], "wall": [4.0, 5.0]}}
    m["gradient_passes"] = {50: {"cpu": [9.0, 6.0], "wall": [9.0, 6.0], "visits": 3000},
                            100: {"cpu": [15.0, 18.0], "wall": [15.0, 18.0], "visits": 6000}}
    m["nbody"] = {"first_ms": 200.0, "passes_ms": 1.0, "codegen_ms": 1.0, "compile_ms": 190.0}
    table = cs.format_table(m, sizes)
    assert "| gradient program: passes CPU ms, min of 2 round-robin | 6.0 | 15.0 | 2.50x |" in table
    assert "| gradient program: node visits, all passes | 3000 | 6000 | 2.00x |" in table
    assert "| gradient program: ns per node visit | 2000 | 2500 | |" in table
    assert "- the same for the gradient program: 50->100 steps 2.50x" in table
    assert "| passes CPU ns per node visit (min above / visits) | 2000 | 2000 | |" in table
    assert "| node visits, all passes | 1000 | 2000 | 2.00x |" in table
    assert "50->100 steps 2.00x (goal <= 2.2x)" in table


def test_gradient_program_matches_finite_differences(tmp_path, monkeypatch):
    """The bench's gradient program is the gradient: against float64 central differences of
    sum(u * v) after the steps, at a few elements."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    steps = 3
    prog = cs.stencil_gradient_program(em, steps)
    rng = np.random.default_rng(11)
    u, v = (rng.random((6, 7), dtype=np.float32) for _ in range(2))
    got = prog(u, v).numpy()

    def loss(u64):
        a, b = cs._numpy_steps(u64, v.astype(np.float64), steps)
        return float(np.sum(a * b))
    h = 1e-5
    for (r, c) in ((0, 0), (2, 3), (5, 6)):
        up, dn = u.astype(np.float64), u.astype(np.float64)
        up[r, c] += h
        dn[r, c] -= h
        want = (loss(up) - loss(dn)) / (2 * h)
        assert abs(got[r, c] - want) <= 1e-3 * max(1.0, abs(want)), (r, c, got[r, c], want)


def test_gradient_child_counts_visits_per_size(tmp_path):
    out = run_passes_child(tmp_path, "gradient", (10, 20), 1)
    assert len(out[10]["cpu"]) == 1 and out[10]["cpu"][0] > 0
    assert 1.9 <= out[20]["visits"] / out[10]["visits"] <= 2.1, out
