"""The interactive examples (examples/demo_*.py).

Their Ember programs against NumPy on random inputs, on every backend (the splat renderer's
atomic_min depth buffer and the Mandelbrot escape counts exactly; images and fields within a
stated tolerance), then, when the window runtime is built, each demo driven frame by frame
through `make_state` / `frame` in a headless window and in an on-screen one (under Xvfb when
no display is set): screenshots against golden PNGs in tests/golden/demo_*.png
(EMBER_UPDATE_GOLDEN=1 rewrites them), scripted mouse and key input (a drag injects dye, a drag
or key turns the N-body camera, a slider moves the ray marcher's light), and each script run
with --headless --frames N --out DIR.
"""
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ember as em
from conftest import _BUILD
from test_examples import EXAMPLES, example
from png_io import read_png, write_png

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


# N-body point-splat renderer --------------------------------------------------------------------

def _bodies(rng, n):
    X = rng.uniform(-12.0, 12.0, (n, 3)).astype(np.float32)
    V = rng.normal(0.0, 2.0, (n, 3)).astype(np.float32)
    return X, V


@pytest.mark.parametrize("radius", [0, 2])
def test_splat_renderer_depth_buffer_is_the_min_of_packed_keys(backend, rng, radius):
    d = example("demo_nbody")
    n, H, W = 700, 48, 64
    X, V = _bodies(rng, n)
    cam = d.orbit_camera(rng.uniform(-3, 3), rng.uniform(-1, 1), 12.0)  # some bodies behind the eye
    focal, bits = 40.0, d.index_bits(n)
    img, D, key, pix = (t.numpy() for t in d.render(X, V, cam, focal, H, W, radius, bits, 0.1, 0.01))
    assert d.render.kernel_count == 3  # clear, splat (project + pack + atomic_min), resolve

    want_key, want_pix = d.project_numpy(X, cam, focal, H, W, bits)
    np.testing.assert_array_equal(key, want_key)
    np.testing.assert_array_equal(pix, want_pix)
    behind = key == d.EMPTY
    assert 0 < behind.sum() < n
    # The depth buffer is exactly the minimum key over the bodies covering each pixel.
    want_D = d.splat_numpy(want_key, want_pix, H, W, radius)
    np.testing.assert_array_equal(D, want_D)
    covered = D != d.EMPTY
    assert 0.05 < covered.mean() < 0.95
    # The min mattered: pixels that several visible bodies cover.
    counts = np.zeros((H, W), np.int64)
    on = ~behind & (pix[:, 0] >= 0) & (pix[:, 0] < H) & (pix[:, 1] >= 0) & (pix[:, 1] < W)
    np.add.at(counts, (pix[on, 0], pix[on, 1]), 1)
    assert (counts > 1).sum() > 5
    # The winner of a pixel is the nearest body (to the key's depth precision), ties by index.
    winners = (D[covered] & np.uint32((1 << bits) - 1)).astype(np.int64)
    assert np.all(winners < n) and np.all(key[winners] == D[covered])
    # The resolve kernel shades the winner by its speed, fogged by depth.
    np.testing.assert_allclose(img, d.resolve_numpy(D, V, bits, 0.1, 0.01), rtol=1e-5, atol=1e-6)
    assert img[covered].mean() > 3 * img[~covered].mean()  # bodies are brighter than the background


def test_ordered_uint_keeps_the_float_order(backend, rng):
    d = example("demo_nbody")

    @em.compile
    def ordered(X: em.f32["N"]):  # noqa: F821
        u = d._ordered_uint(X)
        return u, d._float_from_ordered(u)

    X = np.concatenate([rng.normal(0, 1e3, 500), rng.normal(0, 1e-3, 500), [0.0, -0.0, 1e30, -1e30]]).astype(np.float32)
    u, back = (t.numpy() for t in ordered(X))
    np.testing.assert_array_equal(u, d._ordered_uint_numpy(X))
    np.testing.assert_array_equal(back.view(np.uint32), X.view(np.uint32))
    order = np.lexsort((u, X))  # by value (-0.0 == 0.0 there), then by key (-0.0 first)
    assert np.all(np.diff(u[order].astype(np.int64)) > 0)  # unsigned order == float order


