"""SPH fluid step (smoothed-particle hydrodynamics, all pairs), written as NumPy-style tensors:

    density   rho_i = sum_j m W_poly6(|x_i - x_j|, h)
    pressure  p_i = k (rho_i - rho0)
    force     F_i = -sum_j m (p_i + p_j) / (2 rho_j) grad W_spiky(x_i - x_j, h)
                    + mu sum_j m (v_j - v_i) / rho_j lap W_visc(|x_i - x_j|, h)
    update    v' = v + dt (F / rho + g), x' = x + dt v', reflected at the walls of the unit box.

Ember fuses the step into few kernels (the goal is 2: the density pass and the force pass);
the demo prints the count.

Usage: /usr/bin/python3 examples/sph.py [--n 2048] [--steps 100] [--backend cpu]
"""
import argparse
import math
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)

# Default parameters (unit box, rest density 1, the mass that gives it with n particles).
H, STIFFNESS, RHO0, MU, GRAVITY, DT = 0.12, 2.0, 1.0, 0.05, -1.0, 2e-3


@em.compile
def sph_step(X: em.f32["N", 3], V: em.f32["N", 3], h: em.f32, mass: em.f32, stiffness: em.f32,  # noqa: F821
             rho0: em.f32, mu: em.f32, g: em.f32, dt: em.f32):
    """One step; returns (X', V', rho)."""
    d = X[:, None, :] - X[None, :, :]  # x_i - x_j, [N, N, 3]
    r2 = em.sum(d * d, axis=-1)  # [N, N]
    q2 = em.max(h * h - r2, 0.0)
    rho = mass * (315.0 / (64.0 * math.pi)) / h ** 9 * em.sum(q2 * q2 * q2, axis=1)  # [N]
    p = stiffness * (rho - rho0)
    r = em.sqrt(r2)
    q = em.max(h - r, 0.0)
    spiky = -45.0 / math.pi / h ** 6  # grad W_spiky = spiky (h - r)^2 (x_i - x_j) / r
    fp = -mass * (p[:, None] + p[None, :]) / (2.0 * rho[None, :]) * spiky * q * q / em.max(r, 1e-6)
    fv = mu * mass * (45.0 / math.pi) / h ** 6 * q / rho[None, :]  # lap W_visc = 45 (h - r) / (pi h^6)
    F = em.sum(fp[:, :, None] * d + fv[:, :, None] * (V[None, :, :] - V[:, None, :]), axis=1)  # [N, 3]
    _, k = em.indices(V.shape)
    V2 = V + dt * (F / rho[:, None] + em.where(k == 2, g, 0.0))
    X2 = X + dt * V2
    out = (X2 < 0.0) | (X2 > 1.0)  # reflect at the walls, losing half the speed
    return em.clamp(X2, 0.0, 1.0), em.where(out, -0.5 * V2, V2), rho


def sph_step_numpy(X, V, h, mass, stiffness, rho0, mu, g, dt):
    """The same step in NumPy, float32."""
    f = np.float32
    h, mass, stiffness, rho0, mu, g, dt = (f(v) for v in (h, mass, stiffness, rho0, mu, g, dt))
    d = X[:, None, :] - X[None, :, :]
    r2 = np.sum(d * d, axis=-1)
    q2 = np.maximum(h * h - r2, f(0))
    rho = mass * f(315.0 / (64.0 * math.pi)) / h ** 9 * np.sum(q2 * q2 * q2, axis=1)
    p = stiffness * (rho - rho0)
    r = np.sqrt(r2)
    q = np.maximum(h - r, f(0))
    spiky = f(-45.0 / math.pi) / h ** 6
    fp = -mass * (p[:, None] + p[None, :]) / (f(2) * rho[None, :]) * spiky * q * q / np.maximum(r, f(1e-6))
    fv = mu * mass * f(45.0 / math.pi) / h ** 6 * q / rho[None, :]
    F = np.sum(fp[:, :, None] * d + fv[:, :, None] * (V[None, :, :] - V[:, None, :]), axis=1)
    V2 = V + dt * (F / rho[:, None] + np.array([0, 0, g], np.float32))
    X2 = X + dt * V2
    out = (X2 < 0) | (X2 > 1)
    return np.clip(X2, f(0), f(1)), np.where(out, f(-0.5) * V2, V2), rho


def make_particles(n, seed=0):
    """A block of fluid filling the lower half of the box, at rest; returns X, V and the mass."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n, 3)) * np.array([1.0, 1.0, 0.5])).astype(np.float32)
    V = np.zeros((n, 3), np.float32)
    return X, V, RHO0 * 0.5 / n


def main():
    """Lets a block of fluid settle under gravity; prints density statistics and the kernel count."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    X, V, mass = make_particles(a.n)
    params = (H, mass, STIFFNESS, RHO0, MU, GRAVITY, DT)
    Xt, Vt, rho = sph_step(X, V, *params)  # compiles
    t0 = time.perf_counter()
    for s in range(a.steps):
        Xt, Vt, rho = sph_step(Xt, Vt, *params)
        if s % max(a.steps // 5, 1) == 0 or s == a.steps - 1:
            r, v = rho.numpy(), Vt.numpy()
            print(f"step {s:4d}: density mean {r.mean():.3f} [{r.min():.3f}, {r.max():.3f}], "
                  f"mean speed {np.linalg.norm(v, axis=1).mean():.4f}, mean height {Xt.numpy()[:, 2].mean():.3f}")
    sec = time.perf_counter() - t0
    print(f"N={a.n}: {a.steps / sec:.1f} steps/s, {sph_step.kernel_count} kernel(s) per step")


if __name__ == "__main__":
    main()
