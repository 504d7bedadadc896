"""The window runtime (em.Window, em.ui): show() of f32 and u8 images in every shape, colormap and
filter checked pixel by pixel against colours computed here; the OpenGL backend's device path
(no host copy) against the host path; ImGui widgets against a golden PNG; scripted mouse and key
input (a slider dragged, key presses, mouse_image); several windows at once; recording; errors.
Headless windows render on the OpenGL backend's context (EGL surfaceless here); windowed ones
run on Xvfb (the `display` fixture starts one when $DISPLAY is unset).

Goldens live in tests/golden/; EMBER_UPDATE_GOLDEN=1 rewrites them. A golden matches when at
most GOLDEN_MAX_FRACTION of the pixels differ by more than GOLDEN_TOLERANCE in some channel.
Numeric checks allow COLOR_TOLERANCE levels (8-bit rounding of float colours)."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember as em
from conftest import _unavailable
from png_io import read_png_rgba as read_png

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_TOLERANCE = 24         # per channel, 0..255
GOLDEN_MAX_FRACTION = 0.01    # of pixels allowed beyond the tolerance
COLOR_TOLERANCE = 2
BG = 26                       # the letterbox / background grey (0.1 * 255)
BUILD_PYTHON = str(Path(em.__file__).resolve().parents[1])


@pytest.fixture(autouse=True)
def _need_opengl():
    reason = _unavailable("opengl")
    if reason:
        pytest.skip(f"the window runtime needs OpenGL: {reason}")
    if not em._ember.window_built:
        pytest.skip("this Ember was built without the window runtime")


# -- helpers -------------------------------------------------------------------------------

def check_golden(win, name):
    """Compares the window's last frame with tests/golden/<name> (rewritten with EMBER_UPDATE_GOLDEN=1)."""
    path = GOLDEN / name
    if os.environ.get("EMBER_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        win.screenshot(path)
    assert path.exists(), f"missing golden {path}; run with EMBER_UPDATE_GOLDEN=1 to create it"
    got = win.pixels()
    want = read_png(path)
    assert got.shape == want.shape, (got.shape, want.shape)
    bad = (np.abs(got.astype(int) - want.astype(int)) > GOLDEN_TOLERANCE).any(axis=2)
    frac = bad.mean()
    if frac > GOLDEN_MAX_FRACTION:
        out = Path("/tmp") / f"ember-golden-mismatch-{name}"
        win.screenshot(out)
        pytest.fail(f"{name}: {frac:.2%} of pixels differ by more than {GOLDEN_TOLERANCE} "
                    f"(allowed {GOLDEN_MAX_FRACTION:.0%}); this run's frame is in {out}")


def draw(win, img, **kw):
    """Shows img for one frame and returns that frame's pixels."""
    assert win.frame()
    win.show(img, **kw)
    assert win.frame()
    return win.pixels()


def expected_pixels(img, win_h, win_w, colormap="gray", filter="nearest", range=(0, 1)):
    """What show() should draw for img filling a win_h x win_w framebuffer exactly (same aspect)."""
    a = np.asarray(img)
    is_u8 = a.dtype == np.uint8
    vals = a.astype(np.float64) / 255.0 if is_u8 else a.astype(np.float64)
    if vals.ndim == 2:
        vals = vals[:, :, None]
    H, W, C = vals.shape
    ys = (np.arange(win_h) + 0.5) / win_h * H
    xs = (np.arange(win_w) + 0.5) / win_w * W
    if filter == "nearest":
        iy = np.clip(np.floor(ys).astype(int), 0, H - 1)
        ix = np.clip(np.floor(xs).astype(int), 0, W - 1)
        v = vals[iy][:, ix]
    else:
        gy, gx = ys - 0.5, xs - 0.5
        y0, x0 = np.floor(gy).astype(int), np.floor(gx).astype(int)
        ty, tx = (gy - y0)[:, None, None], (gx - x0)[None, :, None]
        cy = lambda i: np.clip(i, 0, H - 1)  # noqa: E731
        cx = lambda i: np.clip(i, 0, W - 1)  # noqa: E731
        v00, v01 = vals[cy(y0)][:, cx(x0)], vals[cy(y0)][:, cx(x0 + 1)]
        v10, v11 = vals[cy(y0 + 1)][:, cx(x0)], vals[cy(y0 + 1)][:, cx(x0 + 1)]
        v = (v00 * (1 - tx) + v01 * tx) * (1 - ty) + (v10 * (1 - tx) + v11 * tx) * ty
    if not is_u8:
        v = (v - range[0]) / (range[1] - range[0])
    v = np.clip(v, 0, 1)
    if C == 1:
        flat = v[:, :, 0].ravel()
        rgb = np.array([em._window.colormap_color(colormap, float(t)) for t in flat]).reshape(win_h, win_w, 3)
    else:
        rgb = v[:, :, :3]
    return np.round(rgb * 255).astype(int)


def assert_close(got, want, what):
    diff = np.abs(got[:, :, :3].astype(int) - want)
    assert diff.max() <= COLOR_TOLERANCE, f"{what}: max colour error {diff.max()} at {np.unravel_index(diff.argmax(), diff.shape)}"
    assert (got[:, :, 3] == 255).all()


@pytest.fixture(scope="module")
def hwin():
    """One headless 128x96 window without the overlay, shared by the numeric show() tests."""
    with em.Window(128, 96, "numeric", headless=True, overlay=False) as w:
        yield w


SHAPES = [(48, 64), (48, 64, 1), (48, 64, 3), (48, 64, 4)]
COLORMAPS = ["gray", "viridis", "magma", "inferno", "plasma", "coolwarm"]


def make_image(shape, dtype, rng):
    if dtype == "u8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.uniform(-0.2, 1.2, shape).astype(np.float32)


# -- show(): numeric checks --------------------------------------------------------------------

@pytest.mark.parametrize("filter", ["nearest", "linear"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ["f32", "u8"])
def test_show_every_shape_and_filter(hwin, dtype, shape, filter, rng):
    img = make_image(shape, dtype, rng)
    cmaps = COLORMAPS if len(shape) == 2 or shape[2] == 1 else ["viridis"]  # ignored for colour images
    for cmap in cmaps:
        got = draw(hwin, img, colormap=cmap, filter=filter)
        assert hwin.last_upload == "host"
        assert_close(got, expected_pixels(img, 96, 128, cmap, filter), f"{dtype} {shape} {cmap} {filter}")


def test_show_range_and_em_tensor(hwin, rng):
    img = rng.uniform(-1, 3, (48, 64)).astype(np.float32)
    got = draw(hwin, em.tensor(img), colormap="viridis", range=(-1, 3))
    assert hwin.last_upload == "host"  # a CPU tensor is uploaded
    assert_close(got, expected_pixels(img, 96, 128, "viridis", "nearest", (-1, 3)), "range=(-1, 3)")
    # u32 tensors hold 0..255 per channel, like uint8 arrays
    u8 = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    a = draw(hwin, em.tensor(u8.astype(np.uint32)))
    b = draw(hwin, u8)
    assert np.array_equal(a, b)


def test_colormap_endpoints():
    assert em._window.colormap_color("gray", 0.0) == (0.0, 0.0, 0.0)
    assert em._window.colormap_color("gray", 2.0) == (1.0, 1.0, 1.0)
    r, g, b = em._window.colormap_color("viridis", 0.0)
    assert (round(r * 255), round(g * 255), round(b * 255)) == (0x44, 0x01, 0x54)
    r, g, b = em._window.colormap_color("viridis", 1.0)
    assert (round(r * 255), round(g * 255), round(b * 255)) == (0xfd, 0xe7, 0x25)
    assert set(COLORMAPS) <= set(em._window.colormaps())


def test_letterbox_keeps_aspect():
    with em.Window(100, 100, "box", headless=True, overlay=False) as win:
        img = np.ones((10, 20), np.float32)          # 2:1 -> 100x50, centred
        px = draw(win, img)
        assert (px[:25, :, :3] == BG).all() and (px[75:, :, :3] == BG).all()
        assert (px[25:75, :, :3] == 255).all()
        win.resize(200, 100)                          # now it fills the width at 2x
        px = draw(win, img)
        assert px.shape == (100, 200, 4)
        assert (px[:, :, :3] == 255).all()
        win.resize(300, 100)                          # 200x100 in the middle
        px = draw(win, img)
        assert (px[:, :50, :3] == BG).all() and (px[:, 250:, :3] == BG).all() and (px[:, 50:250, :3] == 255).all()
        assert win.size == (300, 100)


# -- the OpenGL backend: device path -----------------------------------------------------------

_SCALE = None


def _scaled_program():
    global _SCALE
    if _SCALE is None:
        @em.compile
        def scale(X: em.f32["H", "W", "C"], s: em.f32):
            return X * s
        _SCALE = scale
    return _SCALE


def test_opengl_tensor_shown_from_device_memory(rng):
    em.init("opengl")
    img = rng.uniform(0, 1, (48, 64, 3)).astype(np.float32)
    t = _scaled_program()(img, 0.5)
    with em.Window(128, 96, "gl", headless=True, overlay=False) as win:
        for filt in ("nearest", "linear"):
            dev = draw(win, t, filter=filt)
            assert win.last_upload == "device"   # read straight from the backend's GL buffer
            host = draw(win, t.numpy(), filter=filt)
            assert win.last_upload == "host"
            assert np.array_equal(dev, host)
            assert_close(dev, expected_pixels(img * 0.5, 96, 128, filter=filt), f"device {filt}")
        # u32 tensors (0..255) are read from the storage buffer itself by the display shader
        @em.compile
        def clamp255(X: em.u32["H", "W", "C"]):
            return em.min(X, 255)
        u8 = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
        u = clamp255(u8.astype(np.uint32))
        for filt in ("nearest", "linear"):
            dev = draw(win, u, filter=filt)
            assert win.last_upload == "device"
            assert_close(dev, expected_pixels(u8, 96, 128, filter=filt), f"device u32 {filt}")
            assert np.array_equal(dev, draw(win, u.numpy(), filter=filt))   # host copy of the same words
        # a single-channel device tensor through a colormap
        g = _scaled_program()(img[:, :, :1].copy(), 1.0)
        dev = draw(win, g, colormap="magma")
        assert win.last_upload == "device"
        assert np.array_equal(dev, draw(win, g.numpy(), colormap="magma"))


_WINDOWED_DEVICE = """
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np, ember as em
    em.init("opengl")
    @em.compile
    def scale(X: em.f32["H", "W"], s: em.f32):
        return X * s
    t = scale(np.linspace(0, 1, 48 * 64, dtype=np.float32).reshape(48, 64), 1.0)
    out = []
    with em.Window(128, 96, "gl", headless=False, overlay=False, vsync=False) as win:
        for img in (t, t.numpy()):
            win.frame(); win.show(img, colormap="viridis"); win.frame()
            out.append((win.last_upload, win.pixels()))
        print("headless", win.headless, em._ember.opengl_info()["context"])
    print("uploads", out[0][0], out[1][0])
    print("equal", bool(np.array_equal(out[0][1], out[1][1])))
"""


def test_opengl_device_path_in_a_window(display):
    # A fresh process, so the backend's context is a hidden GLFW window the visible one shares.
    env = dict(os.environ, DISPLAY=display)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_WINDOWED_DEVICE), BUILD_PYTHON], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "headless False glfw" in proc.stdout, proc.stdout
    assert "uploads device host" in proc.stdout, proc.stdout
    assert "equal True" in proc.stdout, proc.stdout