def test_orbit_camera_is_orthonormal_and_looks_at_the_target():
    d = example("demo_nbody")
    cam = d.orbit_camera(0.7, -0.4, 30.0, target=(1.0, 2.0, 3.0)).astype(np.float64)
    np.testing.assert_allclose(cam[1:] @ cam[1:].T, np.eye(3), atol=1e-6)
    np.testing.assert_allclose(cam[0] + 30.0 * cam[3], [1.0, 2.0, 3.0], atol=1e-4)


# Fluid --------------------------------------------------------------------------------------------

def _fields(rng, h, w):
    return [rng.uniform(-1, 1, (h, w)).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("visc_iters", [0, 3])
def test_fluid_add_forces_splats_dye_and_force_where_asked(backend, rng, visc_iters):
    f = example("demo_fluid")
    H, W = 48, 64
    U, V, D = _fields(rng, H, W)
    row, col, fx, fy, radius, dye, decay = 20.3, 41.6, 0.7, -0.4, 4.0, 0.8, 0.98
    visc = 0.6 if visc_iters else 0.0
    got = [t.numpy() for t in f.add_forces(U, V, D, row, col, fx, fy, radius, dye, visc, 1.0, decay, visc_iters)]
    want = f.add_forces_numpy(U, V, D, row, col, fx, fy, radius, dye, visc, 1.0, decay, visc_iters)
    for g, w, name in zip(got, want, "UVD"):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)
    added = got[2] - D * np.float32(decay)  # the dye injected: a Gaussian at (row, col)
    assert np.unravel_index(np.argmax(added), added.shape) == (round(row), round(col))
    assert 0.7 * dye < added.max() <= dye
    i, j = np.indices((H, W))
    far = (i - row) ** 2 + (j - col) ** 2 > (4 * radius) ** 2
    assert np.abs(added[far]).max() < 1e-5
    if visc_iters == 0:  # the force follows the same Gaussian
        np.testing.assert_allclose(got[0] - U, added / dye * fx, atol=1e-5)
    else:  # viscosity smooths the velocity
        rough = lambda a: np.abs(np.diff(a, axis=1)).mean()  # noqa: E731
        assert rough(got[0]) < 0.5 * rough(U + (added / dye) * fx)


def test_fluid_no_splat_when_radius_is_zero(backend, rng):
    f = example("demo_fluid")
    U, V, D = _fields(rng, 16, 16)
    u, v, dd = (t.numpy() for t in f.add_forces(U, V, D, 8.0, 8.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.5, 0))
    np.testing.assert_array_equal(u, U)
    np.testing.assert_array_equal(v, V)
    np.testing.assert_allclose(dd, D * np.float32(0.5), rtol=1e-6)


def test_fluid_shade(backend, rng):
    f = example("demo_fluid")
    U, V, D = _fields(rng, 40, 56)
    D = np.abs(D) * 2
    img = f.shade(D, U, V).numpy()
    assert img.shape == (40, 56, 3) and f.shade.kernel_count == 1
    np.testing.assert_allclose(img, f.shade_numpy(D, U, V), rtol=1e-5, atol=1e-6)
    assert img.std() > 0.05


# Mandelbrot ---------------------------------------------------------------------------------------

def test_mandelbrot_counts_exact_and_smooth_colour(backend):
    m = example("demo_mandelbrot")
    for args in [(48, 64, -2.2, -1.2, 3.0 / 64, 120, 0.03), (37, 45, -0.76, 0.11, 6e-4, 400, 0.01)]:
        img, n = (t.numpy() for t in m.mandelbrot(*args))
        want_img, want_n = m.mandelbrot_numpy(*args)
        np.testing.assert_array_equal(n, want_n)  # same float32 ops in the same order: exact
        np.testing.assert_allclose(img, want_img, rtol=1e-4, atol=1e-4)
        assert 0 < np.mean(n == args[5]) < 1 and len(np.unique(n)) > 10
        assert np.all(img[n == args[5]] == 0)  # inside the set: black
    assert m.mandelbrot.kernel_count == 1


def test_mandelbrot_zoom_keeps_the_point_under_the_cursor():
    m = example("demo_mandelbrot")
    s = m.make_state(SimpleNamespace(width=80, height=60))
    before = s.cx + (17 - 40) * s.step, s.cy + (50 - 30) * s.step
    m.zoom(s, 0.5, 50.0, 17.0)
    after = s.cx + (17 - 40) * s.step, s.cy + (50 - 30) * s.step
    np.testing.assert_allclose(after, before, atol=1e-12)
    assert s.step == pytest.approx(0.5 * 3.2 / 80)
    assert m.iterations(s) == s.iters + 60


