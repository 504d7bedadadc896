"""Stable fluids (Stam 1999) on a periodic 2D grid, one step per call:

  1. semi-Lagrangian advection of the velocity (u along x/columns, v along y/rows) and a dye,
     with bilinear sampling at the back-traced point (wrap-around indices);
  2. divergence by central differences, then `iters` Jacobi iterations of the pressure Poisson
     equation inside an em.loop (the pressure is an em.var);
  3. projection: subtract the pressure gradient.

Grid spacing 1, time step in cells. fluid_numpy is the same discretization in NumPy.
fluid_step_unrolled(iters) is the same step with the Jacobi loop unrolled at trace time (more
kernels, much longer compile); the demo uses the em.loop form by default.

Usage: /usr/bin/python3 examples/fluid.py [--size 128] [--steps 100] [--iters 20]
       [--variant unrolled|loop] [--backend cpu]
"""
import argparse
import functools
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


def _advect(F, u, v, dt):
    """F sampled bilinearly at (i - dt v, j - dt u), periodic (traced)."""
    H, W = F.shape
    i, j = em.indices(F.shape)
    x = em.f32(j) - dt * u
    y = em.f32(i) - dt * v
    x0, y0 = em.floor(x), em.floor(y)
    tx, ty = x - x0, y - y0
    j0, i0 = em.i32(x0) % W, em.i32(y0) % H  # % has floor semantics: wraps negatives too
    j1, i1 = (j0 + 1) % W, (i0 + 1) % H
    a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
    b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
    return a + (b - a) * ty


def _divergence(u, v, i, j, im, ip, jm, jp):
    return 0.5 * ((u[i, jp] - u[i, jm]) + (v[ip, j] - v[im, j]))


@em.compile
def fluid_step(U: em.f32["H", "W"], V: em.f32["H", "W"], D: em.f32["H", "W"], dt: em.f32,  # noqa: F821
               iters: em.i32):
    """One step with `iters` Jacobi iterations in an em.loop; returns (U', V', D', pressure)."""
    H, W = U.shape
    i, j = em.indices(U.shape)
    im, ip, jm, jp = (i - 1) % H, (i + 1) % H, (j - 1) % W, (j + 1) % W
    u, v, d = _advect(U, U, V, dt), _advect(V, U, V, dt), _advect(D, U, V, dt)
    div = _divergence(u, v, i, j, im, ip, jm, jp)
    p = em.var(em.zeros(U.shape, em.f32))
    with em.loop(iters):
        q = p.val
        p.val = (q[im, j] + q[ip, j] + q[i, jm] + q[i, jp] - div) * 0.25
    P = p.val
    return u - 0.5 * (P[i, jp] - P[i, jm]), v - 0.5 * (P[ip, j] - P[im, j]), d, P


@functools.lru_cache(maxsize=None)
def fluid_step_unrolled(iters):
    """The same step with the Jacobi iterations unrolled at trace time (a Python loop, so
    `iters` is fixed per program); returns the compiled program taking (U, V, D, dt)."""
    @em.compile(name=f"fluid_step_unrolled_{iters}")
    def step(U: em.f32["H", "W"], V: em.f32["H", "W"], D: em.f32["H", "W"], dt: em.f32):  # noqa: F821
        H, W = U.shape
        i, j = em.indices(U.shape)
        im, ip, jm, jp = (i - 1) % H, (i + 1) % H, (j - 1) % W, (j + 1) % W
        u, v, d = _advect(U, U, V, dt), _advect(V, U, V, dt), _advect(D, U, V, dt)
        div = _divergence(u, v, i, j, im, ip, jm, jp)
        P = em.zeros(U.shape, em.f32)
        for _ in range(iters):
            P = (P[im, j] + P[ip, j] + P[i, jm] + P[i, jp] - div) * 0.25
        return u - 0.5 * (P[i, jp] - P[i, jm]), v - 0.5 * (P[ip, j] - P[im, j]), d, P
    return step


