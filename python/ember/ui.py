"""em.ui: immediate-mode widgets (Dear ImGui) drawn into the window whose frame is open (the last
em.Window whose frame() returned True). Each call draws its widget this frame and returns the
value, so state lives in your variables::

    with em.ui.window("Controls"):
        dt = em.ui.slider("dt", dt, 0.0, 1.0)
        if em.ui.button("reset"):
            state = init()
        em.ui.plot("loss", loss, history=200)

Calling any of them with no open frame raises ember.WindowError. Labels are ImGui IDs: two
widgets with the same label in one window need a "##suffix" ("x##a", "x##b").
"""
import builtins
import contextlib
import numbers

import numpy as np

from . import _ember as _C
from ._window import WindowError, _BUILT

_U = _C.ui if _BUILT else None


def _ui():
    if _U is None:
        raise WindowError("em.ui needs the window runtime, which this Ember was built without")
    return _U


def _is_int(v):
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (builtins.bool, np.bool_))


def text(*values):
    """text(*values) -> None

    Draws a line of text: the values joined by spaces, like print.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.text("loss", 0.25, "step", 10)
    >>> win.close()
    """
    _ui().text(" ".join(str(v) for v in values))


def slider(label, value, lo=0.0, hi=1.0):
    """slider(label, value, lo=0.0, hi=1.0) -> int | float

    A slider from lo to hi showing `value`; int when value, lo and hi are ints, else float. Returns
    the (possibly dragged) value: keep it in your variable, ``dt = em.ui.slider("dt", dt, 0, 1)``.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.slider("dt", 0.25, 0.0, 1.0), em.ui.slider("n", 3, 0, 10)
    (0.25, 3)
    >>> win.close()
    """
    if _is_int(value) and _is_int(lo) and _is_int(hi):
        return _ui().slider_int(str(label), int(value), int(lo), int(hi))
    return _ui().slider_float(str(label), float(value), float(lo), float(hi))


def drag(label, value, speed=None, lo=0, hi=0):
    """drag(label, value, speed=None, lo=0, hi=0) -> int | float

    A box changed by dragging (speed per pixel; lo == hi means unbounded); int or float by value's
    type. Returns the value.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.drag("zoom", 1.5, speed=0.1)
    1.5
    >>> win.close()
    """
    if _is_int(value):
        return _ui().drag_int(str(label), int(value), float(1.0 if speed is None else speed), int(lo), int(hi))
    return _ui().drag_float(str(label), float(value), float(0.01 if speed is None else speed), float(lo), float(hi))


def checkbox(label, value):
    """checkbox(label, value) -> bool

    A checkbox; returns the (possibly toggled) value.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.checkbox("paused", True)
    True
    >>> win.close()
    """
    return _ui().checkbox(str(label), builtins.bool(value))


def button(label):
    """button(label) -> bool

    A button; True on the frame it is clicked.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> with em.ui.window("w", pos=(0, 0), size=(200, 150)):
    ...     clicked = em.ui.button("reset")
    ...     x, y, w, h = em.ui.item_rect()
    >>> clicked
    False
    >>> win.inject_mouse(x + w / 2, y + h / 2, buttons=(True, False, False)); win.frame()
    True
    >>> with em.ui.window("w"):
    ...     pressed = em.ui.button("reset")
    >>> win.inject_mouse(x + w / 2, y + h / 2); win.frame()
    True
    >>> with em.ui.window("w"):
    ...     clicked = em.ui.button("reset")
    >>> clicked
    True
    >>> win.close()
    """
    return _ui().button(str(label))


def _choice(fn, label, value, items):
    items = [str(i) for i in items]
    if isinstance(value, str):
        if value not in items:
            raise WindowError(f"em.ui.{fn.__name__}: {value!r} is not one of {items}")
        return items[fn(str(label), items.index(value), items)]
    idx = fn(str(label), int(value), items)
    return idx


def combo(label, value, items):
    """combo(label, value, items) -> int | str

    A drop-down of items; value is an index (returns the index) or an item (returns the item).

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.combo("colormap", "magma", ["viridis", "magma"]), em.ui.combo("mode", 1, ["a", "b"])
    ('magma', 1)
    >>> win.close()
    """
    return _choice(_ui().combo, label, value, items)


def radio(label, value, items):
    """radio(label, value, items) -> int | str

    A row of radio buttons, one per item; value is an index or an item, returned in kind.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.radio("filter", "linear", ["nearest", "linear"])
    'linear'
    >>> win.close()
    """
    return _choice(_ui().radio, label, value, items)


def color(label, value):
    """color(label, value) -> tuple of float

    A colour editor for (r, g, b) or (r, g, b, a) in 0..1; returns a tuple of the same length.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.color("tint", (1.0, 0.5, 0.0))
    (1.0, 0.5, 0.0)
    >>> win.close()
    """
    return _ui().color(str(label), [float(v) for v in value])


def input(label, value, step=None):
    """input(label, value, step=None) -> int | float

    A number field (int or float by value's type) with +/- buttons when step is given.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.input("particles", 1000, step=100), em.ui.input("gravity", 9.5)
    (1000, 9.5)
    >>> win.close()
    """
    if _is_int(value):
        return _ui().input_int(str(label), int(value), int(1 if step is None else step))
    return _ui().input_float(str(label), float(value), float(0.0 if step is None else step))


def input_text(label, value="", max_length=256):
    """input_text(label, value="", max_length=256) -> str

    A text field; returns the edited text (at most max_length bytes). Window.inject_text shows
    typing into it.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.input_text("name", "run-1")
    'run-1'
    >>> win.close()
    """
    if int(max_length) < 0:
        raise WindowError(f"ember: em.ui.input_text max_length must be at least 0, got {max_length!r}")
    return _ui().input_text(str(label), str(value), int(max_length))


