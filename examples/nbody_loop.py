"""N-body step written as an explicit loop: one em.kernel thread per body, an em.loop over all
bodies j accumulating the force in three em.var registers (x, y, z), then the Euler update.
Same physics as examples/nbody.py (unit masses, G = 1, softening 1e-4).

Usage: /usr/bin/python3 examples/nbody_loop.py [--n 2048] [--steps 20] [--backend cpu]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def step_loop(X: em.f32["N", 3], V: em.f32["N", 3], dt: em.f32):  # noqa: F821
    """One step: returns (X', V')."""
    n = X.shape[0]
    X2 = em.buffer(X.shape, em.f32)
    V2 = em.buffer(V.shape, em.f32)
    with em.kernel(n) as i:
        xi, yi, zi = X[i, 0], X[i, 1], X[i, 2]
        fx, fy, fz = em.var(0.0), em.var(0.0), em.var(0.0)
        with em.loop(n) as j:
            dx, dy, dz = xi - X[j, 0], yi - X[j, 1], zi - X[j, 2]
            r2 = dx * dx + dy * dy + dz * dz + 1e-4
            inv = 1.0 / (r2 * em.sqrt(r2))
            fx.val -= dx * inv
            fy.val -= dy * inv
            fz.val -= dz * inv
        for k, (x, f) in enumerate(((xi, fx), (yi, fy), (zi, fz))):
            v = V[i, k] + f * dt
            V2[i, k] = v
            X2[i, k] = x + v * dt
    return X2, V2


def step_numpy(X, V, dt):
    """The broadcasting step of examples/nbody.py in NumPy (float32)."""
    dt = np.float32(dt)
    d = X[:, None, :] - X[None, :, :]
    r2 = np.sum(d * d, axis=-1, keepdims=True) + np.float32(1e-4)
    V2 = V + np.sum(-d / (r2 * np.sqrt(r2)), axis=1) * dt
    return X + V2 * dt, V2


def main():
    """Runs a cloud of bodies and reports steps per second and the centre of mass drift."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--dt", type=float, default=0.01)
    a = p.parse_args()
    em.init(backend=a.backend)

    rng = np.random.default_rng(0)
    half = 32.0 * (a.n / 2048) ** (1 / 3)
    X = rng.uniform(-half, half, (a.n, 3)).astype(np.float32)
    V = rng.normal(0.0, 1.0, (a.n, 3)).astype(np.float32)
    V -= V.mean(axis=0)  # zero total momentum: the centre of mass stays put
    Xt, Vt = step_loop(X, V, a.dt)  # compiles
    err = np.max(np.abs(Vt.numpy() - step_numpy(X, V, a.dt)[1]))
    t0 = time.perf_counter()
    for _ in range(a.steps):
        Xt, Vt = step_loop(Xt, Vt, a.dt)
    Xn = Xt.numpy()
    sec = time.perf_counter() - t0
    print(f"N={a.n}: {a.steps / sec:.1f} steps/s, {step_loop.kernel_count} kernel(s); first step vs NumPy "
          f"max |dV| {err:.1e}; centre of mass moved {np.linalg.norm(Xn.mean(0) - X.mean(0)):.1e}")


if __name__ == "__main__":
    main()
