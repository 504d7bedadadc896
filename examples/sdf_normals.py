"""An SDF ray marcher with autodiff normals (after TensorFrost's "fractal path tracer with AD
normals"): one em.kernel over the pixels; each pixel sphere-traces its ray through a signed
distance field in a per-thread em.loop left with em.break_() on a hit or past the far plane, then
takes the surface normal as the gradient of the field at the hit point, em.grad(sdf(p), [px, py,
pz]), inside the kernel (no finite-difference taps), and shades it: Lambert with a shadow ray (a
second marching loop toward the light, also left with em.break_()) and five-tap ambient occlusion.

The scene: a sphere and a box blended by a smooth minimum, a torus, a Menger sponge (three folds of
the iterated cross, a simple fractal) and a checkered floor. Scenes are written once against a
table of math functions (EM for tracing, NP for NumPy), so main() can compare the kernel's AD
normals with float64 central differences of the same field at the same points.

Usage: /usr/bin/python3 examples/sdf_normals.py [--size 320] [--backend cpu] [--out sdf.png]
       [--steps 128]
"""
import argparse
import math
import struct
import time
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)

TMAX = 40.0  # the far plane
HIT = 2e-4  # a hit when the distance is below HIT * (1 + t)
SHADOW_STEPS = 48

# The math the scenes need, for tracing (EM) and for NumPy (NP).
EM = SimpleNamespace(sqrt=em.sqrt, max=em.max, min=em.min, abs=em.abs, clamp=em.clamp, floor=em.floor)
NP = SimpleNamespace(sqrt=np.sqrt, max=np.maximum, min=np.minimum, abs=np.abs, clamp=np.clip, floor=np.floor)


def length(m, x, y, z):
    return m.sqrt(x * x + y * y + z * z)


def smin(m, a, b, k):
    """Polynomial smooth minimum of distances a and b over a blend width k > 0."""
    h = m.clamp(0.5 + 0.5 * (b - a) / k, 0.0, 1.0)
    return b + (a - b) * h - k * h * (1.0 - h)


def box(m, x, y, z, bx, by, bz):
    """Distance to an axis-aligned box of half sizes (bx, by, bz) centred at the origin."""
    qx, qy, qz = m.abs(x) - bx, m.abs(y) - by, m.abs(z) - bz
    return length(m, m.max(qx, 0.0), m.max(qy, 0.0), m.max(qz, 0.0)) + m.min(m.max(qx, m.max(qy, qz)), 0.0)


def menger(m, x, y, z, folds=3):
    """Menger sponge of half size 1 at the origin: a box minus `folds` levels of the cross
    (Inigo Quilez's formulation: each level repeats space with period 2 / 3^k)."""
    d = box(m, x, y, z, 1.0, 1.0, 1.0)
    s = 1.0
    for _ in range(folds):
        ax, ay, az = (v * s - 2.0 * m.floor(v * s * 0.5) - 1.0 for v in (x, y, z))  # mod(p s, 2) - 1
        s *= 3.0
        rx, ry, rz = (m.abs(1.0 - 3.0 * m.abs(a)) for a in (ax, ay, az))
        c = (m.min(m.max(rx, ry), m.min(m.max(ry, rz), m.max(rz, rx))) - 1.0) / s
        d = m.max(d, c)
    return d


def scene(m, x, y, z):
    """The demo scene (y up, floor at y = 0): distance from (x, y, z) to the nearest surface."""
    sphere = length(m, x + 0.2, y - 1.0, z) - 0.9
    blob = smin(m, sphere, box(m, x - 0.8, y - 0.5, z - 0.5, 0.5, 0.5, 0.5), 0.35)
    tx, tz = x + 2.3, z - 1.3
    ring = m.sqrt(tx * tx + tz * tz) - 0.75
    torus = m.sqrt(ring * ring + (y - 0.3) * (y - 0.3)) - 0.28
    s = 0.8  # the sponge, scaled by s (distances scale with it)
    sponge = menger(m, (x - 2.2) / s, (y - s) / s, (z + 1.0) / s) * s
    return m.min(m.min(blob, torus), m.min(sponge, y))