def _advect_numpy(F, u, v, dt):
    H, W = F.shape
    i, j = np.indices(F.shape)
    x = j.astype(np.float32) - dt * u
    y = i.astype(np.float32) - dt * v
    x0, y0 = np.floor(x), np.floor(y)
    tx, ty = x - x0, y - y0
    j0, i0 = x0.astype(np.int32) % W, y0.astype(np.int32) % H
    j1, i1 = (j0 + 1) % W, (i0 + 1) % H
    a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
    b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
    return a + (b - a) * ty


def fluid_numpy(U, V, D, dt, iters):
    """The same step in NumPy (float32, the same operations in the same order)."""
    dt, h = np.float32(dt), np.float32(0.5)
    u, v, d = _advect_numpy(U, U, V, dt), _advect_numpy(V, U, V, dt), _advect_numpy(D, U, V, dt)
    sx = lambda a, k: np.roll(a, -k, axis=1)  # a[i, j + k]  # noqa: E731
    sy = lambda a, k: np.roll(a, -k, axis=0)  # a[i + k, j]  # noqa: E731
    div = h * ((sx(u, 1) - sx(u, -1)) + (sy(v, 1) - sy(v, -1)))
    p = np.zeros_like(U)
    for _ in range(iters):
        p = (sy(p, -1) + sy(p, 1) + sx(p, -1) + sx(p, 1) - div) * np.float32(0.25)
    return u - h * (sx(p, 1) - sx(p, -1)), v - h * (sy(p, 1) - sy(p, -1)), d, p


def divergence(u, v):
    """Central-difference divergence (NumPy), the quantity the projection drives to ~0."""
    return 0.5 * ((np.roll(u, -1, 1) - np.roll(u, 1, 1)) + (np.roll(v, -1, 0) - np.roll(v, 1, 0)))


def main():
    """Stirs a dye with a jet and prints the dye as ASCII art with the divergence left over."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dt", type=float, default=1.0)
    p.add_argument("--variant", choices=("unrolled", "loop"), default="loop",
                   help="Jacobi iterations unrolled at trace time, or in an em.loop")
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    n = a.size
    ii, jj = np.indices((n, n))
    jet = ((ii - n // 2) ** 2 + (jj - n // 6) ** 2 < (n // 16) ** 2)
    U, V, D = (np.zeros((n, n), np.float32) for _ in range(3))
    if a.variant == "loop":
        prog, run = fluid_step, lambda U, V, D: fluid_step(U, V, D, a.dt, a.iters)
    else:
        prog = fluid_step_unrolled(a.iters)
        run = lambda U, V, D: prog(U, V, D, a.dt)  # noqa: E731
    t0 = time.perf_counter()
    run(U, V, D)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s in range(a.steps):
        if s < a.steps // 2:  # a jet to the right, with a wobble, that carries dye
            U[jet] = 1.0
            V[jet] = 0.3 * np.sin(s / 5.0)
            D[jet] = 1.0
        Ut, Vt, Dt, _ = run(U, V, D)
        U, V, D = Ut.numpy(), Vt.numpy(), Dt.numpy()
    sec = time.perf_counter() - t0
    ramp = " .:-=+*#%@"
    for row in D[:: max(n // 32, 1), :: max(n // 64, 1)]:
        print("".join(ramp[min(int(c * len(ramp)), len(ramp) - 1)] for c in np.clip(row, 0, 1)))
    print(f"{n}x{n}, {a.variant}, {a.steps} steps, {a.iters} Jacobi iterations: first call (compiles) "
          f"{compile_s:.1f} s, then {a.steps / sec:.1f} steps/s ({prog.kernel_count} kernel(s)); "
          f"max |div u| {np.abs(divergence(U, V)).max():.2e} (max |u| {np.hypot(U, V).max():.2f})")


if __name__ == "__main__":
    main()