# Ray marcher --------------------------------------------------------------------------------------

def _raymarch_args(r, H=45, W=60, yaw=0.5, light=0.8, smooth=0.4, steps=80, shadows=1):
    focal = 0.5 * H / math.tan(math.radians(55) / 2)
    return (H, W, r.orbit_camera(yaw, 1.6), focal, r.light_dir(light), smooth, steps, shadows)


def test_raymarch_matches_numpy(backend, rng):
    r = example("demo_raymarch")
    for _ in range(2):
        args = _raymarch_args(r, yaw=rng.uniform(-3, 3), light=rng.uniform(-3, 3), smooth=rng.uniform(0, 1))
        img, t = (x.numpy() for x in r.raymarch(*args))
        want_img, want_t = r.raymarch_numpy(*args)
        # The loops' exits are discontinuous (a ray grazing an edge may hit on one side of an
        # ulp and miss on the other): 99% of pixels within 2e-3, the mean error below 1e-3.
        err = np.abs(img - want_img).max(-1)
        assert np.mean(err < 2e-3) > 0.99, err.max()
        assert err.mean() < 1e-3
        hit = want_t < r.TMAX
        assert np.mean((t < r.TMAX) == hit) > 0.99
        np.testing.assert_allclose(t[hit & (t < r.TMAX)], want_t[hit & (t < r.TMAX)], rtol=1e-3, atol=1e-3)
        assert 0.2 < hit.mean() < 0.9  # floor and objects, and sky
    assert r.raymarch.kernel_count == 1


def test_raymarch_sliders_change_the_image(backend):
    r = example("demo_raymarch")
    base = r.raymarch(*_raymarch_args(r))[0].numpy()
    for change in (dict(light=2.5), dict(smooth=1.2), dict(steps=6), dict(shadows=0)):
        img = r.raymarch(*_raymarch_args(r, **change))[0].numpy()
        assert np.abs(img - base).mean() > 2e-3, change
    lit = r.raymarch(*_raymarch_args(r, shadows=0))[0].numpy()
    assert lit.mean() > base.mean()  # shadows darken


# The demos in a window -----------------------------------------------------------------------------

needs_window = pytest.mark.skipif(not getattr(em._ember, "window_built", False),
                                  reason="this Ember was built without the window runtime")


def _child_env(display=None):
    env = dict(os.environ, EMBER_BUILD_DIR=str(_BUILD), PYTHONPATH=str(_BUILD / "python"))
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    if display:
        env["DISPLAY"] = display
    return env


# Per demo: the options make_state reads, the window size, the frames to run, and what to set
# on the state first (the widgets off: goldens of the rendered tensor, not of ImGui's text).
DEMOS = {
    "demo_nbody": (dict(n=256), (160, 120), 4, dict(ui=False, radius=1)),
    "demo_fluid": (dict(n=64), (128, 128), 12, dict(ui=False, radius=4.0)),
    "demo_mandelbrot": ({}, (160, 120), 6, dict(ui=False)),
    "demo_raymarch": (dict(scale=1.0), (160, 120), 2, dict(ui=False, spin=0.02)),
}


def _state(name, size, **extra):
    mod = example(name)
    opts, _, _, sets = DEMOS[name]
    s = mod.make_state(SimpleNamespace(width=size[0], height=size[1], **opts))
    for k, v in {**sets, **extra}.items():
        setattr(s, k, v)
    return mod, s


def _run(name, headless, size=None, frames=None, **extra):
    """Runs a demo's frame() for its frame count in a new window; returns (pixels [H,W,4], state)."""
    _, wsize, nframes, _ = DEMOS[name]
    size, frames = size or wsize, frames or nframes
    mod, s = _state(name, size, **extra)
    with em.Window(size[0], size[1], name, headless=headless, vsync=False, frames=frames, overlay=False) as win:
        assert win.headless == headless
        while win.frame():
            mod.frame(win, s)
        px = win.pixels()
    return px, s


