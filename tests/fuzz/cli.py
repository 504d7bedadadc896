"""Command line of the differential fuzzer (tools/fuzz runs `python3 -m tests.fuzz.cli`)."""
import argparse
import collections
import json
import os
import sys
import time

import numpy as np

from . import gen, gen_race, grad as G, minimize, run

ALL_BACKENDS = ("cpu", "vulkan", "vulkan-hlsl", "opengl")


def _arr(a):
    t = np.array2string(np.asarray(a).astype(float) if a.dtype == np.float32 else np.asarray(a), separator=", ",
                        threshold=10 ** 9, max_line_width=110, floatmode="unique")
    t = t.replace("nan", "np.nan").replace("inf", "np.inf")
    dt = {np.float32: "np.float32", np.int32: "np.int32", np.uint32: "np.uint32", np.bool_: "np.bool_"}[a.dtype.type]
    return f"np.array({t}, dtype={dt})"


def script(prog, why=""):
    """The program as a self-contained Python script: the @em.compile function, its inputs, the
    NumPy reference and the comparison (per-output tolerances: the largest element bound)."""
    L = ["#!/usr/bin/env python3",
         f'"""Ember fuzz program, seed {prog.seed}.{(" " + why) if why else ""}',
         f"features: {', '.join(prog.features)}",
         "Run: PYTHONPATH=build/python /usr/bin/python3 THIS_FILE [backend]  (cpu, vulkan, vulkan-hlsl, opengl)\"\"\"",
         "import sys", ""]
    L.append(prog.em_src.rstrip())
    L += ["", "", prog.np_src.replace("import numpy as np\n", "import numpy as np  # noqa: E402\n").rstrip(), "", ""]
    L += [G.e_shim().rstrip(), "", ""]  # errs.py helpers the reference calls (E.smooth, E.nz...)
    L.append("def inputs():")
    L.append("    return [")
    for nm, dt, ann, data in prog.args:
        L.append(f"        {_arr(data) if ann else repr(np.asarray(data).item())},  # {nm}")
    L.append("    ]")
    L += ["", ""]
    tol = [(float(e[0].max()) if e.size else 0.0, float(e[1].max()) if e.size else 0.0) for e in prog.ref_errs]
    tol += [(float(e[0].max()) if e.size else 0.0, float(e[1].max()) if e.size else 0.0) for _, e in prog.ref_args]
    L.append(f"TOL = {tol!r}  # per result: (cpu/interpreter bound, GPU bound), absolute, before x{run.SAFETY}")
    L.append(f"GPU_OK = {prog.gpu_ok}")
    L += ["", "",
          'if __name__ == "__main__":',
          '    backend = sys.argv[1] if len(sys.argv) > 1 else "cpu"',
          "    em.init(backend)",
          "    args = inputs()",
          "    want, want_args = ref(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])",
          "    out = f(*args)",
          "    got = [t.numpy() for t in out] + [a for a in args if isinstance(a, np.ndarray)]",
          "    ok = True",
          "    for k, (g, w) in enumerate(zip(got, list(want) + list(want_args))):",
          "        w = np.asarray(w)",
          "        t = TOL[k][0 if backend == 'cpu' else 1] * " + repr(run.SAFETY) + " + 1e-30",
          "        if w.dtype.kind == 'f':",
          "            d = np.abs(g.astype(np.float64) - w)",
          "            bad = (np.isnan(g) != np.isnan(w)) | ~np.isnan(w) & ~(d <= t) & ~(g == w)",
          "        else:",
          "            bad = g.astype(np.int64) != w.astype(np.int64)",
          "        if g.shape != w.shape or np.any(bad):",
          "            ok = False",
          "            i = np.unravel_index(int(np.argmax(bad)), w.shape) if w.shape and g.shape == w.shape else ()",
          "            print(f'result {k}: MISMATCH at {i}: got {g[i] if g.shape == w.shape else g.shape}, '",
          "                  f'expected {w[i] if g.shape == w.shape else w.shape}')",
          "    print('OK' if ok else 'FAILED', backend)",
          "    sys.exit(0 if ok else 1)", ""]
    return "\n".join(L)


