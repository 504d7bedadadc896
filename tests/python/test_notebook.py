"""Notebooks: em.to_png and em.Tensor's Jupyter reprs (which shapes are images, how values map to
8-bit, checked pixel by pixel on random data after decoding the PNG), em.Window._repr_png_, and
the two notebooks in examples/notebooks executed with nbclient (every cell runs; the images and
text the notebook promises are in the outputs)."""
import base64
import os
from pathlib import Path

import numpy as np
import pytest

import ember as em
from conftest import _unavailable
from png_io import read_png

from ember import _display

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "examples" / "notebooks"


def decode(png, tmp_path):
    """uint8 [H, W, C] of PNG bytes (the tests' own reader, independent of the encoder)."""
    p = tmp_path / "img.png"
    p.write_bytes(png)
    return read_png(p)


def test_gray_unit_range_maps_linearly(rng, tmp_path):
    a = rng.random((23, 37), dtype=np.float32)
    a[0, 0], a[1, 1] = 0.0, 1.0
    got = decode(em.to_png(em.tensor(a), scale=1), tmp_path)
    assert got.shape == (23, 37, 1)
    np.testing.assert_array_equal(got[:, :, 0], np.round(a.astype(np.float64) * 255).astype(np.uint8))


def test_small_images_are_enlarged_by_whole_pixels(rng, tmp_path):
    a = rng.random((20, 30), dtype=np.float32)
    got = decode(em.to_png(em.tensor(a)), tmp_path)[:, :, 0]
    k = 8  # ceil(256 / 30) = 9, capped at 8
    assert got.shape == (20 * k, 30 * k)
    np.testing.assert_array_equal(got[::k, ::k], np.round(a.astype(np.float64) * 255).astype(np.uint8))
    np.testing.assert_array_equal(got[k - 1::k, k - 1::k], got[::k, ::k])
    big = decode(em.to_png(em.tensor(rng.random((300, 40), dtype=np.float32))), tmp_path)
    assert big.shape[:2] == (300, 40)


def test_signed_values_use_coolwarm_around_zero(rng, tmp_path):
    a = (rng.standard_normal((32, 24)) * 3).astype(np.float32)
    got = decode(em.to_png(em.tensor(a), scale=1), tmp_path)
    assert got.shape == (32, 24, 3)
    m = np.abs(a).max()
    idx = np.round(np.clip(0.5 + 0.5 * a.astype(np.float64) / m, 0, 1) * 255).astype(int)
    np.testing.assert_array_equal(got, _display._lut("coolwarm")[idx])
    # The largest |value| lands on an end of the map, the sign picks which.
    k = np.unravel_index(np.argmax(np.abs(a)), a.shape)
    end = _display._lut("coolwarm")[255 if a[k] > 0 else 0]
    np.testing.assert_array_equal(got[k], end)


def test_one_sign_uses_viridis_min_to_max(rng, tmp_path):
    a = rng.integers(5, 500, (40, 17)).astype(np.int32)
    got = decode(em.to_png(em.tensor(a), scale=1), tmp_path)
    t = (a - a.min()) / (a.max() - a.min())
    np.testing.assert_array_equal(got, _display._lut("viridis")[np.round(t * 255).astype(int)])


def test_nonfinite_values_are_magenta(rng, tmp_path):
    a = rng.random((16, 16), dtype=np.float32) * 4
    a[3, 4], a[5, 6] = np.nan, np.inf
    got = decode(em.to_png(em.tensor(a), scale=1), tmp_path)
    assert tuple(got[3, 4]) == (255, 0, 255) and tuple(got[5, 6]) == (255, 0, 255)
    rgb = rng.random((16, 16, 3), dtype=np.float32)
    rgb[2, 2, 1] = np.nan
    assert tuple(decode(em.to_png(em.tensor(rgb), scale=1), tmp_path)[2, 2]) == (255, 0, 255)


def test_rgb_and_rgba_clip(rng, tmp_path):
    a = (rng.random((18, 21, 3)) * 1.6 - 0.3).astype(np.float32)
    got = decode(em.to_png(em.tensor(a), scale=1), tmp_path)
    np.testing.assert_array_equal(got, np.round(np.clip(a.astype(np.float64), 0, 1) * 255).astype(np.uint8))
    b = rng.integers(-50, 400, (17, 19, 4)).astype(np.int32)
    got = decode(em.to_png(em.tensor(b), scale=1), tmp_path)
    assert got.shape == (17, 19, 4)
    np.testing.assert_array_equal(got, np.clip(b, 0, 255).astype(np.uint8))
    m = rng.random((16, 20)) > 0.5
    np.testing.assert_array_equal(decode(em.to_png(em.tensor(m), scale=1), tmp_path)[:, :, 0], m * 255)