def _compare_golden(name, px):
    """px against tests/golden/<name>.png: mean |difference| at most 1.5 levels of 255 and 99% of
    the channel values within 24 levels (room for another llvmpipe or libm; a wrong frame, a
    shifted image or a missing object is far outside). EMBER_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / f"{name}.png"
    if os.environ.get("EMBER_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        write_png(path, px)
    assert path.exists(), f"{path} is missing: run with EMBER_UPDATE_GOLDEN=1 to create it"
    want = read_png(path)
    assert want.shape[:2] == px.shape[:2], (want.shape, px.shape)
    diff = np.abs(px[..., :3].astype(np.int32) - want[..., :3].astype(np.int32))
    assert diff.mean() <= 1.5, f"{name}: mean difference {diff.mean():.2f}"
    assert np.mean(diff <= 24) >= 0.99, f"{name}: {np.mean(diff > 24) * 100:.2f}% of values differ by > 24"


@needs_window
@pytest.mark.parametrize("name", sorted(DEMOS))
def test_demo_renders_headless_like_its_golden(name):
    px, s = _run(name, headless=True)
    assert px.shape == (DEMOS[name][1][1], DEMOS[name][1][0], 4)
    assert px[..., :3].std() > 5  # not a blank frame
    _compare_golden(name, px)


# Runs every demo's frames in an on-screen window in a child process (with the display from
# its start) and saves the pixels of the last frame as <name>.npy.
_WINDOWED_CHILD = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_demos as t
for name in sys.argv[3:]:
    px, s = t._run(name, headless=False)
    np.save(f"{sys.argv[2]}/{name}.npy", px)
"""


