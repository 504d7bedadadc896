"""Mandelbrot set: one explicit em.kernel over the pixels, each running its own em.loop that
leaves with em.break_() once |z| > 2; the results are the iteration count per pixel and the
final |z|^2 (for smooth colouring).

Usage: /usr/bin/python3 examples/mandelbrot.py [--width 96] [--height 40] [--iters 256] [--backend cpu]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def mandelbrot(height: em.i32, width: em.i32, x0: em.f32, y0: em.f32, step: em.f32, iters: em.i32):
    """Iteration counts (i32[height, width]) and final |z|^2 (f32) for c = (x0 + j step) + (y0 + i step) i."""
    out = em.zeros((height, width), em.i32)
    mag = em.zeros((height, width), em.f32)
    with em.kernel((height, width)) as (i, j):
        cx = x0 + em.f32(j) * step
        cy = y0 + em.f32(i) * step
        x, y, n = em.var(0.0), em.var(0.0), em.var(0)
        with em.loop(iters):
            with em.if_(x * x + y * y > 4.0):
                em.break_()
            xt = x * x - y * y + cx
            y.val = 2.0 * x * y + cy
            x.val = xt
            n.val += 1
        out[i, j] = n
        mag[i, j] = x * x + y * y
    return out, mag


def mandelbrot_numpy(height, width, x0, y0, step, iters):
    """The same iteration in NumPy, float32 op by op in the same order (masking finished pixels)."""
    f = np.float32
    ii, jj = np.indices((height, width)).astype(np.float32)
    cx, cy = f(x0) + jj * f(step), f(y0) + ii * f(step)
    x, y = np.zeros_like(cx), np.zeros_like(cy)
    n = np.zeros((height, width), np.int32)
    active = np.ones((height, width), bool)
    for _ in range(iters):
        active &= ~(x * x + y * y > f(4.0))
        xt = x * x - y * y + cx
        yt = f(2.0) * x * y + cy
        x, y = np.where(active, xt, x), np.where(active, yt, y)
        n += active
    return n, x * x + y * y


def main():
    """Renders the set as ASCII art and prints the time of a large render."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=96)
    p.add_argument("--height", type=int, default=40)
    p.add_argument("--iters", type=int, default=256)
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    step = 3.0 / a.width  # x in [-2.2, 0.8]; rows are drawn from every other line (characters are tall)
    n = mandelbrot(2 * a.height, a.width, -2.2, -step * (a.height - 0.5), step, a.iters)[0].numpy()[::2]
    ramp = " .:-=+*#%@"
    for row in n:
        print("".join(ramp[min(int(v) * len(ramp) // a.iters, len(ramp) - 1)] for v in row))
    t0 = time.perf_counter()
    big = mandelbrot(1024, 1024, -2.2, -1.5, 3.0 / 1024, a.iters)[0].numpy()
    ms = (time.perf_counter() - t0) * 1e3
    print(f"1024x1024, up to {a.iters} iterations: {ms:.1f} ms, {mandelbrot.kernel_count} kernel(s), "
          f"{np.mean(big == a.iters) * 100:.1f}% of pixels inside")


if __name__ == "__main__":
    main()
