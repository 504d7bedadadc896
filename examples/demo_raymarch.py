"""Interactive SDF ray marcher: one Ember kernel over the pixels. Each pixel sphere-traces its
ray through a signed distance field (a sphere and a box blended by a smooth minimum, a torus,
a capsule and a checkered floor) in an em.loop left with em.break_() on a hit or past the far
plane, then shades the hit with a soft shadow (a second marching loop toward the light, also
with em.break_()), five-sample ambient occlusion and fog.

The scene is written once (`scene` below) against a small table of math functions, so the same
code traces into Ember and runs in NumPy (`raymarch_numpy`, the reference the tests use).

Controls (widgets): light angle, smoothness of the blend, maximum march steps, camera orbit
(also: drag with the left mouse button), camera height, soft shadows on/off.

Usage: /usr/bin/python3 examples/demo_raymarch.py [--backend cpu|opengl|vulkan]
       [--headless --frames N --out DIR] [--width 800 --height 600] [--scale 0.5]
"""
import math
from types import SimpleNamespace

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
import demo_common

TMAX = 30.0  # the far plane
HIT = 1e-3  # a hit when the distance is below HIT * t
SHADOW_STEPS = 40

# The math the scene needs, for tracing (EM) and for NumPy (NP).
EM = SimpleNamespace(sqrt=em.sqrt, max=em.max, min=em.min, abs=em.abs, clamp=em.clamp, floor=em.floor,
                     where=em.where, exp=em.exp)
NP = SimpleNamespace(sqrt=np.sqrt, max=np.maximum, min=np.minimum, abs=np.abs, clamp=np.clip, floor=np.floor,
                     where=np.where, exp=np.exp)


def _length(m, x, y, z):
    return m.sqrt(x * x + y * y + z * z)


def smin(m, a, b, k):
    """Polynomial smooth minimum of distances a and b over a blend width k > 0."""
    h = m.clamp(0.5 + 0.5 * (b - a) / k, 0.0, 1.0)
    return b + (a - b) * h - k * h * (1.0 - h)


def scene(m, x, y, z, k):
    """(distance, material) at point (x, y, z) (y up): material 0 floor, 1 blob, 2 torus, 3 capsule.
    k is the smoothness of the sphere-box blend."""
    sphere = _length(m, x, y - 1.0, z) - 1.0
    qx, qy, qz = m.abs(x - 1.1) - 0.55, m.abs(y - 0.55) - 0.55, m.abs(z - 0.4) - 0.55
    box = _length(m, m.max(qx, 0.0), m.max(qy, 0.0), m.max(qz, 0.0)) + m.min(m.max(qx, m.max(qy, qz)), 0.0)
    blob = smin(m, sphere, box, k)
    tx, tz = x + 2.0, z - 1.2
    ring = m.sqrt(tx * tx + tz * tz) - 0.8
    torus = m.sqrt(ring * ring + (y - 0.3) * (y - 0.3)) - 0.28
    cy = m.clamp(y, 0.3, 1.7)  # a vertical capsule from y = 0.3 to 1.7
    capsule = _length(m, x - 0.3, y - cy, z + 2.0) - 0.3
    floor = y
    d = m.min(m.min(blob, torus), m.min(capsule, floor))
    mat = m.where(d == floor, 0.0, m.where(d == blob, 1.0, m.where(d == torus, 2.0, 3.0)))
    return d, mat


def _dist(m, x, y, z, k):
    return scene(m, x, y, z, k)[0]


