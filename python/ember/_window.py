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
    """Mouse(state)

    The mouse in the current frame (``win.mouse``): x, y in window pixels (top-left origin),
    buttons (left, right, middle) as booleans, scroll (the vertical wheel offset received this
    frame) and scroll_x (horizontal).

    >>> win = em.Window(96, 64, headless=True)
    >>> win.inject_mouse(10, 20, buttons=(True, False, False))
    >>> win.frame()
    True
    >>> m = win.mouse
    >>> (m.x, m.y, m.left, m.right)
    (10.0, 20.0, True, False)
    >>> win.close()
    """

    __slots__ = ("x", "y", "buttons", "scroll", "scroll_x")

    def __init__(self, state):
        self.x, self.y, self.buttons, self.scroll, self.scroll_x = state

    @property
    def left(self):
        """Whether the left button is held.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.inject_mouse(5, 5, buttons=(True, False, False)); win.frame()
        True
        >>> win.mouse.left
        True
        >>> win.close()
        """
        return self.buttons[0]

    @property
    def right(self):
        """Whether the right button is held.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.inject_mouse(5, 5, buttons=(False, True, False)); win.frame()
        True
        >>> win.mouse.right
        True
        >>> win.close()
        """
        return self.buttons[1]

    @property
    def middle(self):
        """Whether the middle button is held.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.inject_mouse(5, 5, buttons=(False, False, True)); win.frame()
        True
        >>> win.mouse.middle
        True
        >>> win.close()
        """
        return self.buttons[2]

    def __repr__(self):
        return f"Mouse(x={self.x:g}, y={self.y:g}, buttons={self.buttons}, scroll={self.scroll:g})"


