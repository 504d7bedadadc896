"""Memory checkpointing: a 10 000-step differentiable simulation whose tape stays small.

N particles in a cubic-damped oscillator field are stepped `steps` times (symplectic Euler) in a
host `em.loop`; em.grad of the final energy-like loss with respect to the initial velocities runs
the steps backwards. Taping every step's state would take steps x 2 x N x 2 floats (156 MiB at
N = 1024, 10 000 steps); past EMBER_TAPE_BUDGET_MB (64 by default) Ember keeps every
ceil(sqrt(steps))-th state instead and recomputes each segment once more in the reverse sweep
(core/IR.md "Derivatives"), so the tape is 2 x sqrt(steps) states. The example runs the program
with the default budget and with a budget large enough for the full tape, prints both tape sizes
(prog.stats["tape_bytes"]) and checks that the gradients are identical.

Usage: /usr/bin/python3 examples/checkpointed_sim.py [--n 1024] [--steps 10000] [--backend cpu]
"""
import argparse
import os
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


def make_program():
    """A fresh program (tracing reads EMBER_TAPE_BUDGET_MB, so each budget traces its own)."""
    @em.compile
    def loss_and_grad(x0: em.f32["N", 2], v0: em.f32["N", 2], steps: em.i32):  # noqa: F821
        x = em.var(x0)
        v = em.var(v0)
        with em.loop(steps):
            a = -x.val - 0.01 * v.val * em.sum(v.val * v.val, axis=1, keepdims=True)
            v.val = v.val + 0.001 * a
            x.val = x.val + 0.001 * v.val
        loss = em.sum(x.val * x.val)
        return loss, em.grad(loss, v0)
    return loss_and_grad


def run(budget_mb, x0, v0, steps):
    """(loss, gradient, tape bytes, seconds) with the given tape budget."""
    old = os.environ.get("EMBER_TAPE_BUDGET_MB")
    os.environ["EMBER_TAPE_BUDGET_MB"] = str(budget_mb)
    try:
        prog = make_program()
        t = time.perf_counter()
        loss, g = prog(x0, v0, steps)
        secs = time.perf_counter() - t
        return float(np.asarray(loss)), np.asarray(g), prog.stats["tape_bytes"], secs
    finally:
        if old is None:
            del os.environ["EMBER_TAPE_BUDGET_MB"]
        else:
            os.environ["EMBER_TAPE_BUDGET_MB"] = old


def main():
    """Runs both budgets and reports tape sizes, times and the gradient check."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--steps", type=int, default=10000)
    p.add_argument("--backend", default="cpu")
    args = p.parse_args()
    em.init(args.backend)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((args.n, 2)).astype(np.float32)
    v0 = rng.standard_normal((args.n, 2)).astype(np.float32)
    full_mb = args.steps * 2 * args.n * 2 * 4 / 2**20 + 1
    l1, g1, tape1, s1 = run(64, x0, v0, args.steps)
    l2, g2, tape2, s2 = run(full_mb * 2, x0, v0, args.steps)
    print(f"{args.steps} steps, N = {args.n} on {em.device_info()}")
    print(f"  checkpointed (64 MiB budget): tape {tape1 / 2**20:8.2f} MiB, {s1:.2f} s")
    print(f"  every step taped:             tape {tape2 / 2**20:8.2f} MiB, {s2:.2f} s")
    print(f"  loss {l1:.6g}; gradients identical: {np.array_equal(g1, g2)}")


if __name__ == "__main__":
    main()
