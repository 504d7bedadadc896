"""Pipeline time (the passes only, no tracing, code generation or C++ compile) of every example in
examples/, one or two builds side by side: issue 14's cost bar (the dependence analysis may grow
each example's pipeline by at most 30%).

Each example runs as a script with small arguments in a new process (program and trace caches
off), with Program._compile wrapped: every program the example compiles is traced and put through
the pipeline REPS times in a row, and its time is the minimum of stats passes_cpu_ms (the
compiling thread's CPU time), or of passes_ms (wall time) for every build when one of them predates
issue 17's CPU clock: run it under /work/quiet.sh or on an idle machine then. An example's time is
the sum over the programs it compiles. With two builds the examples alternate between them, so
both see the same machine load.

  PYTHONPATH=build/python python3 bench/pipeline_times.py [--reps 5] [--build DIR ...] [--only fluid,sph]

--build defaults to ./build; name two or more (`--build /work/wt-base/build --build build`) to compare
(the last column: the last build's time over the first's).
Examples that need a window, MPI or a long run are left out (listed in SKIPPED).
"""
import argparse
import json
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

# Small arguments that still compile every program of the example (the tests' arguments mostly).
ARGS = {
    "bitonic_sort": ["--n", "4096"],
    "checkpointed_sim": ["--n", "64", "--steps", "40"],
    "conv2d": ["--n", "2", "--channels", "3", "--out", "4", "--size", "12"],
    "export_nbody": ["--out", "{tmp}/nbody-export"],
    "fluid": ["--size", "32", "--steps", "2", "--iters", "2"],
    "histogram": ["--n", "20000", "--bins", "8"],
    "inverse_sim": ["--size", "5", "--steps", "20", "--iters", "2"],
    "life": ["--size", "24", "--steps", "1"],
    "longformer": ["--n", "64", "--heads", "2", "--feats", "8", "--w", "3"],
    "mandelbrot": ["--width", "40", "--height", "12", "--iters", "32"],
    "nbody": ["--n", "128", "--steps", "2"],
    "nbody_loop": ["--n", "128", "--steps", "2"],
    "nca": ["--iters", "2", "--size", "12", "--batch", "2", "--steps", "4", "--hidden", "8"],
    "prefix_sum": ["--n", "5000"],
    "sdf_normals": ["--size", "24", "--steps", "16", "--out", "{tmp}/sdf.png"],
    "softmax": ["--rows", "64", "--cols", "100"],
    "sph": ["--n", "256", "--steps", "2"],
    "subdivnet": ["--n", "8", "--feats", "5", "--out", "7"],
    "train_digits": ["--steps", "2"],
    "train_image": ["--steps", "2", "--size", "16", "--batch", "64"],
}
SKIPPED = {
    "demo_fluid": "a window demo (its programs are fluid's)",
    "demo_mandelbrot": "a window demo",
    "demo_nbody": "a window demo",
    "demo_raymarch": "a window demo",
    "distributed_fluid": "runs under MPI",
    "distributed_train": "runs under MPI",
}


def child(build, reps, name, argv):
    """Runs one example with Program._compile wrapped; prints one JSON line of its programs' times."""
    sys.path.insert(0, str(Path(build) / "python"))
    sys.path.insert(0, str(EXAMPLES))
    import ember._program as P

    records = []
    original = P.Program._compile

    def timed(st):
        per_pass = {}
        for r in st["passes"]:  # wall ms per pass name (repeated passes summed)
            per_pass[r["name"]] = per_pass.get(r["name"], 0.0) + r["ms"]
        return st.get("passes_cpu_ms"), st["passes_ms"], per_pass

    def compile_reps(self):
        be = P.backend()
        if be in self._compiled:
            return self._compiled[be]
        cp = original(self)
        samples = [timed(cp.stats)]
        for _ in range(reps - 1):
            kept = (cp, self._traced_text, self._tracer)
            del self._compiled[be]
            self._traced_text, self._tracer = None, None  # trace again, then the whole pipeline
            try:
                cp = original(self)
            except Exception:  # a program that cannot be retraced alone: one sample
                cp, self._traced_text, self._tracer = kept
                self._compiled[be] = cp
                break
            samples.append(timed(cp.stats))
        cpu = [c for c, _, _ in samples if c is not None]
        passes = {k: min(p.get(k, 0.0) for _, _, p in samples) for k in samples[0][2]}
        records.append({"program": self.name, "cpu_ms": min(cpu) if len(cpu) == len(samples) else None,
                        "wall_ms": min(w for _, w, _ in samples), "samples": len(samples), "passes": passes,
                        "kernels": cp.stats["kernels"]})
        return cp

    P.Program._compile = compile_reps
    sys.argv = [str(EXAMPLES / f"{name}.py"), *argv]
    out = sys.stdout
    with open(os.devnull, "w") as sink:
        sys.stdout = sink  # the example's own output
        try:
            runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                raise
        finally:
            sys.stdout = out
    print("PIPELINE_TIMES " + json.dumps(records))