def _available(backends):
    import ember as em
    out = []
    for b in backends:
        if b not in em._program._BUILT_BACKENDS or em._ember.backend_unavailable(b):
            print(f"fuzz: backend {b} unavailable, skipped", file=sys.stderr)
            continue
        out.append(b)
    return out


def _fmt_fail(f):
    return f"{f['cls']:<10} {f['where']:<34} {f.get('msg', '')[:400]}".replace("\n", " | ")


def _script(seed, grad, choices=None, drop=(), why="", race=False):
    if race:
        prog = gen_race.generate_race(seed, choices)
        verdict = "races: Ember must refuse it (ShapeError)" if prog.expect_race else "is race-free: it must run"
        return f"# race seed {seed}: the reference says the program {verdict}\n" + script(prog, why)
    prog = gen.generate(seed, choices, drop, grad=grad)
    if not grad:
        return script(prog, why)
    gp = G.GradProgram(prog)
    if not gp.ok:
        return f"# seed {seed} (--grad): nothing to differentiate ({gp.why_not})\n" + script(prog, why)
    return G.script(gp, why)


def _grad_source(seed, grad, choices=None, drop=()):
    """The gradient program's Ember source (for failure reports), or ''."""
    if not grad:
        return ""
    gp = G.GradProgram(gen.generate(seed, choices, drop, grad=True))
    return gp.em_src or ""


