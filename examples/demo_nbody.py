"""Interactive N-body: the step of examples/nbody.py, an orbit camera and a point-splat renderer
written in Ember (the TensorFrost SPH renderer technique).

Rendering, one program (`render`), three kernels per frame:
  1. clear a u32 [H, W] depth buffer to 0xFFFFFFFF;
  2. one thread per body: project it with the camera, pack its depth (the float's bits mapped
     to an unsigned integer of the same order, upper bits) and its index (lower `idx_bits` bits)
     into one u32 key, and em.atomic_min the key into every pixel of a small disc around the
     projected point; the nearest body wins each pixel, ties go to the lower index;
  3. resolve: one thread per pixel unpacks the winning body's index and shades it by its speed,
     fogged by its depth (unpacked from the same key); empty pixels get a background gradient.

Controls: drag with the left mouse button to orbit, scroll (or W/S) to zoom, A/D to turn;
widgets for the time step, steps per frame, splat radius, colour scale, pause and reset.

Usage: /usr/bin/python3 examples/demo_nbody.py [--n 2048] [--backend cpu|opengl|vulkan]
       [--headless --frames N --out DIR] [--width 800 --height 600]
"""
import math
from types import SimpleNamespace

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
import demo_common
from nbody import step  # the DESIGN.md section 5 step: all-pairs gravity, symplectic Euler

EMPTY = 0xFFFFFFFF  # the cleared depth buffer: greater than every key of a visible body
NEAR = 0.1  # bodies nearer than this to the eye (or behind it) are not drawn


def index_bits(n):
    """Bits the body index takes in a key (the rest keep the upper bits of the depth)."""
    return max(1, (n - 1).bit_length())


def _ordered_uint(f):
    """The bits of float f as a u32 whose unsigned order is the float order (traced): flip every
    bit of a negative float, only the sign bit of a positive one."""
    u = em.bitcast(f, em.u32)
    return u ^ em.where((u >> 31) == 1, em.u32(EMPTY), em.u32(0x80000000))


def _float_from_ordered(u):
    """Inverse of _ordered_uint (traced)."""
    return em.bitcast(u ^ em.where((u >> 31) == 1, em.u32(0x80000000), em.u32(EMPTY)), em.f32)


def _palette(s):
    """Colour ramp for s in [0, 1]: slow bodies deep blue, then cyan, white-hot when fast."""
    return (0.15 + 0.85 * em.smoothstep(0.35, 1.0, s),
            0.25 + 0.75 * em.smoothstep(0.1, 0.8, s),
            0.6 + 0.4 * em.smoothstep(0.0, 0.4, s))


