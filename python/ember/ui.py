"""em.ui: immediate-mode widgets (Dear ImGui) drawn into the window whose frame is open (the last
em.Window whose frame() returned True). Each call draws its widget this frame and returns the
value, so state lives in your variables:

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
    """Draws a line of text (the values joined by spaces, like print)."""
    _ui().text(" ".join(str(v) for v in values))


def slider(label, value, lo=0.0, hi=1.0):
    """A slider from lo to hi; int when value, lo and hi are ints, else float. Returns the value."""
    if _is_int(value) and _is_int(lo) and _is_int(hi):
        return _ui().slider_int(str(label), int(value), int(lo), int(hi))
    return _ui().slider_float(str(label), float(value), float(lo), float(hi))


def drag(label, value, speed=None, lo=0, hi=0):
    """A box changed by dragging (speed per pixel; lo == hi means unbounded); int or float by value's type."""
    if _is_int(value):
        return _ui().drag_int(str(label), int(value), float(1.0 if speed is None else speed), int(lo), int(hi))
    return _ui().drag_float(str(label), float(value), float(0.01 if speed is None else speed), float(lo), float(hi))


def checkbox(label, value):
    """A checkbox; returns the (possibly toggled) value."""
    return _ui().checkbox(str(label), builtins.bool(value))


def button(label):
    """A button; True on the frame it is clicked."""
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
    """A drop-down of items; value is an index (returns the index) or an item (returns the item)."""
    return _choice(_ui().combo, label, value, items)


def radio(label, value, items):
    """A row of radio buttons, one per item; value is an index or an item, returned in kind."""
    return _choice(_ui().radio, label, value, items)


def color(label, value):
    """A colour editor for (r, g, b) or (r, g, b, a) in 0..1; returns a tuple of the same length."""
    return _ui().color(str(label), [float(v) for v in value])


def input(label, value, step=None):
    """A number field (int or float by value's type) with +/- buttons when step is given."""
    if _is_int(value):
        return _ui().input_int(str(label), int(value), int(1 if step is None else step))
    return _ui().input_float(str(label), float(value), float(0.0 if step is None else step))


def input_text(label, value="", max_length=256):
    """A text field; returns the edited text (at most max_length bytes)."""
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
    """A line plot. A number is appended to this label's rolling history (the last `history`
    values, kept per window); a list or array is plotted as given. The overlay shows the last value."""
    vals, last = _series(label, value, history)
    text_over = overlay if overlay is not None else ("" if last is None else f"{last:.4g}")
    _ui().plot_lines(str(label), vals, str(text_over), float(height))


def histogram(label, value, history=200, height=60, overlay=None):
    """Bars of values: a number goes into this label's rolling history, a list or array is drawn as given."""
    vals, last = _series(label, value, history)
    text_over = overlay if overlay is not None else ("" if last is None else f"{last:.4g}")
    _ui().plot_histogram(str(label), vals, str(text_over), float(height))


def collapsing_header(label, default_open=False):
    """A header that folds the widgets after it; True while open."""
    return _ui().collapsing_header(str(label), builtins.bool(default_open))


def separator():
    """A horizontal line."""
    _ui().separator()


def same_line():
    """Puts the next widget on the same line as the previous one."""
    _ui().same_line()


def begin(title, pos=None, size=None):
    """Begins an ImGui window (pos/size apply when it first appears); returns whether its
    contents are visible. Always pair with end(), or use `with em.ui.window(title):`."""
    x, y = (-1.0, -1.0) if pos is None else (float(pos[0]), float(pos[1]))
    w, h = (0.0, 0.0) if size is None else (float(size[0]), float(size[1]))
    return _ui().begin(str(title), x, y, w, h)


def end():
    """Ends the ImGui window begun last."""
    _ui().end()


@contextlib.contextmanager
def window(title, pos=None, size=None):
    """`with em.ui.window("Controls"):` groups the widgets inside into one ImGui window; yields
    whether it is visible (not collapsed)."""
    visible = begin(title, pos, size)
    try:
        yield visible
    finally:
        if _ui().in_frame():  # not when the block closed the window (a "Quit" button)
            end()


def item_rect():
    """(x, y, width, height) in window pixels of the widget drawn last (to aim scripted input)."""
    return tuple(_ui().item_rect())


def wants_mouse():
    """Whether ImGui uses the mouse this frame (over a widget): the app should ignore it then."""
    return _ui().wants_mouse()


def wants_keyboard():
    """Whether ImGui uses the keyboard this frame (a text field is active)."""
    return _ui().wants_keyboard()


__all__ = ["text", "slider", "drag", "checkbox", "button", "combo", "radio", "color", "input", "input_text",
           "plot", "histogram", "collapsing_header", "separator", "same_line", "begin", "end", "window",
           "item_rect", "wants_mouse", "wants_keyboard"]