def test_vulkan_tensor_is_uploaded(rng):
    reason = _unavailable("vulkan")
    if reason:
        pytest.skip(f"vulkan unavailable: {reason}")
    em.init("vulkan")
    img = rng.uniform(0, 1, (48, 64)).astype(np.float32)

    @em.compile
    def scale(X: em.f32["H", "W"], s: em.f32):
        return X * s
    t = scale(img, 1.0)
    with em.Window(128, 96, "vk", headless=True, overlay=False) as win:
        px = draw(win, t)
        assert win.last_upload == "host"  # no Vulkan-OpenGL interop: copied from Vulkan's mapped memory
        assert_close(px, expected_pixels(img, 96, 128), "vulkan tensor")


# -- ImGui widgets ----------------------------------------------------------------------------

def _widgets_frame(state):
    with em.ui.window("Controls", pos=(10, 10), size=(300, 300)):
        em.ui.text("Ember widgets")
        state["dt"] = em.ui.slider("dt", state["dt"], 0.0, 1.0)
        state["n"] = em.ui.slider("n", state["n"], 0, 10)
        state["on"] = em.ui.checkbox("enabled", state["on"])
        em.ui.button("reset")
        state["mode"] = em.ui.combo("mode", state["mode"], ["smoke", "fire", "water"])
        state["pick"] = em.ui.radio("pick", state["pick"], ["a", "b", "c"])
        state["col"] = em.ui.color("tint", state["col"])
        state["x"] = em.ui.input("x", state["x"])
        state["d"] = em.ui.drag("drag", state["d"])
        em.ui.separator()
        if em.ui.collapsing_header("Curves", default_open=True):
            em.ui.plot("loss", np.sin(np.linspace(0, 6, 50)))
            em.ui.histogram("hist", [1, 3, 2, 5, 4])


