"""Texture embedder: a small grid of learnable feature vectors, sampled with smooth interpolation
and decoded to RGB by a tiny MLP, fit to an image by a compiled train step.

The model (`TextureEmbedder`) holds an embedding texture [G, G, C]. A point (u, v) in [0, 1]^2
reads it twice with smoothstep-weighted bilinear interpolation: once on the texel grid and once
on the grid shifted by half a texel. Smoothstep weights have zero slope at texel borders, so one
lookup alone would show the grid; the shifted lookup has its flat spots elsewhere and the MLP
combines the 2C features into a smooth image (the trick of Instant-NGP's appendix, used by the
TensorFrost blog's texture embedder). The MLP (2C -> hidden -> hidden -> 3, ReLU, sigmoid out)
is em.nn, trained with em.optim.Adam.

`train_step` is one program: draw `batch` random pixels (em.random.randint from a step seed),
gather their target colours from the image on the device, run the model, MSE loss, Adam update
of the texture and the MLP in place. `render` decodes every pixel and returns the reconstruction
beside the target and the whole-image MSE (PSNR = -10 log10 MSE).

The target is procedural (`target_image`): a sky gradient, a sun with a soft edge, rings, a
checkerboard patch and a sine-wave horizon; nothing is downloaded.

Usage: /usr/bin/python3 examples/train_image.py [--steps 2000] [--size 128] [--backend cpu]
       /usr/bin/python3 examples/train_image.py --window [--headless --frames N --out DIR]
The window shows the reconstruction (left) beside the target (right), live, with the loss and
PSNR plots, a learning-rate slider (a runtime scalar: no recompile), steps per frame, pause and
reset.
"""
import math
import sys
import time
from types import SimpleNamespace

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
import demo_common


def target_image(size=128):
    """The procedural target, f32 [size, size, 3] in 0..1 (NumPy)."""
    y, x = (np.mgrid[0:size, 0:size].astype(np.float32) + 0.5) / size
    sky = np.stack([0.15 + 0.75 * y, 0.25 + 0.35 * y, 0.65 - 0.45 * y], -1)
    horizon = 0.72 + 0.04 * np.sin(9.0 * x)
    ground = (y > horizon)[..., None]
    img = np.where(ground, np.stack([0.1 + 0.2 * x, 0.35 + 0.1 * np.sin(20 * y), 0.15 + 0.0 * x], -1), sky)
    r = np.hypot(x - 0.32, y - 0.33)
    sun = np.clip((0.16 - r) / 0.01, 0.0, 1.0)[..., None]
    img = img * (1 - sun) + sun * np.array([1.0, 0.85, 0.3])
    ring = (np.abs(np.sin(60.0 * np.hypot(x - 0.75, y - 0.3))) > 0.5) & (np.hypot(x - 0.75, y - 0.3) < 0.18)
    img = np.where(ring[..., None], np.array([0.9, 0.9, 0.95]), img)
    check = ((np.floor(x * 16) + np.floor(y * 16)) % 2 == 0) & (x > 0.55) & (x < 0.9) & (y > 0.78) & (y < 0.95)
    img = np.where(check[..., None], np.array([0.95, 0.3, 0.2]), img)
    return np.clip(img, 0.0, 1.0).astype(np.float32)


def smooth_sample(tex, p):
    """Bilinear interpolation of tex [G, G, C] at texel coordinates p [..., 2] (row, col) with
    smoothstep weights (zero slope at texel borders); the gathers clamp at the edges (traced)."""
    base = em.floor(p)
    t = p - base
    w = t * t * (3.0 - 2.0 * t)
    i, j = em.cast(base[..., 0], em.i32), em.cast(base[..., 1], em.i32)
    wi, wj = w[..., 0:1], w[..., 1:2]
    top = tex[i, j] * (1.0 - wj) + tex[i, j + 1] * wj
    bottom = tex[i + 1, j] * (1.0 - wj) + tex[i + 1, j + 1] * wj
    return top * (1.0 - wi) + bottom * wi