def shade_hit(m, ox, oy, oz, dx, dy, dz, t, hit, k, lx, ly, lz, shadow):
    """Colour (r, g, b) of the ray o + t d: the material lit by light direction l with `shadow`
    (1 = lit, 0 = in shadow), ambient occlusion and fog; the sky where there is no hit."""
    px, py, pz = ox + dx * t, oy + dy * t, oz + dz * t
    e = 1e-3  # the normal: the tetrahedron of gradient samples
    d1 = _dist(m, px + e, py - e, pz - e, k)
    d2 = _dist(m, px - e, py - e, pz + e, k)
    d3 = _dist(m, px - e, py + e, pz - e, k)
    d4 = _dist(m, px + e, py + e, pz + e, k)
    nx, ny, nz = d1 - d2 - d3 + d4, -d1 - d2 + d3 + d4, -d1 + d2 - d3 + d4
    inv = 1.0 / m.max(_length(m, nx, ny, nz), 1e-12)
    nx, ny, nz = nx * inv, ny * inv, nz * inv
    occ, w = 0.0, 1.0
    for s in range(1, 6):  # ambient occlusion: how far the field falls short along the normal
        h = 0.02 + 0.1 * s
        occ = occ + (h - _dist(m, px + nx * h, py + ny * h, pz + nz * h, k)) * w
        w *= 0.7
    ao = m.clamp(1.0 - 1.5 * occ, 0.0, 1.0)
    mat = scene(m, px, py, pz, k)[1]
    checker = m.floor(px) + m.floor(pz)
    checker = checker - 2.0 * m.floor(checker * 0.5)  # 0 or 1
    base = [m.where(mat == 0.0, 0.45 + 0.35 * checker, m.where(mat == 1.0, c1, m.where(mat == 2.0, c2, c3)))
            for c1, c2, c3 in ((0.9, 0.25, 0.3), (0.55, 0.3, 0.15), (0.2, 0.5, 0.9))]
    diff = m.clamp(nx * lx + ny * ly + nz * lz, 0.0, 1.0) * shadow
    sky = 0.5 + 0.5 * ny
    fog = m.exp(-0.004 * t * t)
    out = []
    for ch, (sun, amb, bg) in enumerate(((1.0, 0.35, 0.55), (0.92, 0.45, 0.7), (0.8, 0.6, 0.95))):
        lit = base[ch] * (sun * diff + amb * sky * ao)
        background = bg - 0.35 * m.max(dy, 0.0)
        out.append(m.where(hit, lit * fog + background * (1.0 - fog), background))
    return out


@em.compile
def raymarch(height: em.i32, width: em.i32, cam: em.f32[4, 3], focal: em.f32, light: em.f32[3],
             smooth: em.f32, steps: em.i32, shadows: em.i32):
    """Renders the scene seen by cam = [eye, right, up, forward] (rows, y up; focal length in
    pixels) lit from direction `light` (unit vector). Returns the image f32[height, width, 3]
    and the distance marched per pixel f32[height, width] (>= TMAX for a miss)."""
    img = em.zeros((height, width, 3), em.f32)
    dist = em.zeros((height, width), em.f32)
    k = em.max(smooth, 1e-3)
    with em.kernel((height, width)) as (i, j):
        u = em.f32(j) + 0.5 - 0.5 * em.f32(width)
        v = 0.5 * em.f32(height) - em.f32(i) - 0.5
        rx = cam[1, 0] * u + cam[2, 0] * v + cam[3, 0] * focal
        ry = cam[1, 1] * u + cam[2, 1] * v + cam[3, 1] * focal
        rz = cam[1, 2] * u + cam[2, 2] * v + cam[3, 2] * focal
        inv = 1.0 / em.sqrt(rx * rx + ry * ry + rz * rz)
        dx, dy, dz = rx * inv, ry * inv, rz * inv
        ox, oy, oz = cam[0, 0], cam[0, 1], cam[0, 2]
        t = em.var(0.0)
        with em.loop(steps):  # sphere tracing
            d = _dist(EM, ox + dx * t, oy + dy * t, oz + dz * t, k)
            with em.if_((d < HIT * t) | (t > TMAX)):
                em.break_()
            t.val = t + d
        hit = t < TMAX
        lx, ly, lz = light[0], light[1], light[2]
        res = em.var(1.0)
        with em.if_(hit & (shadows != 0)):  # soft shadow: march toward the light
            px, py, pz = ox + dx * t, oy + dy * t, oz + dz * t
            s = em.var(0.02)
            with em.loop(SHADOW_STEPS):
                h = _dist(EM, px + lx * s, py + ly * s, pz + lz * s, k)
                res.val = em.min(res, 8.0 * h / s)
                with em.if_((res < 1e-3) | (s > 8.0)):
                    em.break_()
                s.val = s + em.clamp(h, 0.02, 0.5)
        shadow = em.clamp(res, 0.0, 1.0)
        rgb = shade_hit(EM, ox, oy, oz, dx, dy, dz, t, hit, k, lx, ly, lz, shadow)
        for ch in range(3):
            img[i, j, ch] = em.clamp(rgb[ch], 0.0, 1.0)
        dist[i, j] = t
    return img, dist