def _grad_info(g):
    if "skipped" in g:
        return f"none ({g['skipped']})"
    return (f"{g.get('elements', 0)}: {g.get('checked', 0)} compared, {g.get('kinks', 0)} at kinks skipped, "
            f"{g.get('sampled_out', 0)} sampled out, {g.get('nonfinite', 0)} non-finite inputs; "
            f"{g.get('dirs', 0)} random directions ({g.get('dir_kinks', 0)} at kinks)")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="tools/fuzz", description=(
        "Ember's differential fuzzer: random programs compared (reference interpreter after every pass, "
        "every backend) with a NumPy reference."), formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  tools/fuzz --count 200 --start 0 --backends cpu,vulkan --out /tmp/fuzz\n"
               "  tools/fuzz --seed 17 --backends cpu,opengl\n  tools/fuzz --show 17 > repro.py\n"
               "  tools/fuzz --minimize 17 --backends cpu\n"
               "  tools/fuzz --grad --count 200 --backends cpu --jobs 2   # gradient mode (any option)")
    ap.add_argument("--show", type=int, metavar="SEED", help="print the program of SEED as a self-contained script")
    ap.add_argument("--seed", type=int, help="run one seed and print its failures")
    ap.add_argument("--minimize", type=int, metavar="SEED", help="minimize the first failure of SEED and print it")
    ap.add_argument("--count", type=int, help="run COUNT seeds from --start")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--backends", default=",".join(ALL_BACKENDS), help="comma-separated (default: all four)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per program (default 60)")
    ap.add_argument("--out", help="directory for failures.jsonl (long runs)")
    ap.add_argument("--minimize-failures", action="store_true", help="minimize each new failure signature")
    ap.add_argument("--budget", type=float, default=240.0, help="seconds per minimization (default 240)")
    ap.add_argument("--no-stages", action="store_true", help="skip the interpreter-after-every-pass check")
    ap.add_argument("--coverage", action="store_true", help="with --count: print feature coverage only")
    ap.add_argument("--stats", action="store_true", help=(
        "with --count: also count the programs each pass changed (on the first backend; the interpreter-only "
        "run: none) and the atomics reduce_atomics removed"))
    ap.add_argument("--batch", type=int, default=run.BATCH, help=(
        f"programs per worker whose cpu kernels are compiled together (default {run.BATCH}; 1: one compile each)"))
    ap.add_argument("--grad", action="store_true", help=(
        "gradient mode: each program's L = sum(w * f32 outputs) and em.grad(L, [f32 arguments]), compared "
        "with float64 central differences of the reference (tests/fuzz/grad.py); works with every other option"))
    ap.add_argument("--races", action="store_true", help=(
        "race programs (tests/fuzz/gen_race.py): a store whose value may vary along an axis its indices do not; "
        "those whose reference finds two threads writing different values into one element must be refused "
        "(ShapeError) on every backend, the others must match the reference"))
    a = ap.parse_args(argv)
    backends = [b for b in a.backends.split(",") if b]

    if a.show is not None:
        print(_script(a.show, a.grad, race=a.races))
        return 0
    if a.coverage:
        cov = collections.Counter()
        for s in range(a.start, a.start + (a.count or 300)):
            cov.update(run.generate(s, a.grad, a.races).features)
        for f in (gen_race.RACE_FEATURES if a.races else gen.FEATURES):
            print(f"{cov[f]:6d}  {f}")
        return 0
    backends = _available(backends)
    if a.seed is not None or a.minimize is not None:
        seed = a.seed if a.seed is not None else a.minimize
        w = run.Worker()
        try:
            r = run.run_seed(w, {"seed": seed, "backends": backends, "stages": not a.no_stages, "grad": a.grad,
                                 "race": a.races},
                             a.timeout)
            cm = "# " if a.minimize is not None else ""  # --minimize prints a script: these lines as comments
            if a.grad:
                print(f"{cm}seed {seed}: gradient elements {_grad_info(r.get('grad', {}))}")
            if not r["fails"]:
                print(f"{cm}seed {seed}: ok ({', '.join(backends)})")
                return 0
            for f in r["fails"]:
                print(f"{cm}seed {seed}: " + _fmt_fail(f))
            if a.minimize is None and a.grad:
                print("\nthe gradient program (tools/fuzz --grad --show SEED prints it with its reference):\n")
                print(_grad_source(seed, True))
            if a.minimize is not None:
                f0 = r["fails"][0]
                print(f"minimizing: {_fmt_fail(f0)[:200]}", file=sys.stderr)
                prog, f, best = minimize.minimize(seed, f0, backends, w, a.budget, a.timeout,
                                                  log=lambda m: print(m, file=sys.stderr), grad=a.grad)
                print(_script(seed, a.grad, best["choices"], best["drop"],
                              f"Minimized failure: {f['cls']} on {f['where']}: {f.get('msg', '')[:300]}"))
            return 1
        finally:
            w.stop()
    if a.count is None:
        ap.print_help()
        return 2
    out = None
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        out = open(os.path.join(a.out, "failures.jsonl"), "a")
    t0 = time.time()
    counts = collections.Counter()
    gstats = collections.Counter()
    seen = set()
    done = [0]
    failing = [0]
    mini_worker = run.Worker() if a.minimize_failures else None

    pstats = collections.Counter()

    def on_result(r):
        done[0] += 1
        if "passes" in r:
            pstats["programs"] += 1
            pstats.update("pass " + p for p in r["passes"])
            if "atomics" in r:
                before, after = r["atomics"]
                pstats["atomics before reduce_atomics"] += before
                pstats["atomics after reduce_atomics"] += after
                pstats["programs with an atomic"] += before > 0
                pstats["programs with fewer atomics after reduce_atomics"] += after < before
                pstats["programs without atomics after reduce_atomics"] += before > 0 and after == 0
        gi = r.get("grad")
        if gi is not None:
            if "skipped" in gi:
                gstats["programs without gradient"] += 1
            else:
                gstats["programs"] += 1
                gstats.update({k: v for k, v in gi.items() if isinstance(v, int)})
        places = set(backends) | ({"interp"} if not a.no_stages else set())
        failed = set()
        for f in r["fails"]:
            place = "interp" if f["where"].startswith("interp") else f["where"]
            failed.add(place)
            counts[(place, f["cls"])] += 1
            sig = run.signature(f)
            rec = {"seed": r["seed"], **f, "signature": list(sig)}
            if sig not in seen:
                seen.add(sig)
                if not a.grad:
                    print(f"  seed {r['seed']}: NEW " + _fmt_fail(f), flush=True)
            if out:
                if a.grad:
                    rec["grad_program"] = _grad_source(r["seed"], True)
                out.write(json.dumps(rec) + "\n")
                out.flush()
        if a.grad and r["fails"]:  # every failing seed: gradient mismatches share a signature per place
            failing[0] += 1
            more = f" (and {len(r['fails']) - 1} more places)" if len(r["fails"]) > 1 else ""
            print(f"  seed {r['seed']}: FAIL " + _fmt_fail(r["fails"][0]) + more, flush=True)
            if any(f["cls"] == "mismatch" for f in r["fails"]):
                print("    " + _grad_source(r["seed"], True).rstrip().replace("\n", "\n    "), flush=True)
        for p in places - failed:
            counts[(p, "ok")] += 1
        if done[0] % 10 == 0 or done[0] == a.count:
            print(f"[{done[0]}/{a.count}] {time.time() - t0:.0f} s, {len(seen)} distinct failures"
                  + (f", {failing[0]} failing programs" if a.grad else ""), flush=True)
    res = run.run_many(range(a.start, a.start + a.count), backends, a.jobs, a.timeout, not a.no_stages, on_result,
                       grad=a.grad, batch=a.batch, stats=a.stats, race=a.races)
    if a.minimize_failures:
        firsts = {}
        for s in sorted(res):
            for f in res[s]["fails"]:
                firsts.setdefault(run.signature(f), (s, f))
        for sig, (s, f) in firsts.items():
            print(f"minimizing seed {s}: {_fmt_fail(f)[:160]}", flush=True)
            prog, mf, best = minimize.minimize(s, f, backends, mini_worker, a.budget, a.timeout, grad=a.grad)
            rec = {"seed": s, "minimized": True, **mf, "signature": list(sig),
                   "program": _script(s, a.grad, best["choices"], best["drop"])}
            if out:
                out.write(json.dumps(rec) + "\n")
                out.flush()
            print(_grad_source(s, True, best["choices"], best["drop"]) if a.grad else prog.em_src)
        mini_worker.stop()
    classes = ["ok", "mismatch", "internal", "user-error", "crash", "timeout"] + (["silent-race"] if a.races else [])
    places = (["interp"] if not a.no_stages else []) + backends
    print(f"\n{a.count} programs x {len(places)} ({', '.join(places)}) in {time.time() - t0:.0f} s")
    print(f"{'':14}" + "".join(f"{c:>12}" for c in classes))
    for p in places:
        print(f"{p:14}" + "".join(f"{counts[(p, c)]:>12}" for c in classes))
    if "generator" in {k[0] for k in counts}:
        print(f"fuzzer errors: {counts[('generator', 'internal')]}")
    if a.grad:
        print(f"gradient mode: {gstats['programs']} programs differentiated, {gstats['programs without gradient']} "
              f"without a f32 argument or output, {failing[0]} failing; elements {_grad_info(gstats)}")
    if a.races:
        feats = collections.Counter(f for r in res.values() for f in r.get("features", []))
        print(f"race programs: {feats['race_racy']} racing (each must be refused), {feats['race_free']} race-free; "
              + ", ".join(f"{f[5:]} {feats[f]}" for f in gen_race.RACE_FEATURES[:-2]))
    if a.stats:
        feats = collections.Counter()
        for r in res.values():
            feats.update(f for f in r.get("features", []) if f.startswith(("reduce_atomic", "inj_atomic", "hostloop_", "row_fuse")))
        print(f"\npasses (on {backends[0] if backends else '-'}): programs each pass changed, of {pstats['programs']}")
        for k in sorted(k for k in pstats if k.startswith("pass ")):
            print(f"{pstats[k]:8d}  {k[5:]}")
        for k in sorted(k for k in pstats if not k.startswith("pass ") and k != "programs"):
            print(f"{pstats[k]:8d}  {k}")
        print("generator blocks (programs with the feature):")
        for k in sorted(feats):
            print(f"{feats[k]:8d}  {k}")
    print(f"{len(seen)} distinct failure signatures" + (f"; log: {os.path.join(a.out, 'failures.jsonl')}" if out else ""))
    return 1 if seen else 0


if __name__ == "__main__":
    sys.exit(main())
