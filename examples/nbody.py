"""N-body demo: the DESIGN.md section 5 step under @em.compile; prints steps/s and energy drift.

Usage: /usr/bin/python3 examples/nbody.py [--n 2048] [--steps 100] [--backend cpu]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def step(X: em.f32["N", 3], V: em.f32["N", 3], dt: em.f32):  # noqa: F821 ("N" is a symbol)
    """One step of DESIGN.md section 5: all-pairs gravity (unit masses, 1e-4 softening), then
    symplectic Euler. One kernel: each body's thread sums over the others in registers."""
    d = X[:, None, :] - X[None, :, :]
    r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-4
    F = em.sum(-d / (r2 * em.sqrt(r2)), axis=1)
    V2 = V + F * dt
    return X + V2 * dt, V2


def energy(X, V):
    """Kinetic + potential energy (unit masses, same 1e-4 softening) in float64, by row blocks."""
    X, V = X.astype(np.float64), V.astype(np.float64)
    kinetic = 0.5 * np.sum(V * V)
    potential = 0.0
    for s in range(0, len(X), 256):  # U = -sum_{i<j} 1/sqrt(|xi - xj|^2 + eps)
        rows = X[s:s + 256]
        r2 = np.sum((rows[:, None, :] - X[None, :, :]) ** 2, axis=-1) + 1e-4
        j_gt_i = np.arange(len(X))[None, :] > np.arange(s, s + len(rows))[:, None]
        potential -= np.sum(np.where(j_gt_i, 1.0 / np.sqrt(r2), 0.0))
    return kinetic + potential


def main():
    """Runs the simulation and reports throughput and relative energy drift."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--dt", type=float, default=0.01)
    a = p.parse_args()
    if a.steps < 2:
        p.error("--steps must be >= 2 (the first step compiles and is timed apart)")
    em.init(backend=a.backend)

    # Unit masses and G = 1: a cloud of constant density, sparse enough that dt = 0.01 keeps
    # the energy drift near 1e-3 over 100 steps (drift grows as the cold cloud collapses).
    rng = np.random.default_rng(0)
    half = 32.0 * (a.n / 2048) ** (1 / 3)
    X = rng.uniform(-half, half, (a.n, 3)).astype(np.float32)
    V = rng.normal(0.0, 1.0, (a.n, 3)).astype(np.float32)
    e0 = energy(X, V)

    t0 = time.perf_counter()
    Xt, Vt = step(X, V, a.dt)  # the first call traces and compiles
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(a.steps - 1):
        Xt, Vt = step(Xt, Vt, a.dt)
    X, V = Xt.numpy(), Vt.numpy()
    run_s = time.perf_counter() - t0

    drift = abs(energy(X, V) - e0) / abs(e0)
    print(f"N={a.n} steps={a.steps} backend={a.backend}: first step (compiles) {compile_s:.2f} s, "
          f"then {(a.steps - 1) / run_s:.1f} steps/s; relative energy drift {drift:.2e}")


if __name__ == "__main__":
    main()