@em.compile
def render(X: em.f32["N", 3], V: em.f32["N", 3], cam: em.f32[4, 3], focal: em.f32,  # noqa: F821
           height: em.i32, width: em.i32, radius: em.i32, idx_bits: em.i32, speed_scale: em.f32,
           fog: em.f32):
    """Splat-renders the bodies X (coloured by the speed |V| * speed_scale) seen by the camera
    cam = [eye, right, up, forward] (rows, world space) with a focal length in pixels.
    Returns (image f32[height, width, 3], depth buffer u32[height, width], key u32[N],
    pixel i32[N, 2]): the key of each body (EMPTY when it is behind the near plane) and the
    (row, col) it projects to."""
    n = X.shape[0]
    b = em.u32(idx_bits)
    mask = (em.u32(1) << b) - 1
    D = em.zeros((height, width), em.u32)
    key = em.zeros((n,), em.u32)
    pix = em.zeros((n, 2), em.i32)
    with em.kernel((height, width)) as (i, j):  # 1. clear
        D[i, j] = em.u32(EMPTY)
    with em.kernel(n) as k:  # 2. project, pack, atomic_min
        px, py, pz = X[k, 0] - cam[0, 0], X[k, 1] - cam[0, 1], X[k, 2] - cam[0, 2]
        xc = px * cam[1, 0] + py * cam[1, 1] + pz * cam[1, 2]
        yc = px * cam[2, 0] + py * cam[2, 1] + pz * cam[2, 2]
        zc = px * cam[3, 0] + py * cam[3, 1] + pz * cam[3, 2]
        z = em.max(zc, NEAR)
        sx = em.clamp(0.5 * em.f32(width) + focal * xc / z, -1e6, 1e6)
        sy = em.clamp(0.5 * em.f32(height) - focal * yc / z, -1e6, 1e6)
        ci, cj = em.i32(em.floor(sy)), em.i32(em.floor(sx))
        kk = ((_ordered_uint(z) >> b) << b) | em.u32(k)
        visible = zc > NEAR
        key[k] = em.where(visible, kk, em.u32(EMPTY))
        pix[k, 0] = ci
        pix[k, 1] = cj
        with em.if_(visible):
            r2 = radius * radius + radius  # a disc: the pixels with di^2 + dj^2 <= r^2 + r
            with em.loop(-radius, radius + 1) as di:
                with em.loop(-radius, radius + 1) as dj:
                    y, x = ci + di, cj + dj
                    with em.if_((di * di + dj * dj <= r2) & (y >= 0) & (y < height) & (x >= 0) & (x < width)):
                        em.atomic_min(D[y, x], kk)
    img = em.zeros((height, width, 3), em.f32)
    with em.kernel((height, width)) as (i, j):  # 3. resolve
        kd = D[i, j]
        body = em.i32(kd & mask)
        vx, vy, vz = V[body, 0], V[body, 1], V[body, 2]
        s = em.clamp(em.sqrt(vx * vx + vy * vy + vz * vz) * speed_scale, 0.0, 1.0)
        depth = _float_from_ordered(kd & ~mask)
        shade = em.exp(-fog * depth)
        c = _palette(s)
        t = em.f32(i) / em.f32(height)  # background: a dark vertical gradient
        bg = (0.02 + 0.03 * t, 0.02 + 0.02 * t, 0.05 + 0.05 * t)
        hit = kd != em.u32(EMPTY)
        for ch in range(3):
            img[i, j, ch] = em.where(hit, c[ch] * shade, bg[ch])
    return img, D, key, pix


# NumPy references (float32, the same operations in the same order) --------------------------------

def _ordered_uint_numpy(f):
    u = np.asarray(f, np.float32).view(np.uint32)
    return u ^ np.where((u >> 31) == 1, np.uint32(EMPTY), np.uint32(0x80000000))


def _float_from_ordered_numpy(u):
    return (u ^ np.where((u >> 31) == 1, np.uint32(0x80000000), np.uint32(EMPTY))).view(np.float32)


def _smoothstep_numpy(e0, e1, x):
    t = np.clip((x - np.float32(e0)) / np.float32(e1 - e0), 0, 1)
    return t * t * (np.float32(3) - np.float32(2) * t)


def project_numpy(X, cam, focal, height, width, idx_bits):
    """Keys u32[N] (EMPTY for bodies behind the near plane) and pixels i32[N, 2] of `render`."""
    f = np.float32
    X, cam, focal = X.astype(f), cam.astype(f), f(focal)
    p = X - cam[0]
    xc = p[:, 0] * cam[1, 0] + p[:, 1] * cam[1, 1] + p[:, 2] * cam[1, 2]
    yc = p[:, 0] * cam[2, 0] + p[:, 1] * cam[2, 1] + p[:, 2] * cam[2, 2]
    zc = p[:, 0] * cam[3, 0] + p[:, 1] * cam[3, 1] + p[:, 2] * cam[3, 2]
    z = np.maximum(zc, f(NEAR))
    sx = np.clip(f(0.5) * f(width) + focal * xc / z, f(-1e6), f(1e6))
    sy = np.clip(f(0.5) * f(height) - focal * yc / z, f(-1e6), f(1e6))
    ci, cj = np.floor(sy).astype(np.int32), np.floor(sx).astype(np.int32)
    b = np.uint32(idx_bits)
    key = ((_ordered_uint_numpy(z) >> b) << b) | np.arange(len(X), dtype=np.uint32)
    key = np.where(zc > f(NEAR), key, np.uint32(EMPTY))
    return key, np.stack([ci, cj], 1)


