"""Resource steadiness (issue 10, part 6): RSS and open file descriptors over many calls of one
small program and over many compiles of distinct programs, per backend.

    PYTHONPATH=build/python /usr/bin/python3 bench/steadiness.py                 # every backend here
    PYTHONPATH=build/python /usr/bin/python3 bench/steadiness.py --backend opengl --calls 100000 --compiles 10000

Each backend runs in a fresh subprocess with its own empty cache directory (so every compile is a
real one: the C++ compiler on cpu, shaderc + pipeline on vulkan, the driver on opengl). RSS is
VmRSS from /proc/self/status, fds len(os.listdir('/proc/self/fd')), printed at `--samples`
intervals. Default sizes: 100 000 calls everywhere; 10 000 compiles on the GPU backends and 1 000
on cpu (each cpu compile runs g++ for ~0.4 s: 10 000 would take over an hour). `--json PATH`
writes the samples (tests/python/test_hostile.py runs a CI-sized version and checks flatness)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BACKENDS = ("cpu", "vulkan", "vulkan-hlsl", "opengl")


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def fd_count():
    return len(os.listdir("/proc/self/fd"))


def child(backend, calls, compiles, samples):
    import gc

    import numpy as np

    import ember as em
    em.init(backend)

    @em.compile
    def small(X: em.f32["N"], s: em.f32):  # noqa: F821
        return X * s + 1.0

    x = np.arange(64, dtype=np.float32)
    for _ in range(200):  # warm-up: first-call allocations, pools, driver caches
        small(x, 2.0)
    gc.collect()
    out = {"backend": backend, "calls": [], "compiles": []}

    def sample(phase, i, t0):
        row = (i, rss_kb(), fd_count(), round(time.time() - t0, 2))
        out[phase].append(row)
        print(f"{backend:12s} {phase:8s} {i:7d}  rss {row[1] / 1024:8.1f} MiB  fds {row[2]:4d}  {row[3]:7.1f} s",
              flush=True)

    every = max(1, calls // samples)
    t0 = time.time()
    sample("calls", 0, t0)
    for i in range(1, calls + 1):
        r = small(x, 2.0)
        if i % every == 0:
            assert float(r.numpy()[3]) == 7.0
            sample("calls", i, t0)

    every = max(1, compiles // samples)
    t0 = time.time()
    sample("compiles", 0, t0)
    for i in range(1, compiles + 1):
        c = float(i)

        def distinct(X: em.f32["N"]):  # noqa: F821
            return X * 2.0 + c  # the constant is in the kernel source: a new program each time

        prog = em.compile(distinct)
        r = prog(x)
        if i % every == 0:
            assert float(r.numpy()[3]) == 6.0 + c
            del prog, r
            gc.collect()
            sample("compiles", i, t0)
    entries, capacity = em._ember._memory_cache_stats()
    out["memory_cache"] = [entries, capacity]
    print(f"{backend:12s} memory cache: {entries} entries (capacity {capacity})", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default=",".join(BACKENDS), help="comma-separated (default: every one available)")
    ap.add_argument("--calls", type=int, default=100000)
    ap.add_argument("--compiles", type=int, default=None, help="default: 10000 (GPU backends), 1000 (cpu)")
    ap.add_argument("--samples", type=int, default=10, help="samples per phase")
    ap.add_argument("--json", default=None, help="write the samples here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        res = child(args.backend, args.calls, args.compiles, args.samples)
        print("JSON " + json.dumps(res), flush=True)
        return
    import ember as em
    results = {}
    for b in [b for b in args.backend.split(",") if b]:
        reason = em._ember.backend_unavailable(b) if b in em._program._BUILT_BACKENDS else "not built"
        if reason:
            print(f"{b}: skipped ({reason})")
            continue
        n = args.compiles if args.compiles is not None else (1000 if b == "cpu" else 10000)
        with tempfile.TemporaryDirectory(prefix="ember-steadiness-") as cache:
            env = dict(os.environ, EMBER_CACHE_DIR=cache)
            proc = subprocess.run([sys.executable, __file__, "--child", "--backend", b, "--calls", str(args.calls),
                                   "--compiles", str(n), "--samples", str(args.samples)],
                                  env=env, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout.splitlines():
            if line.startswith("JSON "):
                results[b] = json.loads(line[5:])
            else:
                print(line)
        if proc.returncode != 0:
            print(f"{b}: failed (exit status {proc.returncode})")
            results[b] = {"error": proc.returncode}
            continue
        r = results[b]
        for phase in ("calls", "compiles"):
            (_, rss0, fd0, _), (i1, rss1, fd1, secs) = r[phase][0], r[phase][-1]
            print(f"SUMMARY {b:12s} {phase:8s} {i1:6d}: rss {rss0 / 1024:.1f} -> {rss1 / 1024:.1f} MiB "
                  f"({(rss1 - rss0) / 1024:+.1f}), fds {fd0} -> {fd1}, {secs:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)
    if any("error" in r for r in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