def _widgets(win):
    state = dict(dt=0.25, n=3, on=True, mode="fire", pick=1, col=(0.9, 0.4, 0.1), x=2.5, d=1.0)
    win.frame()
    win.show(np.linspace(0, 1, 32 * 32, dtype=np.float32).reshape(32, 32), colormap="inferno")
    for _ in range(4):  # ImGui sizes auto-fitted items over the first frames
        _widgets_frame(state)
        win.frame()
    _widgets_frame(state)
    assert win.frame()
    return state


def test_ui_widgets_golden_headless():
    with em.Window(320, 320, "widgets", headless=True, overlay=False) as win:
        state = _widgets(win)
        assert state["mode"] == "fire" and state["pick"] == 1 and state["col"] == pytest.approx((0.9, 0.4, 0.1))
        check_golden(win, "ui_widgets.png")


def test_ui_widgets_golden_windowed(display):
    with em.Window(320, 320, "widgets", headless=False, overlay=False, vsync=False) as win:
        assert not win.headless
        _widgets(win)
        check_golden(win, "ui_widgets.png")


def test_overlay_draws_frame_time():
    with em.Window(200, 100, "overlay", headless=True, overlay=True) as win:
        for _ in range(3):
            win.frame()
        win.frame()
        px = win.pixels()
        corner = px[5:30, 100:195, :3]
        assert (corner != BG).any(), "the FPS overlay should draw text in the top-right corner"
        assert win.fps > 0 and win.frame_time > 0
        win.overlay = False
        win.frame()
        assert (win.pixels()[:, :, :3] == BG).all()


