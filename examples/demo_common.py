"""Shared by the interactive examples (demo_nbody.py, demo_fluid.py, demo_mandelbrot.py,
demo_raymarch.py): their command-line options and the window loop.

Each demo module keeps its Ember programs (importable, tested against NumPy in
tests/python/test_demos.py) apart from its window loop, which is two functions:

    state = make_state(args)      # the simulation's tensors and the widgets' values
    frame(win, state)             # one frame: input, em.ui widgets, simulation, win.show(...)

`run(...)` below opens the em.Window (on screen, or headless with frames written as PNG files)
and calls `frame` until the window closes or the frame count is reached. Tests call
`make_state` and `frame` themselves with a headless window and injected input.

Run as a script, this file lists the demos.
"""
import argparse
import os
import sys
import tempfile
import time

from _ember_path import em  # ember from the build tree (or an installed copy)


def has_display():
    """Whether a window can be opened on screen (an X11 or Wayland display is set)."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def parser(doc, width, height):
    """The options every demo takes; a demo adds its own before calling run()."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    p.add_argument("--backend", default="cpu", help="cpu (default), opengl, vulkan, ...")
    p.add_argument("--width", type=int, default=width, help="window width in pixels")
    p.add_argument("--height", type=int, default=height, help="window height in pixels")
    p.add_argument("--headless", action="store_true",
                   help="render off-screen (the default when there is no display)")
    p.add_argument("--frames", type=int, default=None,
                   help="stop after this many frames (headless default: 120)")
    p.add_argument("--out", default=None,
                   help="write every frame as a PNG into this directory (headless default: a new "
                        "directory under the system temp dir)")
    p.add_argument("--no-vsync", action="store_true", help="do not wait for the display's refresh")
    return p


class FrameTimer:
    """Wall time of the frames (the time between successive win.frame() calls), for the report
    printed at the end; the first frames (which compile the programs) are left out."""

    def __init__(self, skip=3):
        self.skip, self.times, self._last = skip, [], None

    def tick(self):
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)
        self._last = now

    def mean_ms(self):
        t = self.times[self.skip:] or self.times
        return 1e3 * sum(t) / len(t) if t else float("nan")


def run(args, title, make_state, frame):
    """Opens the window (headless when asked or when there is no display), records frames when
    --out is given (or when headless), runs frame(win, state) each frame, and prints where the
    frames went and the mean frame time. Returns the state."""
    headless = args.headless or not has_display()
    if headless and not args.headless:
        print("no display (DISPLAY is unset): running headless", file=sys.stderr)
    frames = args.frames if args.frames is not None else (120 if headless else None)
    out = args.out
    if out is None and headless:
        slug = title.lower().replace("ember", "").strip().replace(" ", "-")
        out = tempfile.mkdtemp(prefix=f"ember-{slug}-")
    em.init(backend=args.backend)
    state = make_state(args)
    timer = FrameTimer()
    with em.Window(args.width, args.height, title, headless=headless, vsync=not args.no_vsync,
                   frames=frames) as win:
        if out:
            os.makedirs(out, exist_ok=True)
            win.record(out)
        while win.frame():
            timer.tick()
            frame(win, state)
        timer.tick()
        if out:
            win.stop_recording()
    count = len(timer.times)
    print(f"{title}: {count} frames on {args.backend}, mean frame time {timer.mean_ms():.1f} ms"
          + (f"; frames written to {out}" if out else ""))
    if out:
        print(out)
    return state


# Where each slider was drawn last, label -> (x, y, width, height) in window pixels (for
# scripted input in tests).
WIDGET_RECTS = {}


def slider(label, value, lo, hi):
    """em.ui.slider keeping the type of `value` (int or float); notes its rectangle."""
    value = type(value)(em.ui.slider(label, value, lo, hi))
    if hasattr(em.ui, "item_rect"):
        WIDGET_RECTS[label] = tuple(em.ui.item_rect())
    return value


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    print(__doc__)
    for name in sorted(os.listdir(here)):
        if name.startswith("demo_") and name != "demo_common.py":
            print(f"  /usr/bin/python3 {os.path.join('examples', name)} [--headless --frames N --out DIR] "
                  f"[--backend cpu|opengl|vulkan]")
