"""Ember benchmark harness: times workloads x implementations, checks them against NumPy.

Usage: /usr/bin/python3 bench/run.py [--workload nbody] [--n 4096] [--repeat 5]
       [--impl ember,numpy,cpp,torch] [--backend cpu] [--json out.json]
Warm-up calls (where compilation happens) are excluded; the table reports the median of
--repeat timed calls. Missing implementations are skipped with the reason; a peer that is
installed but fails to import is "broken", said on stderr when found and again at the end.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from common import BENCH_DIR, BROKEN, REPO_ROOT, PeerBroken, Skip
import workloads

RTOL = 1e-3
ATOL = 1e-3  # relative to the largest magnitude of each reference output


def machine_info():
    """Facts that make a result comparable later: CPU, cores, versions, date, commit."""
    model, flags = "unknown", []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    # The vector extensions that decide the kernels' speed (-march=native), and what
    # EMBER_CPU_FLAGS takes away from Ember's kernels and the C++ references.
    isa = [f for f in ("avx2", "fma", "avx512f") if f in flags]
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": model,
        "isa": isa,
        "ember_cpu_flags": os.environ.get("EMBER_CPU_FLAGS"),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "commit": commit or None,
    }


def check(outs, ref):
    """Compares outputs with the reference; returns (ok, worst error relative to max |ref|)."""
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    if len(outs) != len(ref):
        return False, float("inf")
    ok, worst = True, 0.0
    for out, r in zip(outs, ref):
        out = np.asarray(out)
        if out.shape != r.shape:
            return False, float("inf")
        scale = float(np.max(np.abs(r))) or 1.0
        err = np.abs(out.astype(np.float64) - r.astype(np.float64))
        if not np.all(np.isfinite(err)):
            return False, float("inf")
        ok &= bool(np.all(err <= ATOL * scale + RTOL * np.abs(r)))
        worst = max(worst, float(err.max()) / scale)
    return ok, worst


def bench_one(setup, inputs, ref, opts, warmup, repeat):
    """Sets up one implementation, warms it up, times it; returns a result dict.

    setup_ms + first_call_ms is the cost before steady state (tracing, compiling, JIT)."""
    try:
        t0 = time.perf_counter()
        run = setup(inputs, opts)
        setup_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        first = run()
        first_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(warmup - 1):
            run()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            last = run()
            times.append((time.perf_counter() - t0) * 1e3)
    except PeerBroken as e:  # installed but fails to import: said loudly, never a quiet skip
        return {"status": "broken", "reason": str(e)}
    except Skip as e:
        return {"status": "skipped", "reason": str(e)}
    except Exception as e:
        tb = traceback.format_exc(limit=-3)
        return {"status": "error", "reason": f"{type(e).__name__}: {e}", "traceback": tb}
    ok_first, err_first = check(first, ref)
    ok_last, err_last = check(last, ref)
    ok = ok_first and ok_last
    return {"status": "ok" if ok else "mismatch", "median_ms": statistics.median(times),
            "min_ms": min(times), "times_ms": times, "setup_ms": setup_ms,
            "first_call_ms": first_ms, "max_rel_err": max(err_first, err_last),
            "reason": None if ok else f"differs from NumPy (rtol {RTOL}, atol {ATOL} x max|ref|)"}


def add_ratios(results):
    """Adds speed vs NumPy (numpy_ms / ms) and time / ember time (ms / ember_ms) to each result."""
    def ms(name):
        r = results.get(name, {})
        return r.get("median_ms") if r.get("status") in ("ok", "mismatch") else None
    numpy_ms, ember_ms = ms("numpy"), ms("ember")
    for r in results.values():
        t = r.get("median_ms")
        r["speed_vs_numpy"] = numpy_ms / t if t and numpy_ms else None
        r["time_vs_ember"] = t / ember_ms if t and ember_ms else None


def table(name, n, results):
    """Markdown table of one workload's results, then the reasons for skips and failures."""
    def fmt(v, f):
        return "n/a" if v is None else f.format(v)
    lines = [f"### {name}, N={n}", "",
             "| implementation | median ms | min ms | speed vs NumPy | time / ember time "
             "| setup + first call ms | check |",
             "|---|---:|---:|---:|---:|---:|---|"]
    notes = []
    for impl, r in results.items():
        status = r["status"]
        mark = {"ok": "ok", "mismatch": "**MISMATCH**", "broken": "**BROKEN**"}.get(status, status)
        warm = r["setup_ms"] + r["first_call_ms"] if "setup_ms" in r else None
        if "max_rel_err" in r:
            mark += f" ({r['max_rel_err']:.1e})"
        lines.append(f"| {impl} | {fmt(r.get('median_ms'), '{:.2f}')} "
                     f"| {fmt(r.get('min_ms'), '{:.2f}')} "
                     f"| {fmt(r.get('speed_vs_numpy'), '{:.3g}x')} "
                     f"| {fmt(r.get('time_vs_ember'), '{:.3g}')} "
                     f"| {fmt(warm, '{:.1f}')} | {mark} |")
        if r.get("reason"):
            notes.append(f"- {impl}: {status}: {r['reason']}")
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main():
    """Parses arguments, runs the selected workloads and implementations, prints and saves."""
    all_workloads = workloads.load_all()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default=",".join(all_workloads),
                   help=f"comma list of {', '.join(all_workloads)}")
    p.add_argument("--n", type=int, help="problem size (default: the workload's DEFAULT_N)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs; the median is reported")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls first (>= 1)")
    p.add_argument("--impl", help="comma list of implementations (default: all registered)")
    p.add_argument("--backend", default="cpu", help="ember backend for em.init")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=str(BENCH_DIR / "results" / "latest.json"),
                   help="where to write results ('-' for nowhere)")
    a = p.parse_args()
    if a.repeat < 1 or a.warmup < 1:
        p.error("--repeat and --warmup must be >= 1")
    names = a.workload.split(",")
    for w in names:
        if w not in all_workloads:
            p.error(f"unknown workload {w!r}; known: {', '.join(all_workloads)}")
    wanted = a.impl.split(",") if a.impl else None
    known = {i for w in names for i in all_workloads[w].IMPLS}
    for i in wanted or []:
        if i not in known:
            p.error(f"unknown implementation {i!r}; known: {', '.join(sorted(known))}")

    info = machine_info()
    isa = " ".join(info["isa"]) or "none of avx2 fma avx512f"
    extra = f", EMBER_CPU_FLAGS={info['ember_cpu_flags']}" if info["ember_cpu_flags"] else ""
    print(f"# {info['cpu_model']}, {info['cores']} cores ({isa}{extra}), {info['date']}\n")
    out = {"machine": info, "args": vars(a), "workloads": {}}
    opts = {"backend": a.backend}
    for w in names:
        mod = all_workloads[w]
        n = a.n or mod.DEFAULT_N
        inputs = mod.make_inputs(n, a.seed)
        ref = mod.reference(inputs)
        results = {}
        for impl, setup in mod.IMPLS.items():
            if wanted and impl not in wanted:
                continue
            print(f"[{w}] {impl} ...", end=" ", flush=True)
            r = results[impl] = bench_one(setup, inputs, ref, opts, a.warmup, a.repeat)
            done = f"{r['median_ms']:.2f} ms" if "median_ms" in r else r["status"]
            print(done if not r.get("reason") else f"{done}: {r['reason']}")
        add_ratios(results)
        print("\n" + table(w, n, results))
        out["workloads"][w] = {"n": n, "results": results}
        if hasattr(mod, "summary"):  # a workload's own line (e.g. nbody_grad: gradient / force time)
            out["workloads"][w]["summary"] = mod.summary(results, opts)
            print(out["workloads"][w]["summary"] + "\n")
    if BROKEN:  # again at the end, where a reader of the tables looks
        out["broken_peers"] = sorted(BROKEN)
        print("\n".join(BROKEN.values()) + "\n", file=sys.stderr, flush=True)
    if a.json != "-":
        path = Path(a.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