# -- scripted input ---------------------------------------------------------------------------

def _slider_script(headless):
    v = 0.5
    rect = None
    with em.Window(400, 200, "drag", headless=headless, overlay=False, vsync=False) as win:
        def frame():
            nonlocal v, rect
            assert win.frame()
            with em.ui.window("S", pos=(0, 0), size=(380, 100)):
                v = em.ui.slider("value", v, 0.0, 1.0)
                rect = em.ui.item_rect()
        frame()
        frame()
        x, y, w, h = rect
        assert w > 50 and h > 5, rect
        cy = y + h / 2
        win.inject_mouse(x + 0.1 * w, cy)
        frame()
        win.inject_mouse(x + 0.1 * w, cy, buttons=(True, False, False))
        frame()
        frame()
        low = v
        for f in (0.3, 0.6, 0.95):
            win.inject_mouse(x + f * w, cy, buttons=(True, False, False))
            frame()
        frame()
        high = v
        win.inject_mouse(x + 0.95 * w, cy)
        frame()
        frame()
    return low, high


@pytest.mark.parametrize("mode", ["headless", "windowed"])
def test_injected_drag_moves_a_slider(mode, request):
    if mode == "windowed":
        request.getfixturevalue("display")
    low, high = _slider_script(mode == "headless")
    assert low < 0.2, low
    assert high > 0.85, high