class Window:
    """Window(width=1280, height=720, title="ember", headless=None, vsync=True, frames=None, resizable=True, overlay=True)

    A window that shows tensors and Dear ImGui widgets (em.ui), reads the mouse and keyboard and
    captures frames. ``headless=True`` (or, with None, no display) renders into an off-screen
    framebuffer on the OpenGL backend's context: the same API, nothing on screen. ``frames=N``
    makes frame() return False after N frames. Use it as a context manager:
    ``with em.Window(800, 600, "fluid") as win: while win.frame(): win.show(img)``.

    >>> img = np.random.default_rng(0).random((32, 48, 3), np.float32)
    >>> with em.Window(48, 32, headless=True, frames=2, overlay=False) as win:
    ...     while win.frame():
    ...         win.show(img)
    ...     px = win.pixels()
    >>> px.shape, bool(np.abs(px[..., :3] / 255.0 - img).max() < 0.01)
    ((32, 48, 4), True)
    """

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
        """frame() -> bool

        Ends the previous frame (draws it, captures it when recording, swaps), polls input and begins a
        new frame; False once the window should close (then nothing is begun).

        >>> with em.Window(64, 64, headless=True, frames=3) as win:
        ...     n = 0
        ...     while win.frame():
        ...         n += 1
        >>> n
        3
        """
        return self._w.frame()

    def show(self, img, colormap=None, filter="nearest", range=(0, 1)):
        """show(img, colormap=None, filter="nearest", range=(0, 1)) -> None

        Shows `img` (an em.Tensor or NumPy array shaped [H, W], [H, W, 1], [H, W, 3] or [H, W, 4];
        float32 in 0..1 (see range=) or uint8; u32/i32 hold 0..255) letterboxed under the widgets.
        `colormap` applies to one channel (gray, viridis, magma, inferno, plasma, coolwarm); `filter` is
        "nearest" or "linear"; ``range=(lo, hi)`` maps f32 lo..hi to 0..1. Alpha is not shown.

        >>> field = np.random.default_rng(0).normal(size=(16, 16)).astype(np.float32)
        >>> with em.Window(16, 16, headless=True, overlay=False) as win:
        ...     win.frame()
        ...     win.show(field, colormap="viridis", range=(-3, 3))
        ...     win.frame()
        ...     px = win.pixels()
        True
        True
        >>> px.shape
        (16, 16, 4)
        """
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
        """How the last shown image reached the display: "device" (read from the OpenGL backend's buffer,
        no host copy), "host" (copied from host memory) or "" (nothing shown yet).

        >>> win = em.Window(96, 64, headless=True)
        >>> win.frame(); win.last_upload
        True
        ''
        >>> win.show(np.zeros((8, 8), np.float32)); win.last_upload
        'host'
        >>> win.close()
        """
        return self._w.last_upload

    # -- state ------------------------------------------------------------------------------
    @property
    def headless(self):
        """Whether this window renders off-screen.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.headless
        True
        >>> win.close()
        """
        return self._w.headless

    @property
    def should_close(self):
        """Whether the window was closed (by the user or close()) or its frames= budget is spent.

        >>> win = em.Window(32, 32, headless=True, frames=1)
        >>> win.frame(), win.should_close
        (True, False)
        >>> win.frame(), win.should_close
        (False, True)
        >>> win.close()
        """
        return self._w.should_close

    @property
    def closed(self):
        """Whether close() was called.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.closed
        False
        >>> win.close(); win.closed
        True
        """
        return self._w.closed

    def close(self):
        """close() -> None

        Destroys the window (stops recording); the last frame stays readable (pixels, screenshot).
        Leaving a ``with em.Window(...)`` block calls it.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.frame(), win.frame()
        (True, True)
        >>> win.close()
        >>> win.closed, win.pixels().shape
        (True, (64, 96, 4))
        """
        self._w.close()

    @property
    def size(self):
        """(width, height) of the framebuffer in pixels; assigning resizes (as resize()).

        >>> win = em.Window(96, 64, headless=True)
        >>> win.size
        (96, 64)
        >>> win.size = (40, 30); win.size
        (40, 30)
        >>> win.close()
        """
        return tuple(self._w.size)

    @size.setter
    def size(self, wh):
        self.resize(*wh)

    def resize(self, width, height):
        """resize(width, height) -> None

        Resizes the window (or the off-screen framebuffer).

        >>> win = em.Window(96, 64, headless=True)
        >>> win.resize(50, 20)
        >>> win.frame(), win.frame(), win.pixels().shape
        (True, True, (20, 50, 4))
        >>> win.close()
        """
        _check_int("win.resize width", width)
        _check_int("win.resize height", height)
        self._w.resize(int(width), int(height))

    @property
    def vsync(self):
        """Whether buffer swaps wait for the display's refresh (windowed only); assignable.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.vsync = False; win.vsync
        False
        >>> win.close()
        """
        return self._w.vsync

    @vsync.setter
    def vsync(self, on):
        self._w.vsync = bool(on)

    @property
    def overlay(self):
        """Whether the frame-time / FPS text is drawn in the top-right corner; assignable.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.overlay = False; win.overlay
        False
        >>> win.close()
        """
        return self._w.overlay

    @overlay.setter
    def overlay(self, on):
        self._w.overlay = bool(on)

    @property
    def frame_time(self):
        """Seconds between the last two frame() calls.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.frame(); win.frame(); win.frame_time >= 0.0
        True
        True
        True
        >>> win.close()
        """
        return self._w.frame_time

    @property
    def fps(self):
        """Frames per second, averaged over the last 60 frames.

        >>> win = em.Window(96, 64, headless=True)
        >>> for _ in range(3):
        ...     _ = win.frame()
        >>> win.fps >= 0.0
        True
        >>> win.close()
        """
        return self._w.fps

    @property
    def frame_count(self):
        """The number of frames drawn so far.

        >>> win = em.Window(96, 64, headless=True)
        >>> for _ in range(4):
        ...     _ = win.frame()
        >>> win.frame_count >= 3
        True
        >>> win.close()
        """
        return self._w.frame_count

    # -- input ------------------------------------------------------------------------------
    @property
    def mouse(self):
        """The mouse in this frame, an em.Window.Mouse: x, y, buttons, scroll.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.inject_mouse(30, 12, scroll=1); win.frame()
        True
        >>> win.mouse.x, win.mouse.y, win.mouse.scroll
        (30.0, 12.0, 1.0)
        >>> win.close()
        """
        return Mouse(self._w.mouse)

    @property
    def mouse_image(self):
        """(row, col) of the mouse in the shown image's pixels (floats; int() gives the pixel), or None
        when the mouse is outside the image or nothing is shown.

        >>> win = em.Window(64, 64, headless=True)
        >>> win.frame(); win.show(np.zeros((8, 8), np.float32))
        True
        >>> win.inject_mouse(36, 20); win.frame()
        True
        >>> r, c = win.mouse_image
        >>> int(r), int(c)
        (2, 4)
        >>> win.close()
        """
        return self._w.mouse_image

    def key_down(self, name):
        """key_down(name) -> bool

        Whether key `name` ("W", "SPACE", "LEFT", "ESCAPE", "F1", "SHIFT", ...) is held.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.inject_key("W"); win.frame()
        True
        >>> win.key_down("W"), win.key_down("S")
        (True, False)
        >>> win.close()
        """
        return self._w.key_down(str(name))

    def key_pressed(self, name):
        """key_pressed(name) -> bool

        Whether key `name` went down in the input this frame received (True for one frame per press).

        >>> win = em.Window(96, 64, headless=True)
        >>> win.inject_key("SPACE"); win.frame()
        True
        >>> win.key_pressed("SPACE")
        True
        >>> win.frame(); win.key_pressed("SPACE")
        True
        False
        >>> win.close()
        """
        return self._w.key_pressed(str(name))

    def inject_mouse(self, x, y, buttons=(False, False, False), scroll=0):
        """inject_mouse(x, y, buttons=(False, False, False), scroll=0) -> None

        Queues a mouse move to (x, y) window pixels with `buttons` (left, right, middle) held and a
        wheel `scroll`, applied at the next frame() like real input (ImGui sees it too): for scripted
        tests and demos.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.inject_mouse(7, 9); win.frame()
        True
        >>> (win.mouse.x, win.mouse.y)
        (7.0, 9.0)
        >>> win.close()
        """
        b = tuple(bool(v) for v in buttons)
        if len(b) != 3:
            raise _C.TypeError(f"inject_mouse buttons must be (left, right, middle), got {buttons!r}")
        self._w.inject_mouse(float(x), float(y), b, float(scroll))

    def inject_key(self, name, down=True):
        """inject_key(name, down=True) -> None

        Queues a key press (down=True) or release, applied at the next frame() like real input.

        >>> win = em.Window(96, 64, headless=True)
        >>> win.inject_key("A"); win.frame()
        True
        >>> win.inject_key("A", down=False); win.frame()
        True
        >>> win.key_down("A")
        False
        >>> win.close()
        """
        self._w.inject_key(str(name), bool(down))

    def inject_text(self, text):
        """inject_text(text) -> None

        Queues typed characters (for em.ui.input_text), applied at the next frame().

        >>> win = em.Window(96, 64, headless=True)
        >>> name = ""
        >>> for _ in range(3):
        ...     _ = win.frame()
        ...     with em.ui.window("w", pos=(0, 0), size=(96, 64)):
        ...         name = em.ui.input_text("name", name)
        ...         x, y, w, h = em.ui.item_rect()
        ...     win.inject_mouse(x + 5, y + h / 2, buttons=(True, False, False))
        >>> win.inject_text("ok"); _ = win.frame()
        >>> with em.ui.window("w"):
        ...     name = em.ui.input_text("name", name)
        >>> name
        'ok'
        >>> win.close()
        """
        self._w.inject_text(str(text))

    # -- capture ----------------------------------------------------------------------------
    def pixels(self):
        """pixels() -> numpy.ndarray

        The last drawn frame as a uint8 NumPy array [H, W, 4], top row first.

        >>> with em.Window(8, 4, headless=True, overlay=False) as win:
        ...     win.frame(); win.show(np.ones((4, 8, 3), np.float32)); win.frame()
        ...     px = win.pixels()
        True
        True
        >>> px.shape, int(px[..., :3].min())
        ((4, 8, 4), 255)
        """
        return self._w.pixels()

    def screenshot(self, path):
        """screenshot(path) -> None

        Writes the last drawn frame to a PNG file.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "frame.png")
        >>> with em.Window(32, 16, headless=True) as win:
        ...     win.frame(); win.frame(); win.screenshot(path)
        True
        True
        >>> open(path, "rb").read(8)[1:4]
        b'PNG'
        """
        self._w.screenshot(str(path))

    def record(self, path, fps=30):
        """record(path, fps=30) -> None

        Writes every following frame: into a directory (frame_00000.png, ...), to a printf-style
        pattern ("out/f_%04d.png"), or to an .mp4 when ffmpeg is on PATH (ember.WindowError if not).

        >>> import os, tempfile
        >>> out = tempfile.mkdtemp()
        >>> with em.Window(16, 16, headless=True) as win:
        ...     win.record(out)
        ...     for _ in range(3):
        ...         _ = win.frame()
        ...     n = win.stop_recording()
        >>> n == len(os.listdir(out)) > 0
        True
        """
        _check_int("win.record fps", fps)
        self._w.record(str(path), int(fps))

    def stop_recording(self):
        """stop_recording() -> int

        Stops recording; returns the number of frames written.

        >>> import tempfile
        >>> with em.Window(16, 16, headless=True) as win:
        ...     win.record(tempfile.mkdtemp())
        ...     _ = win.frame(); _ = win.frame()
        ...     n = win.stop_recording()
        ...     rec = win.recording
        >>> n >= 1, rec
        (True, False)
        """
        return self._w.stop_recording()

    @property
    def recording(self):
        """Whether frames are being recorded.

        >>> import tempfile
        >>> win = em.Window(96, 64, headless=True)
        >>> win.recording
        False
        >>> win.record(tempfile.mkdtemp()); win.recording
        True
        >>> _ = win.stop_recording(); win.close()
        """
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