def measure(build, reps, name, tmp):
    """{"programs": [{"program", "cpu_ms" (None before issue 17), "wall_ms", "samples"}]}, or {"error": text}."""
    argv = [a.replace("{tmp}", tmp) for a in ARGS[name]]
    env = dict(os.environ, EMBER_BUILD_DIR=str(build), EMBER_PROGRAM_CACHE="0", EMBER_TRACE_CACHE="0",
               PYTHONPATH=str(Path(build) / "python"))
    env.pop("EMBER_DEBUG", None)
    proc = subprocess.run([sys.executable, __file__, "--child", name, "--build", str(build), "--reps", str(reps),
                           "--", *argv], capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("PIPELINE_TIMES "):
            progs = json.loads(line[len("PIPELINE_TIMES "):])
            return {"programs": progs}
    return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", action="append", help="a build directory (repeat it to compare builds)")
    p.add_argument("--reps", type=int, default=5, help="pipeline runs per program (the minimum is kept)")
    p.add_argument("--only", default="", help="comma-separated example names")
    p.add_argument("--json", default=None, help="also write the measurements here")
    p.add_argument("--passes", type=int, default=0,
                   help="per example, the N passes whose wall time grew most from the first build to the last")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    a = p.parse_args()
    builds = [Path(b).resolve() for b in (a.build or [REPO / "build"])]
    if a.child:
        child(builds[0], a.reps, a.child, a.rest)
        return
    names = [n for n in (a.only.split(",") if a.only else sorted(ARGS))]
    for n in sorted(set(p.stem for p in EXAMPLES.glob("*.py")) - set(ARGS) - set(SKIPPED)):
        if not n.startswith("_") and n != "demo_common":
            print(f"note: examples/{n}.py has no arguments here: not measured", file=sys.stderr)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:  # builds alternate per example: each sees the same load
            results[n] = []
            for b in builds:
                if not (b.parent / "examples" / f"{n}.py").exists():
                    results[n].append({"error": "not in this build's tree"})
                    continue
                results[n].append(measure(b, a.reps, n, tmp))
    # CPU time where every build has it, else wall time for all (compare like with like).
    runs = [r for rs in results.values() for r in rs if "programs" in r]
    clock = "cpu_ms" if all(q["cpu_ms"] is not None for r in runs for q in r["programs"]) else "wall_ms"
    for rs in results.values():
        for r in rs:
            if "programs" in r:
                r["ms"] = sum(q[clock] for q in r["programs"])
                for q in r["programs"]:
                    q["ms"] = q[clock]
    head = " | ".join(f"build {k + 1} ms" for k in range(len(builds))) + " | kernels"
    print(f"pipeline time per example (passes only, {'thread CPU' if clock == 'cpu_ms' else 'wall'} ms; "
          f"min of {a.reps} per program, summed over its programs)")
    for k, b in enumerate(builds):
        print(f"  build {k + 1}: {b}")
    print(f"| example | programs | {head} |" + (f" build {len(builds)} / build 1 |" if len(builds) >= 2 else ""))
    print("|---|---:|" + "---:|" * len(builds) + "---|" + ("---:|" if len(builds) >= 2 else ""))
    for n in names:
        cells = [f"{r['ms']:.2f}" if "ms" in r else f"({r['error'][:60]})" for r in results[n]]
        progs = max((len(r["programs"]) for r in results[n] if "programs" in r), default=0)
        ratio = ""
        if len(builds) >= 2:
            r0, r1 = results[n][0], results[n][-1]
            ratio = f" {r1['ms'] / r0['ms']:.2f} |" if "ms" in r0 and "ms" in r1 and r0["ms"] > 0 else " - |"
        kernels = " / ".join(str(sum(q["kernels"] for q in r["programs"])) if "programs" in r else "-"
                             for r in results[n])
        print(f"| {n} | {progs} | " + " | ".join(cells) + f" | {kernels} |" + ratio)
    if a.passes and len(builds) >= 2:  # the first build against the last
        print(f"\npasses that grew most (wall ms, min of {a.reps} per program, summed over programs and runs)")
        for n in names:
            ends = (results[n][0], results[n][-1])
            if not all("programs" in r for r in ends):
                continue
            tot = [{}, {}]
            for k in range(2):
                for q in ends[k]["programs"]:
                    for name, ms in q["passes"].items():
                        tot[k][name] = tot[k].get(name, 0.0) + ms
            grew = sorted(set(tot[0]) | set(tot[1]), key=lambda x: tot[0].get(x, 0.0) - tot[1].get(x, 0.0))
            print(f"  {n}: " + ", ".join(f"{x} {tot[0].get(x, 0.0):.3f} -> {tot[1].get(x, 0.0):.3f}"
                                          for x in grew[:a.passes]))
    if a.json:
        Path(a.json).write_text(json.dumps({"builds": [str(b) for b in builds], "results": results}, indent=1))
    for k, b in enumerate(builds):
        print(f"# per-program (build {k + 1}):", file=sys.stderr)
        for n in names:
            r = results[n][k]
            if "programs" in r:
                print(f"#   {n}: " + ", ".join(f"{q['program']} {q['ms']:.2f}" for q in r["programs"]), file=sys.stderr)


if __name__ == "__main__":
    main()