def test_key_presses_and_state():
    with em.Window(64, 64, "keys", headless=True) as win:
        win.frame()
        assert not win.key_down("SPACE") and not win.key_pressed("space")
        win.inject_key("SPACE")
        win.inject_key("W")
        win.frame()
        assert win.key_pressed("SPACE") and win.key_down("SPACE") and win.key_down("w")
        win.frame()
        assert win.key_down("SPACE") and not win.key_pressed("SPACE")
        win.inject_key("SPACE", down=False)
        win.frame()
        assert not win.key_down("SPACE") and win.key_down("W")
        # a press and release queued before one frame: seen down one frame, up the next
        win.inject_key("A")
        win.inject_key("A", down=False)
        win.frame()
        assert win.key_pressed("A") and win.key_down("A")
        win.frame()
        assert not win.key_down("A") and not win.key_pressed("A")
        win.inject_key("LEFT_SHIFT")
        win.frame()
        assert win.key_down("SHIFT")


def test_text_input_receives_injected_text():
    with em.Window(300, 120, "text", headless=True, overlay=False) as win:
        s, rect = "", None
        for step in range(8):
            win.frame()
            with em.ui.window("T", pos=(0, 0), size=(290, 100)):
                s = em.ui.input_text("name", s)
                rect = em.ui.item_rect()
            if step == 1:
                win.inject_mouse(rect[0] + 10, rect[1] + rect[3] / 2, buttons=(True, False, False))
            if step == 2:
                win.inject_mouse(rect[0] + 10, rect[1] + rect[3] / 2)
            if step == 4:
                win.inject_text("ember")
        assert s == "ember"


def test_mouse_state_and_image_mapping():
    with em.Window(200, 100, "mouse", headless=True, overlay=False) as win:
        win.frame()
        assert win.mouse_image is None           # nothing shown yet
        win.show(np.zeros((50, 50), np.float32))  # 2x scale, columns 50..150
        win.inject_mouse(50 + 2 * 10 + 1, 2 * 20 + 1, buttons=(False, True, False), scroll=1.5)
        win.frame()
        m = win.mouse
        assert (m.x, m.y) == (71, 41) and m.buttons == (False, True, False) and m.scroll == 1.5
        assert win.mouse_image == pytest.approx((20.5, 10.5))
        win.inject_mouse(10, 50)
        win.frame()
        assert win.mouse_image is None and win.mouse.scroll == 0 and win.mouse.buttons == (False, False, False)
        win.inject_mouse(149.9, 99.9)
        win.frame()
        r, c = win.mouse_image
        assert int(r) == 49 and int(c) == 49


# -- several windows, frames=N, closing --------------------------------------------------------

