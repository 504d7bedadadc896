"""Images of tensors for notebooks: em.to_png (8-bit PNG with zlib only) and the Jupyter hooks
em.Tensor._repr_png_ / _repr_html_ (em.Window._repr_png_ shows its last frame).

Which tensors are images: shape [H, W] or [H, W, C] with C in (1, 3, 4), both H and W in
16..8192 (smaller or larger tensors show as text). How values become 8-bit (value v, rounded):
  - one channel, bool: false black, true white;
  - one channel, every finite value in [0, 1]: gray, v * 255 (a fixed scale: frames compare);
  - one channel otherwise: values of both signs use the diverging "coolwarm" map with 0 in the
    middle, t = 0.5 + 0.5 v / max|v|; values of one sign use "viridis", t = (v - min) / (max - min);
  - three or four channels (RGB, RGBA): f32 clipped to [0, 1] times 255, i32/u32 clipped to
    0..255, bool 0 or 255;
  - NaN and infinities are magenta (255, 0, 255).
Small images are enlarged by whole pixels (at most 8x) until the longer side reaches 256 pixels."""
import html
import struct
import zlib

import numpy as np

from . import _ember as _C
from ._tensor import Tensor

MIN_SIDE, MAX_SIDE = 16, 8192
_TARGET = 256  # enlarge small images towards this many pixels on the longer side
# Stops of two of the window's colormaps (window/window_colormap.cpp), here too because the
# window runtime is optional; tests/python/test_notebook.py checks that both agree.
_STOPS = {
    "viridis": (0x440154, 0x472d7b, 0x3b528b, 0x2c728e, 0x21908c, 0x27ad81, 0x5dc863, 0xaadc32, 0xfde725),
    "coolwarm": (0x3b4cc0, 0x8db0fe, 0xdddddd, 0xf49a7b, 0xb40426),
}
_LUTS = {}


def _lut(name):
    """[256, 3] uint8 colours of a colormap at t = k / 255 (piecewise linear between its stops)."""
    if name not in _LUTS:
        stops = np.array([[(h >> 16) & 255, (h >> 8) & 255, h & 255] for h in _STOPS[name]], np.float64) / 255
        x = np.linspace(0.0, 1.0, len(stops))
        t = np.arange(256) / 255.0
        rgb = np.stack([np.interp(t, x, stops[:, c]) for c in range(3)], axis=1)
        _LUTS[name] = np.round(rgb * 255).astype(np.uint8)
    return _LUTS[name]


def is_image_like(shape):
    """Whether a tensor of `shape` shows as an image: [H, W] or [H, W, 1|3|4] with H, W in 16..8192."""
    shape = tuple(shape)
    if len(shape) == 3 and shape[2] not in (1, 3, 4):
        return False
    return len(shape) in (2, 3) and all(MIN_SIDE <= d <= MAX_SIDE for d in shape[:2])


def _one_channel(a):
    """uint8 [H, W] gray or [H, W, 3] colour of a one-channel array (the rules above)."""
    if a.dtype == np.bool_:
        return np.where(a, 255, 0).astype(np.uint8)
    v = a.astype(np.float64)
    finite = np.isfinite(v)
    f = v[finite]
    bad = not finite.all()
    lo, hi = (float(f.min()), float(f.max())) if f.size else (0.0, 0.0)
    if lo >= 0.0 and hi <= 1.0 and not bad:
        return np.round(v * 255.0).astype(np.uint8)
    if lo < 0.0 < hi:
        t = 0.5 + 0.5 * v / max(-lo, hi)
        lut = _lut("coolwarm")
    else:
        t = (v - lo) / (hi - lo) if hi > lo else np.full_like(v, 0.5)
        lut = _lut("viridis")
    idx = np.round(np.clip(np.where(finite, t, 0.0), 0.0, 1.0) * 255.0).astype(np.intp)
    rgb = lut[idx]
    rgb[~finite] = (255, 0, 255)
    return rgb