class TextureEmbedder(em.nn.Module):
    """A [grid, grid, channels] embedding texture read twice (on the grid and half a texel off)
    with smoothstep interpolation, decoded by an MLP to RGB in (0, 1)."""

    def __init__(self, grid=16, channels=8, hidden=32, seed=0):
        rng = np.random.default_rng(seed)
        self.grid = grid
        self.tex = em.nn.Parameter(rng.uniform(-0.5, 0.5, (grid, grid, channels)).astype(np.float32))
        self.fc1 = em.nn.Linear(2 * channels, hidden, seed=seed + 1)
        self.fc2 = em.nn.Linear(hidden, hidden, seed=seed + 2)
        self.fc3 = em.nn.Linear(hidden, 3, seed=seed + 3)

    def forward(self, uv):
        """uv [..., 2] (row, col) in [0, 1] -> RGB [..., 3]."""
        p = uv * float(self.grid - 1)
        f = em.concat([smooth_sample(self.tex, p), smooth_sample(self.tex, p + 0.5)], axis=-1)
        h = em.nn.relu(self.fc1(f))
        h = em.nn.relu(self.fc2(h))
        return em.nn.sigmoid(self.fc3(h))


def pixel_uv(i, j, H, W):
    """The [0, 1] coordinates (row, col) of pixel centres (traced), stacked on a last axis."""
    return em.stack([(em.f32(i) + 0.5) / em.f32(H), (em.f32(j) + 0.5) / em.f32(W)], axis=-1)


@em.compile
def train_step(model: TextureEmbedder, opt: em.optim.Adam, target: em.f32["H", "W", 3],  # noqa: F821
               seed: em.i32, batch: em.i32):
    """One Adam step on the MSE of `batch` random pixels (drawn on the device from `seed`);
    returns the loss."""
    H, W = target.shape[0], target.shape[1]
    idx = em.random.randint((batch,), seed, 0, H * W)
    i, j = idx // W, idx % W
    loss = em.nn.mse_loss(model(pixel_uv(i, j, H, W)), target[i, j])
    opt.step(loss)
    return loss


@em.compile
def render(model: TextureEmbedder, target: em.f32["H", "W", 3], band: em.i32):  # noqa: F821
    """(the reconstruction beside the target, over a dark band of `band` rows for the widgets:
    [H + band, 2W + 4, 3]; the whole-image MSE)."""
    H, W = target.shape[0], target.shape[1]
    i, j = em.indices((H, W))
    rgb = model(pixel_uv(i, j, H, W))
    d = rgb - target
    r, c = em.indices((H + band, 2 * W + 4))  # the composite, by gathers (clamped at the edges)
    shown = em.where((c < W)[..., None], rgb[r, c], target[r, c - (W + 4)])
    inside = (r < H) & ((c < W) | (c >= W + 4))
    return em.where(inside[..., None], shown, 0.08), em.mean(d * d)


def psnr(mse):
    """Peak signal-to-noise ratio in dB of an MSE of 0..1 images."""
    return -10.0 * math.log10(max(float(mse), 1e-12))


class Trainer:
    """The model, its optimizer, the target on the device and the step counter; `step(n)` runs n
    compiled train steps and returns the last loss (read back once)."""

    def __init__(self, size=128, grid=16, channels=8, hidden=32, batch=4096, lr=1e-2, seed=0):
        self.target = em.tensor(target_image(size))
        self.config = dict(grid=grid, channels=channels, hidden=hidden, seed=seed)
        self.batch, self.lr = batch, lr
        self.reset()

    def reset(self):
        """A fresh model and optimizer (same seed: the same start)."""
        self.model = TextureEmbedder(**self.config)
        self.opt = em.optim.Adam(self.model, lr=self.lr)
        self.steps, self.loss = 0, float("nan")

    def step(self, n=1, lr=None):
        """n train steps at learning rate `lr` (default: unchanged); returns the last loss."""
        if lr is not None:
            self.opt.lr = lr
        loss = None
        for _ in range(n):
            loss = train_step(self.model, self.opt, self.target, self.steps, self.batch)
            self.steps += 1
        if loss is not None:
            self.loss = float(loss)
        return self.loss

    def render(self, band=0):
        """(side-by-side image em.Tensor over `band` empty rows, whole-image MSE as a float)."""
        img, mse = render(self.model, self.target, band)
        return img, float(mse)


