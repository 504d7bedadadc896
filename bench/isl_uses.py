"""Issue 14's item-2 uses, before and after the dependence analysis, side by side: each program
runs in a new process per build (cpu backend, caches on), the builds alternating, and prints its
kernel count and median / min run time. Run it quiet (`/work/quiet.sh` or an idle machine):

  PYTHONPATH=build/python python3 bench/isl_uses.py --build /work/wt-base/build --build build [--reps 30]

Programs: host-loop matvecs (a host loop becomes a kernel axis), atomic row statistics (atomics
become per-thread reductions) and a transposed atomic add (an injective scatter becomes a store). Per program: kernels,
host loops left in the final IR (each dispatches its kernels once per iteration), atomics left."""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

PROGRAMS = ["host_loop_matvecs", "atomic_row_stats", "transpose_atomic_add"]


def build_program(em, name):
    """(compiled function, argument list) of one program."""
    rng = np.random.default_rng(14)
    r = lambda *s: rng.uniform(-2, 2, s).astype(np.float32)  # noqa: E731
    if name == "host_loop_matvecs":
        L, H, K = 256, 512, 512

        @em.compile
        def f(w: em.f32[H, K], x: em.f32[L, K]):
            y = em.zeros((L, H))
            i, k = em.indices([H, K])
            with em.loop(L) as t:
                y[t, i] = em.sum(w[i, k] * x[t, k], axis=1)
            return y
        return f, [r(H, K), r(L, K)]
    if name == "atomic_row_stats":
        N, M = 4096, 256

        @em.compile
        def f(v: em.f32[N, M], w: em.i32[N, M]):
            S = em.zeros((N,))
            T = em.zeros((N,), em.i32)
            with em.kernel((N, M)) as (i, j):
                em.atomic_add(S[i], v[i, j] * 2.0)
                em.atomic_max(T[i], w[i, j])
            return S, T
        return f, [r(N, M), rng.integers(-100, 100, (N, M)).astype(np.int32)]
    if name == "transpose_atomic_add":
        N = 1024

        @em.compile
        def f(a: em.f32[N, N]):
            B = em.zeros((N, N))
            with em.kernel((N, N)) as (i, j):
                em.atomic_add(B[j, i], a[i, j] * 3.0)
            return B
        return f, [r(N, N)]
    raise ValueError(name)


def child(name, reps):
    import ember as em
    em.init("cpu")
    f, args = build_program(em, name)
    args = [em.tensor(a) for a in args]
    out = f(*args)
    first = out[0] if isinstance(out, tuple) else out
    first.numpy()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f(*args)
        (out[0] if isinstance(out, tuple) else out).numpy()
        times.append((time.perf_counter() - t0) * 1e3)
    ir = f.ir("final")
    loops = len(re.findall(r"^  %\d+ = loop i32 \(", ir, re.M))
    atomics = len(re.findall(r"= atomic |^\s*atomic", ir, re.M))
    print("ISL_USES " + json.dumps({"kernels": f.kernel_count, "loops": loops, "atomics": atomics,
                                    "median": float(np.median(times)), "min": min(times)}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", action="append", required=True)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--child", default=None)
    a = p.parse_args()
    if a.child:
        child(a.child, a.reps)
        return
    res = {}
    for name in PROGRAMS:
        for b in a.build:
            env = dict(os.environ, EMBER_BUILD_DIR=os.path.abspath(b), PYTHONPATH=os.path.join(os.path.abspath(b), "python"))
            proc = subprocess.run([sys.executable, __file__, "--child", name, "--reps", str(a.reps), "--build", b],
                                  capture_output=True, text=True, env=env, timeout=600)
            line = [x for x in proc.stdout.splitlines() if x.startswith("ISL_USES ")]
            res[(name, b)] = json.loads(line[-1][9:]) if line else {"error": proc.stderr.strip()[-300:]}
    print("| program | " + " | ".join(f"build {k + 1}: kernels / host loops / atomics, median ms (min)" for k in range(len(a.build))) + " |")
    print("|---|" + "---|" * len(a.build))
    for name in PROGRAMS:
        cells = []
        for b in a.build:
            m = res[(name, b)]
            cells.append(m["error"] if "error" in m else f"{m['kernels']} / {m['loops']} / {m['atomics']}, {m['median']:.2f} ({m['min']:.2f})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for k, b in enumerate(a.build):
        print(f"build {k + 1}: {b}")


if __name__ == "__main__":
    main()
