"""Per-call host overhead of the plan executor against the interpreter (issue 13 item 0): one small
program (the N-body step at N = 64) compiled twice in this process, once running its host plan and
once with EMBER_HOST_PLAN=0 (the host IR interpreted), then called `--calls` times each, in
alternating rounds; prints the median of the rounds' per-call times.

    PYTHONPATH=build/python /usr/bin/python3 bench/host_overhead.py [--backend cpu] [--n 64] [--calls 1000]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _ember_path import em  # noqa: E402
import nbody  # noqa: E402


def compiled(plan):
    """A fresh compile of the N-body step with the host plan on or off (read at compile time)."""
    if plan:
        os.environ.pop("EMBER_HOST_PLAN", None)
    else:
        os.environ["EMBER_HOST_PLAN"] = "0"
    prog = em.compile(nbody.step.fn)
    prog.stats
    os.environ.pop("EMBER_HOST_PLAN", None)
    return prog


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="cpu")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args()
    em.init(backend=a.backend)
    rng = np.random.default_rng(0)
    X = em.tensor(rng.uniform(-4, 4, (a.n, 3)).astype(np.float32))
    V = em.tensor(rng.normal(0, 1, (a.n, 3)).astype(np.float32))
    progs = {"plan": compiled(True), "interpreter": compiled(False)}
    for name, prog in progs.items():
        assert prog.stats["host"] == name, (name, prog.stats["host"], prog.stats["host_reason"])
        for _ in range(20):
            prog(X, V, 0.01)
    times = {name: [] for name in progs}
    for _ in range(a.rounds):
        for name, prog in progs.items():
            t0 = time.perf_counter()
            for _ in range(a.calls):
                prog(X, V, 0.01)
            times[name].append((time.perf_counter() - t0) / a.calls * 1e6)
    print(f"N-body step, N = {a.n}, backend {a.backend}, {a.calls} calls x {a.rounds} rounds:")
    for name, t in times.items():
        print(f"  {name:12s} median {statistics.median(t):8.2f} us/call  (min {min(t):.2f}, max {max(t):.2f})")


if __name__ == "__main__":
    main()