def test_reprs_choose_image_or_text(rng):
    img = em.tensor(rng.random((64, 48, 3), dtype=np.float32))
    assert img._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n" and img._repr_html_() is None
    for shape in ((5,), (8, 8), (16, 15), (20, 20, 2), (2, 20, 20, 3), ()):
        t = em.tensor(rng.random(shape).astype(np.float32))
        assert t._repr_png_() is None, shape
        html = t._repr_html_()
        assert f"shape={tuple(shape)}" in html and "dtype=f32" in html
        if t.size:
            assert f"max={float(t.numpy().max()):.6g}" in html
    small = em.tensor(rng.random((2, 2)).astype(np.float32))
    assert f"<pre>{repr(small)}</pre>" in small._repr_html_()
    with pytest.raises(em.ShapeError, match="image shaped"):
        em.to_png(em.tensor(np.zeros(7, np.float32)))
    with pytest.raises(em.TypeError, match="scale"):
        em.to_png(img, scale=0)


def test_colormap_stops_match_the_window():
    if not em._ember.window_built:
        pytest.skip("built without the window runtime")
    for name in ("viridis", "coolwarm"):
        want = np.array([em._window.colormap_color(name, k / 255) for k in range(256)])
        np.testing.assert_allclose(_display._lut(name) / 255.0, want, atol=1 / 255 + 1e-6)


def test_window_repr_png_is_its_last_frame(rng, tmp_path):
    reason = _unavailable("opengl")
    if reason or not em._ember.window_built:
        pytest.skip(f"the window runtime needs OpenGL: {reason or 'not built'}")
    with em.Window(64, 48, "repr", headless=True, overlay=False) as win:
        assert win.frame()
        win.show(em.tensor(rng.random((48, 64), dtype=np.float32)))
        assert win.frame()
    got = decode(win._repr_png_(), tmp_path)
    np.testing.assert_array_equal(got, win.pixels()[:, :, :3])


# -- the notebooks ---------------------------------------------------------------------------

def run_notebook(name):
    """Executes examples/notebooks/<name> in a fresh python3 kernel; the executed notebook."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger warns otherwise
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb


def outputs(nb):
    """[(cell source, [mime bundles and stream texts])] of the code cells."""
    res = []
    for c in nb.cells:
        if c.cell_type == "code":
            res.append((c.source, [o.get("data") or {"text/plain": o.get("text", "")} for o in c.outputs]))
    return res


def pngs(bundles):
    return [base64.b64decode(b["image/png"]) for b in bundles if "image/png" in b]


def test_simulations_notebook(tmp_path):
    cells = outputs(run_notebook("simulations.ipynb"))
    shown = [pngs(b) for _, b in cells]
    mandel, smooth = decode(shown[1][0], tmp_path), decode(shown[2][0], tmp_path)
    assert mandel.shape == (320, 480, 3) and smooth.shape == (320, 480, 1)
    assert len(np.unique(mandel.reshape(-1, 3), axis=0)) > 10  # a colour map, not a flat image
    dye = [decode(p, tmp_path) for p in shown[3]]
    assert len(dye) == 3 and all(d.shape == (256, 256, 1) for d in dye)
    assert all(d.max() > 100 and d.min() < 20 for d in dye)  # dye and clear water
    assert decode(shown[4][0], tmp_path).shape == (256, 256, 3)  # the pressure, coolwarm
    assert not shown[5] and "text/html" in cells[5][1][0]  # the small tensor is text
    win = [b for b in cells[6][1]]
    if pngs(win):
        frame = decode(pngs(win)[0], tmp_path)
        assert frame.shape == (256, 256, 3) and frame.max() > 100
    else:
        assert "no window here" in win[0]["text/plain"]


def test_training_notebook(tmp_path):
    cells = outputs(run_notebook("training.ipynb"))
    text = cells[1][1][0]["text/plain"]
    first, last = (float(s) for s in text.split("loss ")[1].split(",")[0].split(" -> "))
    assert last < 0.5 * first, text
    plot = decode(pngs(cells[2][1])[0], tmp_path)
    assert plot.shape == (120, 300, 3)
    curve = (plot[:, :, 0] > 150) & (plot[:, :, 2] < 80)  # the orange line
    cols = np.flatnonzero(curve.any(axis=0))
    assert len(cols) > 0.95 * plot.shape[1]  # drawn across the whole width
    rows = [np.flatnonzero(curve[:, c]).mean() for c in (2, plot.shape[1] - 3)]
    assert rows[1] > rows[0] + 40  # the loss falls: the line ends lower than it starts
    weights = decode(pngs(cells[3][1])[0], tmp_path)
    assert weights.shape == (160, 320, 3)  # 40 x 80 tiles, enlarged 4x
    assert "text/html" in cells[4][1][0] and "dtype=i32" in cells[4][1][0]["text/html"]