def splat_numpy(key, pix, height, width, radius):
    """The depth buffer: the minimum key over the bodies whose disc covers each pixel."""
    D = np.full((height, width), EMPTY, np.uint32)
    r = radius
    for di in range(-r, r + 1):
        for dj in range(-r, r + 1):
            if di * di + dj * dj > r * r + r:
                continue
            y, x = pix[:, 0] + di, pix[:, 1] + dj
            ok = (key != np.uint32(EMPTY)) & (y >= 0) & (y < height) & (x >= 0) & (x < width)
            np.minimum.at(D, (y[ok], x[ok]), key[ok])
    return D


def resolve_numpy(D, V, idx_bits, speed_scale, fog):
    """The image `render` shades from the depth buffer D."""
    f = np.float32
    H, W = D.shape
    mask = np.uint32((1 << idx_bits) - 1)
    body = (D & mask).astype(np.int64)
    body = np.minimum(body, len(V) - 1)  # the clamped gather of an empty pixel
    v = V[body].astype(f)
    s = np.clip(np.sqrt(v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1] + v[..., 2] * v[..., 2]) * f(speed_scale), 0, 1)
    depth = _float_from_ordered_numpy(D & ~mask)
    with np.errstate(over="ignore", invalid="ignore"):
        shade = np.exp(-f(fog) * depth)
    c = (f(0.15) + f(0.85) * _smoothstep_numpy(0.35, 1.0, s),
         f(0.25) + f(0.75) * _smoothstep_numpy(0.1, 0.8, s),
         f(0.6) + f(0.4) * _smoothstep_numpy(0.0, 0.4, s))
    t = (np.arange(H, dtype=f) / f(H))[:, None]
    bg = (f(0.02) + f(0.03) * t, f(0.02) + f(0.02) * t, f(0.05) + f(0.05) * t)
    hit = D != np.uint32(EMPTY)
    return np.stack([np.where(hit, c[ch] * shade, np.broadcast_to(bg[ch], D.shape)) for ch in range(3)],
                    -1).astype(f)


# Camera and scene (host side) ---------------------------------------------------------------------

def orbit_camera(yaw, pitch, dist, target=(0.0, 0.0, 0.0)):
    """[eye, right, up, forward] (f32[4, 3]) of a camera at `dist` from `target`, looking at it
    from azimuth `yaw` and elevation `pitch` (radians; z is up)."""
    d = np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch)])
    fwd = -d
    eye = np.asarray(target, np.float64) + dist * d
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    return np.array([eye, right, up, fwd], np.float32)