@pytest.fixture(scope="module")
def windowed_frames(xvfb_display, tmp_path_factory):
    out = tmp_path_factory.mktemp("windowed")
    proc = subprocess.run([sys.executable, "-c", _WINDOWED_CHILD, str(Path(__file__).resolve().parent), str(out),
                           *sorted(DEMOS)], env=_child_env(xvfb_display), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@needs_window
@pytest.mark.parametrize("name", sorted(DEMOS))
def test_demo_renders_in_a_window_like_its_golden(name, windowed_frames):
    _compare_golden(name, np.load(windowed_frames / f"{name}.npy"))


# Scripted input ------------------------------------------------------------------------------------

def _frames(win, mod, s, events=(), n=1):
    """Queues `events` (callables on win), then runs n frames; returns the last frame's mouse_image."""
    for e in events:
        e(win)
    p = None
    for _ in range(n):
        assert win.frame()
        p = win.mouse_image
        mod.frame(win, s)
    return p


def _drag(points, button=0):
    """Events for one frame each: the mouse held at each point, then released at the last."""
    held = tuple(k == button for k in range(3))
    return [[lambda w, x=x, y=y: w.inject_mouse(x, y, buttons=held)] for x, y in points] + \
           [[lambda w: w.inject_mouse(points[-1][0], points[-1][1], buttons=(False, False, False))]]


@needs_window
def test_fluid_mouse_drag_injects_dye_and_force_at_the_cursor():
    mod, s = _state("demo_fluid", (128, 128), auto=False)  # no stirrer: only the mouse moves the fluid
    with em.Window(128, 128, "fluid", headless=True, vsync=False, overlay=False) as win:
        _frames(win, mod, s, n=3)
        assert np.abs(s.D.numpy()).max() == 0 and not s.injected
        seen = [_frames(win, mod, s, events) for events in _drag([(40, 64), (60, 64), (80, 64)])]
        D, U = s.D.numpy(), s.U.numpy()
        _frames(win, mod, s)
        px = win.pixels()
    # The 64x64 image fills the 128x128 window: window (x, y) is image (y / 2, x / 2).
    assert seen[0] == pytest.approx((32.0, 20.0), abs=0.51) and seen[2] == pytest.approx((32.0, 40.0), abs=0.51)
    assert D.sum() > 5.0 and D[32, 20:41].min() > 0.05  # dye along the stroke
    assert D[:, :8].max() < 1e-3 and D[:, 56:].max() < 1e-3  # and nowhere far from it
    assert U[26:39, 20:41].mean() > 0.05  # the force follows the drag (to the right)
    assert np.abs(s.V.numpy()).max() < np.abs(U).max()
    bright = px[60:69, 40:81, :3].astype(np.int32).mean()
    dark = px[:, :12, :3].astype(np.int32).mean()
    assert bright > dark + 20  # the dye shows where it was injected


@needs_window
def test_nbody_drag_and_keys_turn_and_zoom_the_camera():
    mod, s = _state("demo_nbody", (160, 120), paused=True)  # only the camera changes
    with em.Window(160, 120, "nbody", headless=True, vsync=False, overlay=False) as win:
        _frames(win, mod, s)
        img0, yaw0, pitch0 = s.image.numpy(), s.yaw, s.pitch
        for events in _drag([(50, 60), (90, 60), (130, 70)]):
            _frames(win, mod, s, events)
        assert s.yaw == pytest.approx(yaw0 - 0.01 * 80, abs=1e-6)
        assert s.pitch == pytest.approx(pitch0 + 0.01 * 10, abs=1e-6)
        img1 = s.image.numpy()
        assert np.abs(img1 - img0).mean() > 1e-3  # the view turned
        dist = s.dist
        _frames(win, mod, s, [lambda w: w.inject_key("W", down=True)], n=3)
        _frames(win, mod, s, [lambda w: w.inject_key("W", down=False)])
        assert s.dist == pytest.approx(dist * 0.97 ** 3, rel=1e-6)  # W zooms in while held
        _frames(win, mod, s, [lambda w: w.inject_mouse(80, 60, scroll=-2)])
        assert s.dist == pytest.approx(dist * 0.97 ** 3 / 0.81, rel=1e-6)  # the wheel zooms out
        lit0 = (img0.max(-1) > 0.2).sum()
        _frames(win, mod, s, [lambda w: w.inject_mouse(80, 60, scroll=6)])
        assert (s.image.numpy().max(-1) > 0.2).sum() > lit0  # nearer: the bodies cover more pixels


@needs_window
def test_mandelbrot_held_button_zooms_toward_the_cursor():
    mod, s = _state("demo_mandelbrot", (160, 120))
    with em.Window(160, 120, "mandelbrot", headless=True, vsync=False, overlay=False) as win:
        _frames(win, mod, s, [lambda w: w.inject_mouse(40, 30, buttons=(True, False, False))])
        step0 = s.step
        row, col = win.mouse_image
        c0 = (s.cx + (col - 80) * s.step, s.cy + (row - 60) * s.step)
        n0 = s.counts.numpy()
        _frames(win, mod, s, n=5)
        assert not s.auto and s.step == pytest.approx(step0 * s.zoom_rate ** 5, rel=1e-9)
        c1 = (s.cx + (col - 80) * s.step, s.cy + (row - 60) * s.step)
        assert c1 == pytest.approx(c0, abs=1e-12)  # the point under the cursor stays there
        assert not np.array_equal(s.counts.numpy(), n0)


@needs_window
def test_raymarch_sliders_moved_by_the_mouse_change_the_image():
    mod, s = _state("demo_raymarch", (400, 300), ui=True, spin=0.0)
    outside = np.ones((300, 400), bool)  # the pixels the widgets' window does not cover
    outside[5:245, 5:345] = False
    with em.Window(400, 300, "raymarch", headless=True, vsync=False, overlay=False) as win:
        _frames(win, mod, s, n=2)
        img0, px0 = s.image.numpy(), win.pixels()
        rects = sys.modules["demo_common"].WIDGET_RECTS  # where each slider was drawn
        x, y, w, h = rects["light angle"]
        assert 10 <= x and x + w <= 345 and 10 <= y and y + h <= 245  # inside the widgets' window
        # Press near the left end of "light angle": the value jumps toward -pi.
        for events in _drag([(x + 0.04 * w, y + h / 2)] * 2):
            _frames(win, mod, s, events)
        img1, px1 = s.image.numpy(), win.pixels()
        assert s.light_angle < -2.5 and s.yaw == pytest.approx(0.5)  # the drag went to the widget
        assert np.abs(img1 - img0).mean() > 5e-3  # the shading and shadows changed
        # Drag "camera orbit" to the right (the rectangle includes the label: the slider's frame
        # is its left ~70%): the whole view turns.
        x, y, w, h = rects["camera orbit"]
        for events in _drag([(x + 0.3 * w, y + h / 2), (x + 0.45 * w, y + h / 2), (x + 0.6 * w, y + h / 2)]):
            _frames(win, mod, s, events)
        px2 = win.pixels()
    assert s.yaw > 1.0 and s.light_angle < -2.5
    assert np.abs(s.image.numpy() - img1).mean() > 2e-2
    diff = np.abs(px2[..., :3].astype(np.int32) - px1[..., :3].astype(np.int32)).max(-1)
    assert diff[outside].mean() > 2.0  # visible around the widgets too
    assert np.abs(px1[..., :3].astype(np.int32) - px0[..., :3].astype(np.int32)).max() > 20


# The scripts --------------------------------------------------------------------------------------

SCRIPT_ARGS = {"demo_nbody": ["--n", "128"], "demo_fluid": ["--n", "48"], "demo_mandelbrot": [],
               "demo_raymarch": ["--scale", "0.5"]}


@needs_window
@pytest.mark.parametrize("mode", ["headless", "window"])
@pytest.mark.parametrize("name", sorted(SCRIPT_ARGS))
def test_demo_script_writes_frames(name, mode, tmp_path, request):
    display = request.getfixturevalue("xvfb_display") if mode == "window" else None
    out = tmp_path / "frames"
    cmd = [sys.executable, str(EXAMPLES / f"{name}.py"), "--frames", "3", "--out", str(out), "--width", "96",
           "--height", "72", *SCRIPT_ARGS[name]] + (["--headless"] if mode == "headless" else [])
    proc = subprocess.run(cmd, env=_child_env(display), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == str(out)  # the path is printed
    frames = sorted(out.glob("*.png"))
    assert len(frames) == 3, frames
    first, last = read_png(frames[0]), read_png(frames[-1])
    assert first.shape[:2] == (72, 96) and last[..., :3].std() > 3


@needs_window
def test_demo_script_without_display_runs_headless(tmp_path):
    out = tmp_path / "frames"
    proc = subprocess.run([sys.executable, str(EXAMPLES / "demo_fluid.py"), "--frames", "2", "--out", str(out),
                           "--n", "32", "--width", "64", "--height", "64", "--backend", "opengl"],
                          env=_child_env(None), capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "BackendError" in proc.stderr:
        pytest.skip("no OpenGL device")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "running headless" in proc.stderr and len(list(out.glob("*.png"))) == 2


@pytest.mark.parametrize("lang", ["glsl", "hlsl"])
def test_every_demo_kernel_passes_glslang_validator(lang, tmp_path):
    """The demos' programs are left out of test_vulkan's check of examples/; checked here."""
    import shutil
    if not shutil.which("glslangValidator"):
        pytest.skip("glslangValidator is not installed (Debian: glslang-tools)")
    from test_vulkan import _shaders
    checked = set()
    for name in ("demo_nbody", "demo_fluid", "demo_mandelbrot", "demo_raymarch"):
        mod = example(name)
        for attr, prog in vars(mod).items():
            if not isinstance(prog, em.Program) or prog.name in ("step", "fluid_step"):  # imported: checked there
                continue
            for symbol, shader in _shaders(prog.source(lang)):
                path = tmp_path / f"{symbol}.{'comp' if lang == 'glsl' else 'hlsl'}"
                path.write_text(shader)
                cmd = ["glslangValidator", "-V", str(path), "-o", str(path) + ".spv"]
                if lang == "hlsl":
                    cmd[2:2] = ["-D", "-S", "comp", "-e", symbol]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                assert proc.returncode == 0, f"{name}.{attr} {symbol}:\n{proc.stdout}{proc.stderr}"
                checked.add(f"{name}.{attr}")
    assert checked == {"demo_nbody.render", "demo_fluid.add_forces", "demo_fluid.shade",
                       "demo_mandelbrot.mandelbrot", "demo_raymarch.raymarch"}


_RUN_CHILD = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
px, _ = __import__(sys.argv[2])._run(headless=False)
np.save(sys.argv[3], px)
"""


def windowed_run_pixels(test_module, xvfb_display, tmp_path, timeout=600):
    """The pixels of `test_module`._run(headless=False) (a tests/python module), rendered on screen
    under Xvfb in a child process."""
    out = tmp_path / "px.npy"
    proc = subprocess.run([sys.executable, "-c", _RUN_CHILD, str(Path(__file__).resolve().parent), test_module,
                           str(out)], env=_child_env(xvfb_display), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return np.load(out)