def test_several_windows_at_once(display):
    red = np.zeros((8, 8, 3), np.float32)
    red[..., 0] = 1
    blue = np.zeros((8, 8, 4), np.uint8)
    blue[..., 2] = 255
    with em.Window(64, 64, "a", headless=True, overlay=False) as a, \
            em.Window(64, 64, "b", headless=True, overlay=False) as b, \
            em.Window(64, 64, "c", headless=False, overlay=False, vsync=False) as c:
        for i in range(3):
            for name, w, img in (("a", a, red), ("b", b, blue), ("c", c, red * 0.5)):
                assert w.frame()
                w.show(img)
                with em.ui.window(f"win {name}", pos=(0, 0)):
                    em.ui.text(name)
                    em.ui.plot("t", float(i), history=10)
        for w in (a, b, c):
            w.frame()
        pa, pb, pc = a.pixels(), b.pixels(), c.pixels()
        assert tuple(pa[60, 60, :3]) == (255, 0, 0)
        assert tuple(pb[60, 60, :3]) == (0, 0, 255)
        assert abs(int(pc[60, 60, 0]) - 128) <= 1 and pc[60, 60, 1] == 0
        assert not c.headless and a.headless


def test_frames_budget_and_close():
    with em.Window(32, 32, "n", headless=True, frames=5) as win:
        n = 0
        while win.frame():
            n += 1
        assert n == 5 and win.should_close and win.frame_count == 5
    assert win.closed
    assert win.pixels().shape == (32, 32, 4)   # the last frame survives close()
    with em.Window(32, 32, "c", headless=True) as win:
        n = 0
        while win.frame():
            n += 1
            if n == 3:
                win.close()                  # closed inside the loop: the loop ends
        assert n == 3 and win.should_close and not win.frame()


def test_vsync_toggle(display):
    with em.Window(64, 64, "v", headless=False, vsync=True) as win:
        assert win.vsync
        win.vsync = False
        assert not win.vsync
        for _ in range(3):
            assert win.frame()


# -- capture ----------------------------------------------------------------------------------

def test_screenshot_and_pixels_agree(tmp_path, rng):
    img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    with em.Window(128, 96, "shot", headless=True, overlay=False) as win:
        px = draw(win, img)
        win.screenshot(tmp_path / "shot.png")
    assert np.array_equal(read_png(tmp_path / "shot.png"), px)
    assert_close(px, expected_pixels(img, 96, 128), "screenshot")


def test_record_png_sequence(tmp_path):
    with em.Window(40, 30, "rec", headless=True, overlay=False, frames=7) as win:
        win.record(tmp_path / "seq")
        i = 0
        while win.frame():
            win.show(np.full((3, 4), i / 6, np.float32))
            i += 1
        assert win.stop_recording() == 7
        last = win.pixels()
    files = sorted((tmp_path / "seq").glob("frame_*.png"))
    # 7 frames ended while recording; frame k shows the image of loop step k
    assert [f.name for f in files] == [f"frame_{k:05d}.png" for k in range(7)]
    assert np.array_equal(read_png(files[-1]), last)
    assert read_png(files[2])[15, 20, 0] == round(2 / 6 * 255)
    with em.Window(40, 30, "rec2", headless=True, frames=3) as win:
        win.record(str(tmp_path / "pat" / "f_%03d.png"))
        while win.frame():
            pass
    assert sorted(p.name for p in (tmp_path / "pat").iterdir()) == ["f_000.png", "f_001.png", "f_002.png"]


def test_record_mp4(tmp_path):
    with em.Window(64, 48, "mp4", headless=True, frames=5) as win:
        if shutil.which("ffmpeg") is None:
            with pytest.raises(em.WindowError, match="ffmpeg"):
                win.record(tmp_path / "out.mp4")
            return
        win.record(tmp_path / "out.mp4")
        while win.frame():
            win.show(np.zeros((4, 4), np.float32))
    assert (tmp_path / "out.mp4").stat().st_size > 0


# -- errors -----------------------------------------------------------------------------------