def galaxy(n, seed=0):
    """Two rotating discs of unit-mass bodies on a collision course (positions, velocities)."""
    rng = np.random.default_rng(seed)
    X, V = np.zeros((n, 3), np.float32), np.zeros((n, 3), np.float32)
    halves = [(0, n // 2, np.array([-25.0, -8.0, 0.0]), np.array([1.2, 0.4, 0.0]), 0.3),
              (n // 2, n, np.array([25.0, 8.0, 0.0]), np.array([-1.2, -0.4, 0.0]), -0.5)]
    for a, b, centre, drift, tilt in halves:
        m = b - a
        r = 18.0 * np.sqrt(rng.uniform(0.02, 1.0, m))
        phi = rng.uniform(0, 2 * np.pi, m)
        p = np.stack([r * np.cos(phi), r * np.sin(phi), rng.normal(0, 0.8, m)], 1)
        enclosed = m * (r / 18.0) ** 2  # uniform surface density: mass inside radius r
        speed = np.sqrt(enclosed / np.maximum(r, 1.0)) * 0.9
        v = np.stack([-np.sin(phi) * speed, np.cos(phi) * speed, np.zeros(m)], 1)
        rot = np.array([[1, 0, 0], [0, math.cos(tilt), -math.sin(tilt)], [0, math.sin(tilt), math.cos(tilt)]])
        X[a:b] = p @ rot.T + centre
        V[a:b] = v @ rot.T + drift * 3.0
    return X, V


# Window loop ---------------------------------------------------------------------------------------

def make_state(args):
    """The bodies (em.Tensor), the camera and the widgets' values."""
    X, V = galaxy(args.n)
    return SimpleNamespace(
        n=args.n, X=em.tensor(X), V=em.tensor(V), X0=X, V0=V, yaw=0.6, pitch=0.5, dist=110.0, fov=50.0,
        dt=0.01, steps=1, radius=1, speed_scale=0.08, fog=0.004, paused=False, ui=True,
        last_mouse=None, frame_count=0, image=None, size=(args.height, args.width))


def update_camera(win, s):
    """Orbit with a left-button drag (or A/D), zoom with the scroll wheel (or W/S)."""
    m = win.mouse
    pos = (m.x, m.y)
    if em.ui.wants_mouse():  # over the widgets: leave the mouse to them
        m = SimpleNamespace(buttons=(False, False, False), scroll=0)
    if m.buttons[0] and s.last_mouse is not None:
        s.yaw -= 0.01 * (pos[0] - s.last_mouse[0])
        s.pitch = min(max(s.pitch + 0.01 * (pos[1] - s.last_mouse[1]), -1.5), 1.5)
    s.last_mouse = pos if m.buttons[0] else None
    if m.scroll:
        s.dist *= 0.9 ** m.scroll
    if win.key_down("W"):
        s.dist *= 0.97
    if win.key_down("S"):
        s.dist /= 0.97
    if win.key_down("A"):
        s.yaw -= 0.03
    if win.key_down("D"):
        s.yaw += 0.03
    s.dist = min(max(s.dist, 5.0), 1000.0)


def widgets(win, s):
    with em.ui.window("N-body", pos=(10, 10), size=(330, 250)):
        em.ui.text(f"{s.n} bodies, {win.fps:.0f} fps")
        s.dt = demo_common.slider("time step", s.dt, 0.001, 0.03)
        s.steps = demo_common.slider("steps per frame", s.steps, 0, 8)
        s.radius = demo_common.slider("splat radius", s.radius, 0, 4)
        s.speed_scale = demo_common.slider("colour scale", s.speed_scale, 0.01, 0.5)
        s.paused = em.ui.checkbox("pause", s.paused)
        if em.ui.button("reset"):
            s.X, s.V = em.tensor(s.X0), em.tensor(s.V0)
        em.ui.plot("frame ms", 1e3 * win.frame_time, history=200)


def frame(win, s):
    """One frame: camera input, widgets, `steps` simulation steps, render and show."""
    update_camera(win, s)
    if s.ui:
        widgets(win, s)
    if not s.paused:
        for _ in range(s.steps):
            s.X, s.V = step(s.X, s.V, s.dt)
    H, W = s.size
    focal = 0.5 * H / math.tan(math.radians(s.fov) / 2)
    cam = orbit_camera(s.yaw, s.pitch, s.dist)
    s.image = render(s.X, s.V, cam, focal, H, W, s.radius, index_bits(s.n), s.speed_scale, s.fog)[0]
    win.show(s.image)
    s.frame_count += 1
    return s.image


def main():
    p = demo_common.parser(__doc__, 800, 600)
    p.add_argument("--n", type=int, default=2048, help="number of bodies")
    args = p.parse_args()
    demo_common.run(args, "Ember N-body", make_state, frame)


if __name__ == "__main__":
    main()