def _series(label, value, history):
    if int(history) < 1:
        raise WindowError(f"ember: em.ui.plot history must be at least 1, got {history!r}")
    if isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, builtins.bool):
        return list(_ui().push_history(str(label), float(value), int(history))), float(value)
    vals = np.asarray(value, dtype=np.float32).ravel()
    return vals.tolist(), (float(vals[-1]) if vals.size else None)


def plot(label, value, history=200, height=60, overlay=None):
    """plot(label, value, history=200, height=60, overlay=None) -> None

    A line plot. A number is appended to this label's rolling history (the last `history` values,
    kept per window), so ``em.ui.plot("loss", loss)`` once per frame draws a curve; a list or array
    is plotted as given. The overlay text shows the last value.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> for step in range(5):
    ...     em.ui.plot("loss", 1.0 / (step + 1), history=100)
    >>> em.ui.plot("spectrum", np.abs(np.fft.rfft(np.random.default_rng(0).normal(size=64))))
    >>> win.close()
    """
    vals, last = _series(label, value, history)
    text_over = overlay if overlay is not None else ("" if last is None else f"{last:.4g}")
    _ui().plot_lines(str(label), vals, str(text_over), float(height))


def histogram(label, value, history=200, height=60, overlay=None):
    """histogram(label, value, history=200, height=60, overlay=None) -> None

    Bars of values: a number goes into this label's rolling history, a list or array is drawn as
    given.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.histogram("counts", np.bincount(np.random.default_rng(0).integers(0, 8, 100)))
    >>> win.close()
    """
    vals, last = _series(label, value, history)
    text_over = overlay if overlay is not None else ("" if last is None else f"{last:.4g}")
    _ui().plot_histogram(str(label), vals, str(text_over), float(height))


def collapsing_header(label, default_open=False):
    """collapsing_header(label, default_open=False) -> bool

    A header that folds the widgets after it; True while open.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.collapsing_header("Advanced", default_open=True), em.ui.collapsing_header("More")
    (True, False)
    >>> win.close()
    """
    return _ui().collapsing_header(str(label), builtins.bool(default_open))


def separator():
    """separator() -> None

    A horizontal line between widgets.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.text("above"); em.ui.separator(); em.ui.text("below")
    >>> win.close()
    """
    _ui().separator()


def same_line():
    """same_line() -> None

    Puts the next widget on the same line as the previous one.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.text("a")
    >>> _, y0, _, _ = em.ui.item_rect()
    >>> em.ui.same_line(); em.ui.text("b")
    >>> em.ui.item_rect()[1] == y0
    True
    >>> win.close()
    """
    _ui().same_line()


def begin(title, pos=None, size=None):
    """begin(title, pos=None, size=None) -> bool

    Begins an ImGui window (pos and size apply when it first appears); returns whether its contents
    are visible. Always pair with end(), or use ``with em.ui.window(title):``.

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.begin("Stats", pos=(10, 10), size=(150, 80))
    True
    >>> em.ui.text("fps", 60)
    >>> em.ui.end()
    >>> win.close()
    """
    x, y = (-1.0, -1.0) if pos is None else (float(pos[0]), float(pos[1]))
    w, h = (0.0, 0.0) if size is None else (float(size[0]), float(size[1]))
    return _ui().begin(str(title), x, y, w, h)


def end():
    """end() -> None

    Ends the ImGui window begun last (em.ui.begin).

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> visible = em.ui.begin("Panel")
    >>> em.ui.end()
    >>> visible
    True
    >>> win.close()
    """
    _ui().end()


@contextlib.contextmanager
def window(title, pos=None, size=None):
    """window(title, pos=None, size=None) -> context manager yielding bool

    ``with em.ui.window("Controls"):`` groups the widgets inside into one ImGui window; it yields
    whether the window is visible (not collapsed).

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> with em.ui.window("Controls", pos=(0, 0), size=(200, 100)) as visible:
    ...     dt = em.ui.slider("dt", 0.5, 0.0, 1.0)
    >>> visible, dt
    (True, 0.5)
    >>> win.close()
    """
    visible = begin(title, pos, size)
    try:
        yield visible
    finally:
        if _ui().in_frame():  # not when the block closed the window (a "Quit" button)
            end()


def item_rect():
    """item_rect() -> (float, float, float, float)

    (x, y, width, height) in window pixels of the widget drawn last: where to aim scripted input
    (Window.inject_mouse).

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.button("go")
    False
    >>> x, y, w, h = em.ui.item_rect()
    >>> w > 0 and h > 0
    True
    >>> win.close()
    """
    return tuple(_ui().item_rect())


def wants_mouse():
    """wants_mouse() -> bool

    Whether ImGui uses the mouse this frame (it is over a widget): the app should ignore the mouse
    then (no painting under a slider).

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.wants_mouse()
    False
    >>> win.close()
    """
    return _ui().wants_mouse()


def wants_keyboard():
    """wants_keyboard() -> bool

    Whether ImGui uses the keyboard this frame (a text field is active).

    >>> win = em.Window(200, 150, headless=True); win.frame()
    True
    >>> em.ui.wants_keyboard()
    False
    >>> win.close()
    """
    return _ui().wants_keyboard()


__all__ = ["text", "slider", "drag", "checkbox", "button", "combo", "radio", "color", "input", "input_text",
           "plot", "histogram", "collapsing_header", "separator", "same_line", "begin", "end", "window",
           "item_rect", "wants_mouse", "wants_keyboard"]
