"""Interactive Mandelbrot zoom: one Ember kernel over the pixels, each running its own em.loop
that leaves with em.break_() once |z| > 16, then coloured smoothly (the continuous escape count
n + 1 - log2(ln |z|)) into an f32 [H, W, 3] image.

Controls: hold the left mouse button to zoom in toward the cursor, the right one to zoom out,
or scroll; widgets for the iteration count (optionally growing with the zoom), the colour
cycle, an automatic zoom into the seahorse valley (on at start, so headless runs move), and a
reset button. The zoom stops where float32 runs out of precision (the automatic zoom restarts).

Usage: /usr/bin/python3 examples/demo_mandelbrot.py [--backend cpu|opengl|vulkan]
       [--headless --frames N --out DIR] [--width 800 --height 600]
"""
import math
from types import SimpleNamespace

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
import demo_common

BAILOUT2 = 256.0  # |z|^2 beyond which a point has escaped (a large radius colours smoothly)
TARGET = (-0.743643887, 0.131825904)  # the automatic zoom's destination (seahorse valley)
MIN_STEP = 2e-6  # the smallest pixel size float32 coordinates resolve near |c| ~ 1


@em.compile
def mandelbrot(height: em.i32, width: em.i32, x0: em.f32, y0: em.f32, step: em.f32, iters: em.i32,
               cycle: em.f32):
    """Pixel (i, j) is c = (x0 + j step) + (y0 + i step) i. Returns the image f32[height, width, 3]
    (black inside the set, else a cosine palette over `cycle` * the smooth escape count) and the
    escape counts i32[height, width] (iters for points that did not escape)."""
    img = em.zeros((height, width, 3), em.f32)
    count = em.zeros((height, width), em.i32)
    with em.kernel((height, width)) as (i, j):
        cx = x0 + em.f32(j) * step
        cy = y0 + em.f32(i) * step
        x, y, n = em.var(0.0), em.var(0.0), em.var(0)
        with em.loop(iters):
            with em.if_(x * x + y * y > BAILOUT2):
                em.break_()
            xt = x * x - y * y + cx
            y.val = 2.0 * x * y + cy
            x.val = xt
            n.val += 1
        count[i, j] = n
        m2 = em.max(x * x + y * y, BAILOUT2)  # inside the set n == iters: m2 is not used
        mu = em.f32(n) + 1.0 - em.log2(0.5 * em.log(m2))
        t = cycle * mu
        inside = n >= iters
        for ch in range(3):
            c = 0.5 + 0.5 * em.cos(6.2831853 * (t + 0.1 * ch + 0.55))
            img[i, j, ch] = em.where(inside, 0.0, c)
    return img, count


def mandelbrot_numpy(height, width, x0, y0, step, iters, cycle):
    """The same in NumPy, float32 op by op (finished pixels masked)."""
    f = np.float32
    ii, jj = np.indices((height, width)).astype(f)
    cx, cy = f(x0) + jj * f(step), f(y0) + ii * f(step)
    x, y = np.zeros_like(cx), np.zeros_like(cy)
    n = np.zeros((height, width), np.int32)
    active = np.ones((height, width), bool)
    for _ in range(iters):
        active &= ~(x * x + y * y > f(BAILOUT2))
        xt = x * x - y * y + cx
        yt = f(2.0) * x * y + cy
        x, y = np.where(active, xt, x), np.where(active, yt, y)
        n += active
    m2 = np.maximum(x * x + y * y, f(BAILOUT2))
    with np.errstate(invalid="ignore", over="ignore"):
        mu = n.astype(f) + f(1) - np.log2(f(0.5) * np.log(m2))
    t = f(cycle) * mu
    img = np.stack([np.where(n >= iters, f(0), f(0.5) + f(0.5) * np.cos(f(6.2831853) * (t + f(0.1 * ch) + f(0.55))))
                    for ch in range(3)], -1)
    return img, n


# Window loop ---------------------------------------------------------------------------------------

def make_state(args):
    return SimpleNamespace(size=(args.height, args.width), home=(-0.6, 0.0, 3.2 / args.width),
                           cx=-0.6, cy=0.0, step=3.2 / args.width, iters=200, grow=True, cycle=0.02,
                           auto=True, zoom_rate=0.97, ui=True, image=None, counts=None, t=0)


def iterations(s):
    """The iteration budget: the slider's value, plus 60 per halving of the pixel size."""
    extra = 60 * max(0.0, math.log2(s.home[2] / s.step)) if s.grow else 0
    return int(s.iters + extra)


def zoom(s, factor, row, col):
    """Scales the pixel size by `factor`, keeping the point under pixel (row, col) in place."""
    H, W = s.size
    factor = max(factor, MIN_STEP / s.step)
    px, py = s.cx + (col - 0.5 * W) * s.step, s.cy + (row - 0.5 * H) * s.step
    s.step *= factor
    s.cx, s.cy = px - (col - 0.5 * W) * s.step, py - (row - 0.5 * H) * s.step


def frame(win, s):
    """One frame: zoom (mouse, scroll or the automatic zoom), widgets, render and show."""
    H, W = s.size
    m, p = win.mouse, win.mouse_image
    if s.ui:
        with em.ui.window("Mandelbrot", pos=(10, 10), size=(400, 150)):
            em.ui.text(f"centre {s.cx:.7f} {s.cy:+.7f}, zoom {s.home[2] / s.step:.3g}x, {win.fps:.0f} fps")
            s.iters = demo_common.slider("iterations", s.iters, 16, 2000)
            s.grow = em.ui.checkbox("more iterations when zoomed", s.grow)
            s.cycle = demo_common.slider("colour cycle", s.cycle, 0.002, 0.2)
            s.auto = em.ui.checkbox("auto zoom", s.auto)
            if em.ui.button("reset"):
                s.cx, s.cy, s.step = s.home
    if p is not None and (m.buttons[0] or m.buttons[1] or m.scroll) and not em.ui.wants_mouse():
        factor = (s.zoom_rate if m.buttons[0] else 1.0) / (s.zoom_rate if m.buttons[1] else 1.0) * 0.85 ** m.scroll
        zoom(s, factor, float(p[0]), float(p[1]))
        s.auto = False
    elif s.auto:
        if s.step <= MIN_STEP * 1.001:
            s.cx, s.cy, s.step = s.home
        # Pan a tenth of the way to the target each frame while zooming in about the centre.
        s.cx += 0.1 * (TARGET[0] - s.cx)
        s.cy += 0.1 * (TARGET[1] - s.cy)
        zoom(s, s.zoom_rate, 0.5 * H, 0.5 * W)
    x0, y0 = s.cx - 0.5 * W * s.step, s.cy - 0.5 * H * s.step
    s.image, s.counts = mandelbrot(H, W, x0, y0, s.step, iterations(s), s.cycle)
    win.show(s.image)
    s.t += 1
    return s.image


def main():
    args = demo_common.parser(__doc__, 800, 600).parse_args()
    demo_common.run(args, "Ember Mandelbrot", make_state, frame)


if __name__ == "__main__":
    main()
