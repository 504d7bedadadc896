"""Interactive 2D fluid: the stable-fluids step of examples/fluid.py (advection of velocity and
dye, pressure projection) stirred with the mouse.

Each frame runs three Ember programs:
  1. `add_forces`: a Gaussian splat of force and dye at the cursor (force = the mouse's motion),
     viscosity as implicit diffusion of the velocity (Jacobi iterations in an em.loop), and the
     dye's decay;
  2. `fluid_step` (examples/fluid.py): advection, divergence, Jacobi pressure solve, projection;
  3. `shade`: dye density to colour, hued by the direction of the flow.

Controls: drag with the left mouse button to push dye around; widgets for viscosity, time step,
dye decay, splat radius, pressure iterations, an automatic stirrer (on at start, so headless
runs show motion) and a reset button.

Usage: /usr/bin/python3 examples/demo_fluid.py [--n 512] [--backend cpu|opengl|vulkan]
       [--headless --frames N --out DIR] [--width 800 --height 600]
"""
import math
from types import SimpleNamespace

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
import demo_common
from fluid import fluid_step  # stable fluids on a periodic grid: (U, V, D, dt, iters) -> (U', V', D', P)


@em.compile
def add_forces(U: em.f32["H", "W"], V: em.f32["H", "W"], D: em.f32["H", "W"],  # noqa: F821
               row: em.f32, col: em.f32, fx: em.f32, fy: em.f32, radius: em.f32, dye: em.f32,
               visc: em.f32, dt: em.f32, decay: em.f32, visc_iters: em.i32):
    """Adds g * (fx, fy) to the velocity (u along columns, v along rows) and g * dye to the dye
    D, where g = exp(-((i - row)^2 + (j - col)^2) / radius^2) is a Gaussian around (row, col)
    (nothing when radius <= 0); multiplies the old dye by `decay`; then diffuses the velocity by
    `visc_iters` Jacobi iterations of (1 + 4a) u' - a (sum of the 4 neighbours of u') = u, with
    a = visc * dt (periodic). Returns (U', V', D')."""
    H, W = U.shape
    i, j = em.indices(U.shape)
    im, ip, jm, jp = (i - 1) % H, (i + 1) % H, (j - 1) % W, (j + 1) % W
    di, dj = em.f32(i) - row, em.f32(j) - col
    r2 = em.max(radius * radius, 1e-6)
    g = em.where(radius > 0.0, em.exp(-(di * di + dj * dj) / r2), 0.0)
    u0, v0 = U + g * fx, V + g * fy
    d = D * decay + g * dye
    a = visc * dt
    u, v = em.var(u0), em.var(v0)
    with em.loop(visc_iters):
        p, q = u.val, v.val
        u.val = (u0 + a * (p[im, j] + p[ip, j] + p[i, jm] + p[i, jp])) / (1.0 + 4.0 * a)
        v.val = (v0 + a * (q[im, j] + q[ip, j] + q[i, jm] + q[i, jp])) / (1.0 + 4.0 * a)
    return u.val, v.val, d


@em.compile
def shade(D: em.f32["H", "W"], U: em.f32["H", "W"], V: em.f32["H", "W"]):  # noqa: F821
    """Colour image f32[H, W, 3]: the dye's density, tone-mapped, hued by the flow's direction."""
    H, W = D.shape
    img = em.zeros((H, W, 3), em.f32)
    with em.kernel((H, W)) as (i, j):
        d = em.max(D[i, j], 0.0)
        angle = em.atan2(V[i, j], U[i, j])
        for ch in range(3):
            hue = 0.6 + 0.4 * em.cos(angle + 2.0944 * ch)
            img[i, j, ch] = 1.0 - em.exp(-1.5 * d * hue) + 0.02
    return img


# NumPy references ----------------------------------------------------------------------------------

def add_forces_numpy(U, V, D, row, col, fx, fy, radius, dye, visc, dt, decay, visc_iters):
    """add_forces in NumPy (float32)."""
    f = np.float32
    H, W = U.shape
    i, j = np.indices(U.shape)
    di, dj = i.astype(f) - f(row), j.astype(f) - f(col)
    r2 = np.maximum(f(radius) * f(radius), f(1e-6))
    g = np.exp(-(di * di + dj * dj) / r2) if radius > 0 else np.zeros_like(U)
    u0, v0 = U + g * f(fx), V + g * f(fy)
    d = D * f(decay) + g * f(dye)
    a = f(visc) * f(dt)
    nb = lambda x: np.roll(x, 1, 0) + np.roll(x, -1, 0) + np.roll(x, 1, 1) + np.roll(x, -1, 1)  # noqa: E731
    u, v = u0, v0
    for _ in range(visc_iters):
        u, v = (u0 + a * nb(u)) / (f(1) + f(4) * a), (v0 + a * nb(v)) / (f(1) + f(4) * a)
    return u, v, d