def test_show_errors_name_expected_and_actual():
    with em.Window(32, 32, "err", headless=True) as win:
        win.frame()
        with pytest.raises(em.ShapeError, match=r"\[H, W, 4\].*got shape \(4, 5, 2\)"):
            win.show(np.zeros((4, 5, 2), np.float32))
        with pytest.raises(em.ShapeError, match=r"got shape \(4,\)"):
            win.show(np.zeros(4, np.float32))
        with pytest.raises(em.ShapeError, match="at least one pixel"):
            win.show(np.zeros((0, 5), np.float32))
        with pytest.raises(em.TypeError, match="float32.*uint8.*got float64"):
            win.show(np.zeros((4, 5)))
        with pytest.raises(em.TypeError, match="got int16"):
            win.show(np.zeros((4, 5), np.int16))
        with pytest.raises(em.TypeError, match="got bool"):
            win.show(em.tensor(np.zeros((4, 5), bool)))
        with pytest.raises(em.WindowError, match="unknown colormap \"jet\""):
            win.show(np.zeros((4, 5), np.float32), colormap="jet")
        with pytest.raises(em.WindowError, match="filter"):
            win.show(np.zeros((4, 5), np.float32), filter="cubic")
        with pytest.raises(em.WindowError, match="range"):
            win.show(np.zeros((4, 5), np.float32), range=(1, 1))
        with pytest.raises(em.WindowError, match="unknown key name"):
            win.key_down("NOPE")
        with pytest.raises(em.WindowError, match="matching"):
            em.ui.end()
        with pytest.raises(em.WindowError, match="bounds"):
            em.ui.slider("huge", 1.0, 0.0, 1e39)
        with pytest.raises(em.WindowError, match="bounds"):
            em.ui.slider("huge int", 1, 0, 2**31 - 1)
        assert issubclass(em.WindowError, em.Error)
        assert isinstance(em.ShapeError("x"), ValueError) and isinstance(em.TypeError("x"), TypeError)


def test_ui_outside_a_frame_raises():
    with pytest.raises(em.WindowError, match="outside a frame"):
        em.ui.slider("x", 0.5, 0.0, 1.0)
    with em.Window(32, 32, "ui", headless=True, frames=1) as win:
        with pytest.raises(em.WindowError, match="no frame .* drawn yet"):
            win.pixels()
        while win.frame():
            em.ui.text("inside is fine")
        with pytest.raises(em.WindowError, match="em.ui.button called outside a frame"):
            em.ui.button("late")
    with pytest.raises(em.WindowError, match="closed window"):
        win.show(np.zeros((2, 2), np.float32))
    with pytest.raises(em.WindowError, match="outside a frame"):
        with em.ui.window("w"):
            pass


def test_unclosed_ui_window_is_closed_at_frame_end():
    with em.Window(64, 64, "open", headless=True) as win:
        win.frame()
        em.ui.begin("left open")
        em.ui.text("x")
        assert win.frame()  # no ImGui abort: the frame closes it
        with pytest.raises(ValueError):
            with em.ui.window("raises inside"):
                raise ValueError("user code")
        assert win.frame()


# -- review: misuse that must raise, never crash or convert --------------------------------------