# Window loop (examples/demo_common.py) -------------------------------------------------------------

def make_state(args):
    """The trainer and the widgets' values."""
    tr = Trainer(size=args.size, grid=args.grid, batch=args.batch, lr=args.lr)
    return SimpleNamespace(trainer=tr, log_lr=math.log10(args.lr), steps_per_frame=args.steps_per_frame,
                           paused=False, ui=True, psnr=float("nan"), image=None, band=args.size * 9 // 16)


def widgets(win, s):
    """Learning rate (log scale), steps per frame, pause, reset, loss and PSNR plots."""
    tr = s.trainer
    size = win.size
    with em.ui.window("Texture embedder", pos=(10, size[1] - size[1] * 0.36), size=(size[0] * 0.5 - 20, size[1] * 0.34)):
        em.ui.text(f"step {tr.steps}   loss {tr.loss:.5f}   PSNR {s.psnr:.2f} dB   {win.fps:.0f} fps")
        s.log_lr = demo_common.slider("log10 learning rate", s.log_lr, -4.0, -1.0)
        s.steps_per_frame = demo_common.slider("steps per frame", s.steps_per_frame, 1, 20)
        s.paused = em.ui.checkbox("pause", s.paused)
        em.ui.same_line()
        if em.ui.button("reset"):
            tr.reset()
        em.ui.text(f"lr = {10 ** s.log_lr:.2e} (a runtime scalar: no recompile)")
    with em.ui.window("Training curves", pos=(size[0] * 0.5, size[1] - size[1] * 0.36),
                      size=(size[0] * 0.5 - 10, size[1] * 0.34)):
        if tr.steps:
            em.ui.plot("log10 loss", math.log10(max(tr.loss, 1e-12)), history=300)
            em.ui.plot("PSNR dB", s.psnr, history=300)


def frame(win, s):
    """One frame: widgets, `steps_per_frame` train steps (unless paused), render and show."""
    if s.ui:
        widgets(win, s)
    if not s.paused:
        s.trainer.step(s.steps_per_frame, lr=10 ** s.log_lr)
    s.image, mse = s.trainer.render(s.band)
    s.psnr = psnr(mse)
    win.show(s.image, filter="nearest")
    return s.image


def train(args):
    """Trains args.steps steps in the terminal, printing the loss and PSNR; returns the Trainer."""
    em.init(backend=args.backend)
    tr = Trainer(size=args.size, grid=args.grid, batch=args.batch, lr=args.lr)
    t0 = time.perf_counter()
    tr.step(1)  # compiles train_step
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = max(1, args.steps // 10)
    while tr.steps < args.steps:
        tr.step(min(report, args.steps - tr.steps))
        _, mse = tr.render()
        print(f"step {tr.steps:5d}  batch loss {tr.loss:.5f}  image PSNR {psnr(mse):6.2f} dB  "
              f"{time.perf_counter() - t0:6.1f} s", flush=True)
    secs = time.perf_counter() - t0
    print(f"{args.steps} steps of batch {args.batch} on {args.backend}: PSNR {psnr(mse):.2f} dB in {secs:.1f} s "
          f"({(args.steps - 1) / secs:.1f} steps/s; first step with compile {t_compile:.1f} s)")
    return tr


def main():
    """Trains in the terminal, or live in a window with --window."""
    p = demo_common.parser(__doc__, 1040, 800)
    p.add_argument("--window", action="store_true", help="train live in a window")
    p.add_argument("--steps", type=int, default=1000, help="train steps (terminal mode)")
    p.add_argument("--size", type=int, default=128, help="target image size")
    p.add_argument("--grid", type=int, default=16, help="embedding texture size")
    p.add_argument("--batch", type=int, default=2048, help="pixels per step")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate")
    p.add_argument("--steps-per-frame", type=int, default=4, help="train steps per frame (window)")
    args = p.parse_args()
    if args.window or args.headless or args.frames or args.out:
        demo_common.run(args, "Ember texture embedder", make_state, frame)
    else:
        train(args)


if __name__ == "__main__":
    sys.exit(main())
