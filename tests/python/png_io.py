"""PNG reading and writing for the image tests (goldens, screenshots, recorded frames) with zlib
and NumPy only, so the tests need no imaging library: 8-bit gray, RGB or RGBA, not interlaced,
all five scanline filters."""
import struct
import zlib
from pathlib import Path

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read_png(path):
    """The image in a PNG file as uint8 [H, W, C], C = 1 (gray), 3 (RGB) or 4 (RGBA)."""
    data = Path(path).read_bytes()
    assert data[:8] == _SIGNATURE, f"{path} is not a PNG"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    assert depth == 8 and interlace == 0 and ctype in (0, 2, 6), f"{path}: unsupported PNG {ihdr}"
    c = {0: 1, 2: 3, 6: 4}[ctype]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * c)
    out = np.zeros((h, w * c), np.int32)
    prev = np.zeros(w * c, np.int32)
    for y in range(h):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) & 255
        elif kind in (1, 3, 4):
            cur = np.zeros(w * c, np.int32)
            for x in range(w * c):  # depends on the left neighbour: one byte at a time
                a = cur[x - c] if x >= c else 0
                if kind == 1:
                    pred = a
                elif kind == 3:
                    pred = (a + prev[x]) >> 1
                else:  # Paeth
                    b, cc = prev[x], (prev[x - c] if x >= c else 0)
                    p = a + b - cc
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
                cur[x] = (line[x] + pred) & 255
        else:
            raise AssertionError(f"{path}: bad PNG filter {kind} in row {y}")
        out[y], prev = cur, cur
    return out.reshape(h, w, c).astype(np.uint8)


def read_png_rgba(path):
    """read_png widened to uint8 [H, W, 4] (gray repeated, opaque alpha added), as win.pixels() gives."""
    img = read_png(path)
    if img.shape[2] == 1:
        img = np.repeat(img, 3, axis=2)
    if img.shape[2] == 3:
        img = np.concatenate([img, np.full(img.shape[:2] + (1,), 255, np.uint8)], axis=2)
    return img


def write_png(path, px):
    """uint8 [H, W, 4] RGBA to a PNG file (filter 0, zlib level 9)."""
    h, w, c = px.shape
    assert c == 4 and px.dtype == np.uint8, (px.shape, px.dtype)
    raw = b"".join(b"\0" + px[y].tobytes() for y in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    Path(path).write_bytes(_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