def raymarch_numpy(height, width, cam, focal, light, smooth, steps, shadows):
    """The same renderer in NumPy (float32; finished rays masked, as em.break_ leaves a loop)."""
    f = np.float32
    cam, light = np.asarray(cam, f), np.asarray(light, f)
    k = f(max(smooth, 1e-3))
    i, j = np.indices((height, width)).astype(f)
    u = j + f(0.5) - f(0.5) * f(width)
    v = f(0.5) * f(height) - i - f(0.5)
    r = [cam[1, c] * u + cam[2, c] * v + cam[3, c] * f(focal) for c in range(3)]
    inv = f(1) / np.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])
    dx, dy, dz = r[0] * inv, r[1] * inv, r[2] * inv
    ox, oy, oz = cam[0]
    t = np.zeros((height, width), f)
    active = np.ones((height, width), bool)
    for _ in range(steps):
        d = _dist(NP, ox + dx * t, oy + dy * t, oz + dz * t, k)
        active &= ~((d < f(HIT) * t) | (t > f(TMAX)))
        t = np.where(active, t + d, t)
    hit = t < f(TMAX)
    lx, ly, lz = light
    res = np.ones((height, width), f)
    if shadows:
        px, py, pz = ox + dx * t, oy + dy * t, oz + dz * t
        s = np.full((height, width), f(0.02))
        active = hit.copy()
        for _ in range(SHADOW_STEPS):
            h = _dist(NP, px + lx * s, py + ly * s, pz + lz * s, k)
            res = np.where(active, np.minimum(res, f(8) * h / s), res)
            active &= ~((res < f(1e-3)) | (s > f(8)))
            s = np.where(active, s + np.clip(h, f(0.02), f(0.5)), s)
    shadow = np.clip(res, f(0), f(1))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        rgb = shade_hit(NP, ox, oy, oz, dx, dy, dz, t, hit, k, lx, ly, lz, shadow)
    return np.stack([np.clip(c, f(0), f(1)) for c in rgb], -1).astype(f), t


# Camera and window loop ----------------------------------------------------------------------------

def orbit_camera(yaw, height, dist=6.5, target=(0.0, 0.8, 0.0)):
    """[eye, right, up, forward] (f32[4, 3], y up) of a camera circling `target` at azimuth `yaw`."""
    tx, ty, tz = target
    eye = np.array([tx + dist * math.sin(yaw), ty + height, tz + dist * math.cos(yaw)])
    fwd = np.array(target) - eye
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    return np.array([eye, right, up, fwd], np.float32)


def light_dir(angle, elevation=0.7):
    """Unit vector toward the light at azimuth `angle` and the given elevation (radians)."""
    return np.array([math.cos(elevation) * math.cos(angle), math.sin(elevation),
                     math.cos(elevation) * math.sin(angle)], np.float32)


def make_state(args):
    scale = getattr(args, "scale", 1.0)
    return SimpleNamespace(size=(max(1, int(args.height * scale)), max(1, int(args.width * scale))),
                           light_angle=0.8, smooth=0.4, steps=96, yaw=0.5, cam_height=1.6, shadows=True,
                           fov=55.0, spin=0.01, ui=True, last_mouse=None, image=None, dist=None, t=0)


def widgets(win, s):
    with em.ui.window("Ray marcher", pos=(10, 10), size=(330, 220)):
        em.ui.text(f"{s.size[1]}x{s.size[0]} pixels, {win.fps:.0f} fps")
        s.light_angle = demo_common.slider("light angle", s.light_angle, -math.pi, math.pi)
        s.smooth = demo_common.slider("smoothness", s.smooth, 0.0, 1.5)
        s.steps = demo_common.slider("march steps", s.steps, 4, 256)
        s.yaw = demo_common.slider("camera orbit", s.yaw, -math.pi, math.pi)
        s.cam_height = demo_common.slider("camera height", s.cam_height, 0.2, 5.0)
        s.spin = demo_common.slider("auto orbit speed", s.spin, 0.0, 0.05)
        s.shadows = em.ui.checkbox("soft shadows", s.shadows)


def frame(win, s):
    """One frame: widgets, orbit by mouse drag, render and show."""
    if s.ui:
        widgets(win, s)
    m = win.mouse
    dragging = m.buttons[0] and win.mouse_image is not None and not em.ui.wants_mouse()
    if dragging and s.last_mouse is not None:
        s.yaw -= 0.01 * (m.x - s.last_mouse[0])
    s.last_mouse = (m.x, m.y) if dragging else None
    s.yaw = (s.yaw + s.spin + math.pi) % (2 * math.pi) - math.pi
    H, W = s.size
    focal = 0.5 * H / math.tan(math.radians(s.fov) / 2)
    s.image, s.dist = raymarch(H, W, orbit_camera(s.yaw, s.cam_height), focal, light_dir(s.light_angle),
                               s.smooth, s.steps, int(s.shadows))
    win.show(s.image, filter="linear")
    s.t += 1
    return s.image


def main():
    p = demo_common.parser(__doc__, 800, 600)
    p.add_argument("--scale", type=float, default=0.5, help="render resolution relative to the window")
    args = p.parse_args()
    demo_common.run(args, "Ember ray marcher", make_state, frame)


if __name__ == "__main__":
    main()