def _channels(a):
    """uint8 [H, W, C] of an RGB or RGBA array (the rules above)."""
    if a.dtype == np.uint8:
        return a
    if a.dtype == np.bool_:
        return np.where(a, 255, 0).astype(np.uint8)
    if a.dtype.kind == "f":
        v = np.nan_to_num(a.astype(np.float64), nan=0.0)
        out = np.round(np.clip(v, 0.0, 1.0) * 255.0).astype(np.uint8)
        bad = ~np.isfinite(a).all(axis=2)
        out[bad, :3] = (255, 0, 255)
        return out
    return np.clip(a, 0, 255).astype(np.uint8)


def to_rgb8(img):
    """The uint8 image ([H, W] gray, [H, W, 3] or [H, W, 4]) a tensor or array of image shape
    shows as, by the rules of this module's docstring. ember.ShapeError for other shapes."""
    a = img.numpy() if isinstance(img, Tensor) else np.asarray(img)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2:
        return a if a.dtype == np.uint8 else _one_channel(a)
    if a.ndim == 3 and a.shape[2] in (3, 4):
        return _channels(a)
    raise _C.ShapeError(f"em.to_png: expected an image shaped [H, W], [H, W, 1], [H, W, 3] or [H, W, 4], "
                        f"got shape {tuple(a.shape)}")


def encode_png(px):
    """PNG bytes of uint8 pixels [H, W] (gray), [H, W, 3] (RGB) or [H, W, 4] (RGBA)."""
    px = np.ascontiguousarray(px, dtype=np.uint8)
    h, w = px.shape[:2]
    c = 1 if px.ndim == 2 else px.shape[2]
    color_type = {1: 0, 3: 2, 4: 6}[c]
    rows = np.zeros((h, 1 + w * c), np.uint8)  # filter type 0 (none) on every scanline
    rows[:, 1:] = px.reshape(h, w * c)

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
            + chunk(b"IEND", b""))


def to_png(img, scale=None):
    """to_png(img, scale=None) -> bytes

    PNG bytes of an image-shaped em.Tensor or NumPy array ([H, W] through a colormap, [H, W, 3] or
    [H, W, 4]; the rules: README "Notebooks"); uint8 arrays are taken as they are. `scale` enlarges
    by whole pixels (None: until the longer side has 256 pixels, at most 8x). Jupyter shows an
    em.Tensor through the same code (``_repr_png_``).

    >>> png = em.to_png(em.tensor(np.random.default_rng(0).random((64, 64, 3))), scale=2)
    >>> png[1:4], len(png) > 1000
    (b'PNG', True)
    """
    px = to_rgb8(img)
    if scale is None:
        scale = max(1, min(8, -(-_TARGET // max(px.shape[:2]))))  # ceil: the longer side reaches 256
    if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)) or scale < 1:
        raise _C.TypeError(f"em.to_png: scale must be a positive int, got {scale!r}")
    if scale > 1:
        px = np.repeat(np.repeat(px, scale, axis=0), scale, axis=1)
    return encode_png(px)


def _summary(t):
    """One line: shape, dtype and (for a non-empty tensor) min, max and mean."""
    line = f"em.Tensor shape={tuple(t.shape)} dtype={t._dtype_name}"
    if t.size:
        a = t.numpy()
        v = a.astype(np.float64)
        line += f" min={v.min():.6g} max={v.max():.6g} mean={v.mean():.6g}"
    return line


def _repr_png(self):
    """Jupyter: a PNG of an image-shaped tensor, else None (the text summary shows instead)."""
    return to_png(self) if is_image_like(self.shape) else None


def _repr_html(self):
    """Jupyter: the summary line and the values of a tensor that is not an image, else None."""
    if is_image_like(self.shape):
        return None
    return (f"<div><code>{html.escape(_summary(self))}</code>"
            f"<pre>{html.escape(repr(self))}</pre></div>")


Tensor._repr_png_ = _repr_png
Tensor._repr_html_ = _repr_html