def make_renderer(sdf, name="render"):
    """An @em.compile renderer of the field sdf(m, x, y, z) (m: the EM math table). It returns the
    image f32[height, width, 3] (0..1), the unit normals f32[height, width, 3] (the normalized
    gradient of sdf at the hit point, zero where the ray misses) and the distance marched
    f32[height, width] (>= TMAX for a miss)."""
    def field(x, y, z):
        return sdf(EM, x, y, z)

    def render(height: em.i32, width: em.i32, cam: em.f32[4, 3], focal: em.f32, light: em.f32[3], steps: em.i32):
        img = em.zeros((height, width, 3), em.f32)
        nrm = em.zeros((height, width, 3), em.f32)
        dist = em.zeros((height, width), em.f32)
        with em.kernel((height, width)) as (i, j):
            u = em.f32(j) + 0.5 - 0.5 * em.f32(width)
            v = 0.5 * em.f32(height) - em.f32(i) - 0.5
            rx, ry, rz = (cam[1, c] * u + cam[2, c] * v + cam[3, c] * focal for c in range(3))
            inv = 1.0 / em.sqrt(rx * rx + ry * ry + rz * rz)
            dx, dy, dz = rx * inv, ry * inv, rz * inv
            ox, oy, oz = cam[0, 0], cam[0, 1], cam[0, 2]
            t = em.var(0.0)
            with em.loop(steps):  # sphere tracing
                d = field(ox + dx * t, oy + dy * t, oz + dz * t)
                with em.if_((d < HIT * (1.0 + t)) | (t > TMAX)):
                    em.break_()
                t.val = t + d
            hit = t < TMAX
            px, py, pz = ox + dx * t, oy + dy * t, oz + dz * t
            gx, gy, gz = em.grad(field(px, py, pz), [px, py, pz])  # the normal: d sdf / d p
            ginv = em.where(hit, 1.0 / em.max(length(EM, gx, gy, gz), 1e-12), 0.0)
            nx, ny, nz = gx * ginv, gy * ginv, gz * ginv
            lx, ly, lz = light[0], light[1], light[2]
            lit = em.var(1.0)  # shadow ray: march from just above the surface toward the light
            with em.if_(hit & (nx * lx + ny * ly + nz * lz > 0.0)):
                qx, qy, qz = px + nx * 2e-3, py + ny * 2e-3, pz + nz * 2e-3
                s = em.var(0.01)
                with em.loop(SHADOW_STEPS):
                    h = field(qx + lx * s, qy + ly * s, qz + lz * s)
                    lit.val = em.min(lit, 10.0 * h / s)  # soft: how narrowly the ray missed
                    with em.if_((lit < 1e-3) | (s > 10.0)):
                        em.break_()
                    s.val = s + em.clamp(h, 0.01, 0.4)
            occ = 0.0  # ambient occlusion: how far the field falls short along the normal
            for k in range(1, 6):
                e = 0.03 * k
                occ = occ + (e - field(px + nx * e, py + ny * e, pz + nz * e)) * (0.6 ** k)
            ao = em.clamp(1.0 - 3.0 * occ, 0.0, 1.0)
            diffuse = em.clamp(nx * lx + ny * ly + nz * lz, 0.0, 1.0) * em.clamp(lit, 0.0, 1.0)
            checker = em.floor(px) + em.floor(pz)
            checker = checker - 2.0 * em.floor(checker * 0.5)  # 0 or 1
            floor = py < 1e-2
            fog = em.exp(-0.002 * t * t)
            for c, (albedo, sky) in enumerate(((0.85, 0.55), (0.55, 0.7), (0.35, 0.95))):
                base = em.where(floor, 0.35 + 0.3 * checker, albedo * (0.75 + 0.25 * [nx, ny, nz][c]))
                colour = base * (0.9 * diffuse + 0.25 * ao * (0.6 + 0.4 * ny))
                background = sky - 0.3 * em.max(dy, 0.0)
                img[i, j, c] = em.clamp(em.where(hit, colour * fog + background * (1.0 - fog), background),
                                        0.0, 1.0)
            nrm[i, j, 0], nrm[i, j, 1], nrm[i, j, 2] = nx, ny, nz
            dist[i, j] = t
        return img, nrm, dist

    render.__name__ = render.__qualname__ = name
    return em.compile(render)