def _run_script(src, **env):
    """Runs src in a fresh process (an ImGui assert aborts the process, not just the test)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(src), BUILD_PYTHON],
                          env=dict(os.environ, **env), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_close_inside_a_ui_window_does_not_abort():
    # A "Quit" button inside em.ui.window closes the window with that ImGui window still open;
    # a window garbage-collected mid-frame with an em.ui.begin open is the same case.
    out = _run_script("""
        import gc, sys
        sys.path.insert(0, sys.argv[1])
        import ember as em
        with em.Window(64, 64, "quit", headless=True) as win:
            n = 0
            while win.frame():
                n += 1
                with em.ui.window("Controls"):
                    em.ui.text("x")
                    if n == 2:
                        win.close()
        print("closed", win.closed, n)
        w = em.Window(64, 64, "gc", headless=True)
        w.frame()
        em.ui.begin("left open")
        del w
        gc.collect()
        print("collected")
    """)
    assert "closed True 2" in out and "collected" in out, out


def test_show_rejects_non_native_byte_order():
    with em.Window(32, 32, "endian", headless=True) as win:
        win.frame()
        with pytest.raises(em.TypeError, match=r"byte order.*>f4"):
            win.show(np.ones((4, 5), ">f4"))
        with pytest.raises(em.TypeError, match=r"byte order.*>u4"):
            win.show(np.ones((4, 5), ">u4"))
        win.show(np.ones((4, 5), "<f4").T)        # native, non-contiguous: shown (a layout copy only)
        win.show(np.ones((4, 5), ">u1"))          # one byte: no byte order


def test_int_arguments_are_not_truncated(tmp_path):
    with em.Window(32, 32, "ints", headless=True) as win:
        with pytest.raises(em.TypeError, match=r"width must be an int, got 100\.7"):
            win.resize(100.7, 50)
        with pytest.raises(em.TypeError, match=r"height must be an int, got '50'"):
            win.size = (100, "50")
        assert win.size == (32, 32)
        with pytest.raises(em.TypeError, match=r"fps must be an int, got 29\.97"):
            win.record(tmp_path / "rec", fps=29.97)
        assert not win.recording
        win.resize(np.int64(40), 20)
        assert win.size == (40, 20)


def test_ui_counts_are_checked_by_ember():
    with em.Window(64, 64, "counts", headless=True) as win:
        win.frame()
        with pytest.raises(em.WindowError, match="history must be at least 1, got -3"):
            em.ui.plot("p", 1.0, history=-3)
        with pytest.raises(em.WindowError, match="history must be at least 1, got 0"):
            em.ui.histogram("h", 1.0, history=0)
        with pytest.raises(em.WindowError, match="max_length must be at least 0, got -1"):
            em.ui.input_text("t", "abc", max_length=-1)
        assert win.frame()


def _fake_ffmpeg(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "ffmpeg"
    exe.write_text("#!/bin/sh\nexit 3\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_failed_ffmpeg_still_closes_the_window(tmp_path, monkeypatch):
    _fake_ffmpeg(tmp_path, monkeypatch)
    with pytest.raises(em.WindowError, match=r"ffmpeg failed \(exit status 3\)"):
        with em.Window(64, 48, "mp4", headless=True) as win:
            win.record(tmp_path / "out.mp4")
    assert win.closed and not win.recording
    # with an exception in flight, __exit__ destroys the window and lets that exception through
    with pytest.raises(KeyError, match="user"):
        with em.Window(64, 48, "mp4", headless=True) as win:
            win.record(tmp_path / "out.mp4")
            raise KeyError("user")
    assert win.closed


def test_press_then_move_in_one_frame_presses_where_the_button_went_down():
    # ImGui reads the mouse once per frame: a press and the moves after it, queued before one
    # frame (a fast drag, or a slow frame), must show the press at its own position first.
    v, rect = 0.5, None
    with em.Window(400, 200, "fastdrag", headless=True, overlay=False) as win:
        def frame():
            nonlocal v, rect
            assert win.frame()
            with em.ui.window("S", pos=(0, 0), size=(300, 100)):
                v = em.ui.slider("value", v, 0.0, 1.0)
                rect = em.ui.item_rect()
        for _ in range(3):
            frame()
        x, y, w, h = rect
        win.inject_mouse(x + 0.1 * w, y + h / 2)
        frame()
        win.inject_mouse(x + 0.1 * w, y + h / 2, buttons=(True, False, False))   # on the slider
        win.inject_mouse(360, y + h / 2, buttons=(True, False, False))           # dragged past its end
        frame()
        assert (win.mouse.x, win.mouse.buttons[0]) == (pytest.approx(x + 0.1 * w), True)
        frame()
        assert win.mouse.x == 360
        win.inject_mouse(360, y + h / 2)
        frame()
        frame()
    assert v == pytest.approx(1.0), v
