"""em.Window: a GLFW + Dear ImGui window (or an off-screen framebuffer when headless) that shows
tensors live, reads the mouse and keyboard, and captures frames (DESIGN section 5).

    with em.Window(800, 600, "fluid") as win:
        while win.frame():          # ends the previous frame, polls input, begins a new one
            win.show(img, colormap="viridis")
            with em.ui.window("Controls"):
                dt = em.ui.slider("dt", dt, 0.0, 1.0)
        win.screenshot("out.png")

Headless (headless=True, or automatically without $DISPLAY) renders into a framebuffer object
on the OpenGL backend's context: the same API, nothing on screen.
"""
import numpy as np

from . import _ember as _C
from ._tensor import Tensor

_BUILT = bool(getattr(_C, "window_built", False))

if _BUILT:
    WindowError = _C.WindowError
else:  # the window runtime was not built; em.Window raises this on construction
    class WindowError(_C.Error, RuntimeError):
        """A window was misused: em.ui outside a frame, a closed window, a bad option or file."""


def _check_int(what, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise _C.TypeError(f"{what} must be an int, got {v!r}")


class Mouse:
    """The mouse in the current frame: x, y in window pixels (top-left origin), buttons
    (left, right, middle) as booleans, scroll (vertical wheel offset received this frame) and
    scroll_x (horizontal)."""

    __slots__ = ("x", "y", "buttons", "scroll", "scroll_x")

    def __init__(self, state):
        self.x, self.y, self.buttons, self.scroll, self.scroll_x = state

    @property
    def left(self):
        """Whether the left button is held."""
        return self.buttons[0]

    @property
    def right(self):
        """Whether the right button is held."""
        return self.buttons[1]

    @property
    def middle(self):
        """Whether the middle button is held."""
        return self.buttons[2]

    def __repr__(self):
        return f"Mouse(x={self.x:g}, y={self.y:g}, buttons={self.buttons}, scroll={self.scroll:g})"


class Window:
    """A window showing tensors and ImGui widgets. `headless=None` picks off-screen rendering
    exactly when there is no display; `frames=N` makes frame() return False after N frames."""

    def __init__(self, width=1280, height=720, title="ember", headless=None, vsync=True, frames=None,
                 resizable=True, overlay=True):
        if not _BUILT:
            raise _C.BackendError("this Ember was built without the window runtime (EMBER_WITH_WINDOW needs the "
                                  "OpenGL backend, Dear ImGui and libpng; see tools/bootstrap)")
        for name, v in (("width", width), ("height", height)):
            _check_int(f"em.Window {name}", v)
        if frames is not None and (isinstance(frames, bool) or not isinstance(frames, (int, np.integer))):
            raise _C.TypeError(f"em.Window frames must be an int or None, got {frames!r}")
        self._w = _C._Window(int(width), int(height), str(title), headless, bool(vsync), bool(resizable),
                             bool(overlay), None if frames is None else int(frames))
        self.title = str(title)

    # -- the loop ---------------------------------------------------------------------------
    def frame(self):
        """Ends the previous frame (draws it, captures it when recording, swaps), polls input and
        begins a new frame; False once the window should close (nothing is begun then)."""
        return self._w.frame()

    def show(self, img, colormap=None, filter="nearest", range=(0, 1)):
        """Shows `img` (em.Tensor or NumPy array shaped [H,W], [H,W,1], [H,W,3] or [H,W,4]; float32
        in 0..1 (see range=) or uint8; u32/i32 hold 0..255) letterboxed under the widgets.
        `colormap` applies to one channel (gray, viridis, magma, inferno, plasma, coolwarm);
        `filter` is "nearest" or "linear"; `range=(lo, hi)` maps f32 lo..hi to 0..1. Alpha is not shown."""
        if range is None:
            range = (0, 1)
        try:
            lo, hi = (float(r) for r in range)
        except (TypeError, ValueError):
            raise _C.TypeError(f"win.show range must be a pair of numbers (lo, hi), got {range!r}") from None
        cmap = "gray" if colormap is None else str(colormap)
        if isinstance(img, Tensor):
            self._w.show_tensor(img, cmap, str(filter), lo, hi)
            return
        if not isinstance(img, np.ndarray):
            try:
                img = np.asarray(img)
            except Exception as e:
                raise _C.TypeError(f"win.show: expected an em.Tensor or a NumPy array, got {type(img).__name__}") from e
            if img.dtype == object:
                raise _C.TypeError(f"win.show: expected an em.Tensor or a NumPy array, got {type(img).__name__}")
        self._w.show_array(img, cmap, str(filter), lo, hi)

    @property
    def last_upload(self):
        """How the last shown image reached the display: "device" (read from the OpenGL backend's
        buffer, no host copy), "host" (copied from host memory) or "" (nothing shown yet)."""
        return self._w.last_upload

    # -- state ------------------------------------------------------------------------------
    @property
    def headless(self):
        """Whether this window renders off-screen."""
        return self._w.headless

    @property
    def should_close(self):
        """Whether the window was closed (by the user or close()) or its frames= budget is spent."""
        return self._w.should_close

    @property
    def closed(self):
        """Whether close() was called."""
        return self._w.closed

    def close(self):
        """Destroys the window (stops recording); the last frame stays readable (pixels, screenshot)."""
        self._w.close()

    @property
    def size(self):
        """(width, height) of the framebuffer in pixels."""
        return tuple(self._w.size)

    @size.setter
    def size(self, wh):
        self.resize(*wh)

    def resize(self, width, height):
        """Resizes the window (or the off-screen framebuffer)."""
        _check_int("win.resize width", width)
        _check_int("win.resize height", height)
        self._w.resize(int(width), int(height))

    @property
    def vsync(self):
        """Whether buffer swaps wait for the display's refresh (windowed only)."""
        return self._w.vsync

    @vsync.setter
    def vsync(self, on):
        self._w.vsync = bool(on)

    @property
    def overlay(self):
        """Whether the frame-time / FPS text is drawn in the top-right corner."""
        return self._w.overlay

    @overlay.setter
    def overlay(self, on):
        self._w.overlay = bool(on)

    @property
    def frame_time(self):
        """Seconds between the last two frame() calls."""
        return self._w.frame_time

    @property
    def fps(self):
        """Frames per second averaged over the last 60 frames."""
        return self._w.fps

    @property
    def frame_count(self):
        """Frames drawn so far."""
        return self._w.frame_count

    # -- input ------------------------------------------------------------------------------
    @property
    def mouse(self):
        """The mouse in this frame (see em.Window.Mouse): x, y, buttons, scroll."""
        return Mouse(self._w.mouse)

    @property
    def mouse_image(self):
        """(row, col) of the mouse in the shown image's pixels (floats; int() gives the pixel), or
        None when the mouse is outside the image or nothing is shown."""
        return self._w.mouse_image

    def key_down(self, name):
        """Whether key `name` ("W", "SPACE", "LEFT", "ESCAPE", "F1", "SHIFT", ...) is held."""
        return self._w.key_down(str(name))

    def key_pressed(self, name):
        """Whether key `name` went down in the input this frame received."""
        return self._w.key_pressed(str(name))

    def inject_mouse(self, x, y, buttons=(False, False, False), scroll=0):
        """Queues a mouse move to (x, y) window pixels with `buttons` (left, right, middle) held and
        a wheel `scroll`, applied at the next frame() like real input (ImGui sees it too)."""
        b = tuple(bool(v) for v in buttons)
        if len(b) != 3:
            raise _C.TypeError(f"inject_mouse buttons must be (left, right, middle), got {buttons!r}")
        self._w.inject_mouse(float(x), float(y), b, float(scroll))

    def inject_key(self, name, down=True):
        """Queues a key press (down=True) or release, applied at the next frame() like real input."""
        self._w.inject_key(str(name), bool(down))

    def inject_text(self, text):
        """Queues typed characters (for em.ui.input_text), applied at the next frame()."""
        self._w.inject_text(str(text))

    # -- capture ----------------------------------------------------------------------------
    def pixels(self):
        """The last drawn frame as a uint8 NumPy array [H, W, 4], top row first."""
        return self._w.pixels()

    def screenshot(self, path):
        """Writes the last drawn frame to a PNG file."""
        self._w.screenshot(str(path))

    def record(self, path, fps=30):
        """Writes every following frame: into a directory (frame_00000.png, ...), to a printf-style
        pattern ("out/f_%04d.png"), or to an .mp4 when ffmpeg is on PATH (ember.WindowError if not)."""
        _check_int("win.record fps", fps)
        self._w.record(str(path), int(fps))

    def stop_recording(self):
        """Stops recording; returns the number of frames written."""
        return self._w.stop_recording()

    @property
    def recording(self):
        """Whether frames are being recorded."""
        return self._w.recording

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            self.close()
            return False
        try:  # the window is destroyed either way; the exception in flight is the one reported
            self.close()
        except _C.Error as e:
            if hasattr(exc, "add_note"):
                exc.add_note(f"while closing the window: {e}")
        return False

    def _repr_png_(self):
        """Jupyter: the last drawn frame as a PNG (RGB), or None before the first frame."""
        from ._display import encode_png
        try:
            px = self.pixels()
        except _C.Error:
            return None
        return encode_png(px[:, :, :3]) if px.size else None

    def __repr__(self):
        w, h = self.size
        mode = "headless" if self.headless else "window"
        return f"em.Window({w}x{h}, {self.title!r}, {mode}{', closed' if self.closed else ''})"


Window.Mouse = Mouse


def colormaps():
    """Names of the colormaps win.show accepts."""
    return list(_C.colormap_names()) if _BUILT else []


def colormap_color(name, t):
    """The (r, g, b) in 0..1 a colormap gives to t in [0, 1] (what win.show draws, before 8-bit rounding)."""
    return _C.colormap_color(str(name), float(t))