render = make_renderer(scene)


def camera(yaw, pitch=0.35, dist=7.5, target=(0.0, 0.6, 0.0)):
    """[eye, right, up, forward] (f32[4, 3], y up) of a camera orbiting `target`."""
    t = np.array(target, np.float64)
    eye = t + dist * np.array([math.sin(yaw) * math.cos(pitch), math.sin(pitch), math.cos(yaw) * math.cos(pitch)])
    fwd = (t - eye) / np.linalg.norm(t - eye)
    right = np.cross(fwd, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    return np.array([eye, right, np.cross(right, fwd), fwd], np.float32)


def light_dir(azimuth=2.5, elevation=0.6):
    """Unit vector toward the light."""
    return np.array([math.cos(elevation) * math.cos(azimuth), math.sin(elevation),
                     math.cos(elevation) * math.sin(azimuth)], np.float32)


def hit_points(cam, focal, dist, height, width):
    """The points o + t d the renderer's rays reached (float64 [H, W, 3]) and the hit mask."""
    cam = cam.astype(np.float64)
    i, j = np.indices((height, width)).astype(np.float64)
    u, v = j + 0.5 - 0.5 * width, 0.5 * height - i - 0.5
    r = cam[1] * u[..., None] + cam[2] * v[..., None] + cam[3] * focal
    d = r / np.linalg.norm(r, axis=-1, keepdims=True)
    return cam[0] + d * dist[..., None].astype(np.float64), dist < TMAX


def fd_normals(sdf, p, h=1e-4):
    """Unit normals of sdf (written against the NP table) at points p [..., 3] by float64 central
    differences."""
    g = np.stack([(sdf(NP, *(p + h * e).transpose(-1, *range(p.ndim - 1))) -
                   sdf(NP, *(p - h * e).transpose(-1, *range(p.ndim - 1)))) / (2 * h) for e in np.eye(3)], -1)
    return g / np.maximum(np.linalg.norm(g, axis=-1, keepdims=True), 1e-300)


def write_image(path, img):
    """f32 [H, W, 3] in 0..1 as an 8-bit RGB PNG (zlib + NumPy) or, for a .ppm path, a binary PPM."""
    px = np.clip(np.rint(np.asarray(img) * 255.0), 0, 255).astype(np.uint8)
    h, w, _ = px.shape
    if str(path).lower().endswith(".ppm"):
        Path(path).write_bytes(b"P6\n%d %d\n255\n" % (w, h) + px.tobytes())
        return

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    raw = b"".join(b"\0" + row.tobytes() for row in px)
    Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def main():
    """Renders the scene, writes the image and reports the time, kernels and the AD normals'
    agreement with central differences."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=320, help="image height; the width is 4/3 of it")
    p.add_argument("--steps", type=int, default=128, help="sphere-tracing steps per ray")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--out", default="sdf_normals.png", help="output image (.png, or .ppm)")
    a = p.parse_args()
    em.init(backend=a.backend)

    H, W = a.size, a.size * 4 // 3
    cam, light = camera(0.6), light_dir()
    focal = 0.5 * H / math.tan(math.radians(50.0) / 2)
    t0 = time.perf_counter()
    img, nrm, dist = render(H, W, cam, focal, light, a.steps)  # the first call traces and compiles
    img = img.numpy()
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    img2, nrm, dist = (x.numpy() for x in render(H, W, cam, focal, light, a.steps))
    run_ms = (time.perf_counter() - t0) * 1e3
    write_image(a.out, img2)

    pts, hit = hit_points(cam, focal, dist, H, W)
    cos = np.sum(nrm[hit] * fd_normals(scene, pts[hit]), axis=-1)
    deg = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    print(f"{W}x{H} on {a.backend}: first call (compiles) {first_s:.2f} s, then {run_ms:.1f} ms; "
          f"{render.kernel_count} kernel(s); {hit.mean() * 100:.1f}% of rays hit; wrote {a.out}")
    print(f"AD normals vs float64 central differences at the hit points: median {np.median(deg):.2g} deg, "
          f"99th percentile {np.percentile(deg, 99):.2g} deg")


if __name__ == "__main__":
    main()