def shade_numpy(D, U, V):
    f = np.float32
    d = np.maximum(D, f(0))
    angle = np.arctan2(V, U)
    return np.stack([f(1) - np.exp(f(-1.5) * d * (f(0.6) + f(0.4) * np.cos(angle + f(2.0944) * f(ch)))) + f(0.02)
                     for ch in range(3)], -1)


# Window loop ---------------------------------------------------------------------------------------

def make_state(args):
    n = args.n
    z = np.zeros((n, n), np.float32)
    return SimpleNamespace(
        n=n, U=em.tensor(z), V=em.tensor(z), D=em.tensor(z), visc=0.0, dt=1.0, decay=0.995,
        radius=n / 40.0, force=0.5, dye=0.8, iters=30, visc_iters=4, auto=True, ui=True,
        last_mouse=None, t=0, image=None, injected=False)


def stirrer(s):
    """The automatic stirrer: a source circling the centre, pushing along its path.
    Returns (row, col, fx, fy)."""
    n, a = s.n, 0.03 * s.t
    r = 0.25 * n
    row, col = 0.5 * n + r * math.sin(a), 0.5 * n + r * math.cos(a)
    speed = 0.01 * n
    return row, col, -math.sin(a) * speed + 0.006 * n * math.cos(3 * a), math.cos(a) * speed


def mouse_force(win, s):
    """(row, col, fx, fy) from a left-button drag over the image, or None."""
    m, p = win.mouse, win.mouse_image
    if not m.buttons[0] or p is None or em.ui.wants_mouse():
        s.last_mouse = None
        return None
    row, col = float(p[0]), float(p[1])
    last, s.last_mouse = s.last_mouse, (row, col)
    if last is None:
        return row, col, 0.0, 0.0
    return row, col, s.force * (col - last[1]), s.force * (row - last[0])


def widgets(win, s):
    with em.ui.window("Fluid", pos=(10, 10), size=(330, 250)):
        em.ui.text(f"{s.n}x{s.n}, {win.fps:.0f} fps")
        s.visc = demo_common.slider("viscosity", s.visc, 0.0, 2.0)
        s.dt = demo_common.slider("time step", s.dt, 0.1, 2.0)
        s.decay = demo_common.slider("dye decay", s.decay, 0.95, 1.0)
        s.radius = demo_common.slider("splat radius", s.radius, 1.0, s.n / 8.0)
        s.iters = demo_common.slider("pressure iterations", s.iters, 1, 80)
        s.auto = em.ui.checkbox("auto stir", s.auto)
        if em.ui.button("reset"):
            z = np.zeros((s.n, s.n), np.float32)
            s.U, s.V, s.D = em.tensor(z), em.tensor(z), em.tensor(z)
        em.ui.plot("frame ms", 1e3 * win.frame_time, history=200)


def frame(win, s):
    """One frame: widgets, forces (mouse, else the stirrer), a fluid step, shade and show."""
    if s.ui:
        widgets(win, s)
    splat = mouse_force(win, s)
    s.injected = splat is not None
    if splat is None and s.auto:
        splat = stirrer(s)
    row, col, fx, fy = splat if splat is not None else (0.0, 0.0, 0.0, 0.0)
    radius = s.radius if splat is not None else 0.0
    visc_iters = s.visc_iters if s.visc > 0 else 0
    s.U, s.V, s.D = add_forces(s.U, s.V, s.D, row, col, fx, fy, radius, s.dye, s.visc, s.dt, s.decay, visc_iters)
    s.U, s.V, s.D, _ = fluid_step(s.U, s.V, s.D, s.dt, s.iters)
    s.image = shade(s.D, s.U, s.V)
    win.show(s.image, filter="linear")
    s.t += 1
    return s.image


def main():
    p = demo_common.parser(__doc__, 800, 600)
    p.add_argument("--n", type=int, default=512, help="grid size (n x n cells)")
    args = p.parse_args()
    demo_common.run(args, "Ember fluid", make_state, frame)


if __name__ == "__main__":
    main()
