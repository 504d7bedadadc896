"""Growing neural cellular automata (after Mordvintsev et al., "Growing Neural Cellular Automata",
Distill 2020), small: a grid of cells, each a 16-channel state (RGBA + 12 hidden channels), grows
from one seed cell into a target pattern under a learned local update rule.

One CA step (`ca_step`):
  1. perception: each channel filtered by fixed 3x3 kernels (identity, Sobel x, Sobel y and a
     Laplacian, zero outside the grid) -> 64 features per cell;
  2. update: a per-cell MLP (the 1x1 convolutions of the article are em.nn.Linear layers on the
     last axis) 64 -> hidden -> 16, the last layer initialized to zero (the CA starts idle);
  3. stochastic update: each cell applies its update with probability `fire_rate` (random mask
     from em.random, a fresh seed per step), so no global clock is needed;
  4. alive masking: a cell whose 3x3 neighbourhood has no alpha > 0.1 before and after the step
     is emptied (all channels 0).

The train step (`train_program(steps)`) is one program: from a batch of seed states it runs the
CA for `steps` steps (unrolled), takes the MSE of the RGBA channels against the target, and
`opt.step(loss)` (Adam) differentiates through the whole rollout and updates the MLP in place.
`rollout` runs the CA without training (an em.loop; the window's view).

The target (`target_pattern`) is drawn analytically: a red heart with a highlight, anti-aliased,
RGBA with premultiplied alpha. Nothing is downloaded.

Usage: /usr/bin/python3 examples/nca.py [--iters 300] [--size 24] [--steps 20] [--backend cpu]
       /usr/bin/python3 examples/nca.py --window [--headless --frames N --out DIR]
The window trains the rule live and shows the CA growing from a seed (left) beside the target
(right); press the left mouse button over the CA to erase a disc of cells and watch it regrow
(a rule trained only to grow may not heal: the article's regeneration needs a sample pool and
damage during training). Widgets: learning rate, steps per train iteration, pause training,
restart the CA, reset the model.
"""
import math
import sys
import time
from types import SimpleNamespace

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
import demo_common

CHANNELS = 16


def target_pattern(size=32, radius=None):
    """The target RGBA [size, size, 4] (premultiplied alpha, f32 in 0..1, NumPy): a heart,
    anti-aliased by 4x4 supersampling."""
    radius = radius or size * 0.36
    s = 4
    y, x = (np.mgrid[0:size * s, 0:size * s].astype(np.float64) + 0.5) / s - size / 2
    u, v = x / radius * 1.25, -(y / radius * 1.25 - 0.15)  # v up
    inside = (u * u + v * v - 1) ** 3 - u * u * v ** 3 < 0
    hi = np.hypot(u + 0.45, v - 0.45) < 0.22
    rgb = np.where(hi[..., None], [1.0, 0.75, 0.75], [0.85, 0.1, 0.2])
    rgba = np.concatenate([rgb, np.ones_like(u)[..., None]], -1) * inside[..., None]
    return rgba.reshape(size, s, size, s, 4).mean((1, 3)).astype(np.float32)


def seed_state(batch, size):
    """[batch, size, size, 16] zeros with the centre cell's alpha and hidden channels at 1 (NumPy)."""
    x = np.zeros((batch, size, size, CHANNELS), np.float32)
    x[:, size // 2, size // 2, 3:] = 1.0
    return x


def _neighbours(x):
    """The 3x3 neighbourhood of every cell of x [B, H, W, C]: {(di, dj): shifted x}, zero outside
    the grid (traced)."""
    H, W = x.shape[1], x.shape[2]
    b, i, j, c = em.indices(x.shape)
    out = {}
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            ii, jj = i + di, j + dj
            inside = (ii >= 0) & (ii < H) & (jj >= 0) & (jj < W)
            out[di, dj] = x if di == dj == 0 else em.where(inside, x[b, ii, jj, c], 0.0)
    return out


SOBEL_X = ((-1, 0, 1), (-2, 0, 2), (-1, 0, 1))  # /8: d/dx (columns)
LAPLACE = ((1, 2, 1), (2, -12, 2), (1, 2, 1))  # /16


def perceive(x):
    """[B, H, W, C] -> [B, H, W, 4C]: identity, Sobel x, Sobel y and Laplacian of each channel (traced)."""
    n = _neighbours(x)

    def filt(k, scale, transpose=False):
        acc = None
        for a in range(3):
            for b in range(3):
                w = k[b][a] if transpose else k[a][b]
                if w:
                    t = n[a - 1, b - 1] * float(w * scale)
                    acc = t if acc is None else acc + t
        return acc
    return em.concat([x, filt(SOBEL_X, 1 / 8), filt(SOBEL_X, 1 / 8, True), filt(LAPLACE, 1 / 16)], axis=-1)


def alive(x):
    """Whether some cell of each 3x3 neighbourhood has alpha (channel 3) > 0.1: [B, H, W, 1] bool (traced)."""
    a = x[..., 3:4]
    m = None
    for v in _neighbours(a).values():
        m = v if m is None else em.max(m, v)
    return m > 0.1


class UpdateRule(em.nn.Module):
    """The per-cell update MLP: 4C perception features -> hidden (ReLU) -> C, last layer zero."""

    def __init__(self, hidden=64, seed=0):
        self.fc1 = em.nn.Linear(4 * CHANNELS, hidden, seed=seed)
        self.fc2 = em.nn.Linear(hidden, CHANNELS, bias=False, seed=seed + 1)
        self.fc2.weight = em.nn.Parameter(np.zeros((CHANNELS, hidden), np.float32))

    def forward(self, features):
        return self.fc2(em.nn.relu(self.fc1(features)))


def ca_step(rule, x, seed, fire_rate):
    """One stochastic, alive-masked CA step of x [B, H, W, C] (traced)."""
    pre = alive(x)
    dx = rule(perceive(x))
    fire = em.random.rand((x.shape[0], x.shape[1], x.shape[2], 1), seed) < fire_rate
    x = x + em.where(fire, dx, 0.0)
    return em.where(pre & alive(x), x, 0.0)


def _rollout_unrolled(rule, x, steps, seed, fire_rate):
    for k in range(steps):
        x = ca_step(rule, x, seed * 1024 + k, fire_rate)
    return x


_TRAIN_STEPS = {}


def train_program(steps):
    """The compiled train step for `steps` CA steps (one program per count, cached).

    The rollout is unrolled in Python rather than an em.loop: differentiating an em.loop
    accumulates the weight gradients of every step with per-element atomic adds (measured 3.6x
    slower here on cpu), while unrolled steps reduce them with sums."""
    if steps not in _TRAIN_STEPS:
        @em.compile
        def train_step(rule: UpdateRule, opt: em.optim.Adam, x0: em.f32["B", "H", "W", 16],  # noqa: F821
                       target: em.f32["H", "W", 4], seed: em.i32, fire_rate: em.f32):  # noqa: F821
            """`steps` CA steps from x0, the RGBA MSE against target, one Adam step through the
            whole rollout; returns (loss, the final states)."""
            x = _rollout_unrolled(rule, x0, steps, seed, fire_rate)
            d = x[..., 0:4] - target
            loss = em.mean(d * d)
            opt.step(loss)
            return loss, x
        _TRAIN_STEPS[steps] = train_step
    return _TRAIN_STEPS[steps]


@em.compile
def rollout(rule: UpdateRule, x0: em.f32["B", "H", "W", 16], steps: em.i32, seed: em.i32,  # noqa: F821
            fire_rate: em.f32):
    """`steps` CA steps from x0 (no training, an em.loop): the new states."""
    x = em.var(x0)
    with em.loop(steps) as k:
        x.val = ca_step(rule, x.val, seed * 1024 + k, fire_rate)
    return x.val


@em.compile
def erase(x: em.f32["B", "H", "W", 16], row: em.f32, col: em.f32, radius: em.f32):  # noqa: F821
    """x with the cells within `radius` of (row, col) emptied (the mouse's damage)."""
    b, i, j, c = em.indices(x.shape)
    di, dj = em.f32(i) + 0.5 - row, em.f32(j) + 0.5 - col
    return em.where(di * di + dj * dj < radius * radius, 0.0, x)


@em.compile
def picture(x: em.f32["B", "H", "W", 16], target: em.f32["H", "W", 4]):  # noqa: F821
    """The first CA of x beside the target, RGBA over white: [H, 2W + 2, 3]."""
    H, W = target.shape[0], target.shape[1]
    r, c, ch = em.indices((H, 2 * W + 2, 3))
    a_ca = em.clamp(x[0, r, c, 3], 0.0, 1.0)
    rgb_ca = em.clamp(x[0, r, c, ch], 0.0, 1.0) + 1.0 - a_ca
    tc = c - (W + 2)
    rgb_t = target[r, tc, ch] + 1.0 - target[r, tc, 3]
    return em.where(c < W, rgb_ca, em.where(c >= W + 2, rgb_t, 0.3))


class Trainer:
    """The rule, its optimizer, the target and seed batch on the device; `train(n)` runs n
    compiled train steps (each `steps` CA steps from the seed) and returns the last loss."""

    def __init__(self, size=24, batch=4, steps=20, hidden=32, lr=3e-3, fire_rate=0.5, seed=0):
        self.size, self.batch, self.steps, self.fire_rate = size, batch, steps, fire_rate
        self.hidden, self.lr, self.seed = hidden, lr, seed
        self.target = em.tensor(target_pattern(size))
        self.x0 = em.tensor(seed_state(batch, size))
        self.reset()

    def reset(self):
        """A fresh rule (zero last layer: the CA starts idle) and optimizer."""
        self.rule = UpdateRule(hidden=self.hidden, seed=self.seed)
        self.opt = em.optim.Adam(self.rule, lr=self.lr)
        self.iters, self.loss = 0, float("nan")

    def train(self, n=1, lr=None):
        """n train steps (learning rate `lr`, default unchanged); returns the last loss."""
        if lr is not None:
            self.opt.lr = lr
        prog, loss = train_program(self.steps), None
        for _ in range(n):
            loss, _ = prog(self.rule, self.opt, self.x0, self.target, self.iters, self.fire_rate)
            self.iters += 1
        if loss is not None:
            self.loss = float(loss)
        return self.loss

    def grow(self, steps, seed=0, x=None):
        """`steps` CA steps from x (default: one seed cell) with the current rule: [1, H, W, 16]."""
        x = em.tensor(seed_state(1, self.size)) if x is None else x
        return rollout(self.rule, x, steps, seed, self.fire_rate)

    def grown_loss(self, steps=None, seed=12345):
        """The RGBA MSE of one CA grown `steps` steps (default: the training count) from the seed."""
        x = self.grow(self.steps if steps is None else steps, seed).numpy()[0]
        return float(np.mean((x[..., :4] - self.target.numpy()) ** 2))


# Window loop (examples/demo_common.py) -------------------------------------------------------------

def make_state(args):
    """The trainer, the shown CA and the widgets' values."""
    tr = Trainer(size=args.size, batch=args.batch, steps=args.steps, hidden=args.hidden, lr=args.lr)
    return SimpleNamespace(trainer=tr, x=tr.grow(0), age=0, frames=0, log_lr=math.log10(args.lr), training=True,
                           ca_steps=1, auto_restart=True, brush=3.0, ui=True, image=None)


def widgets(win, s):
    """Learning rate, training on/off, CA speed, restart/reset buttons, brush size, loss plot."""
    tr = s.trainer
    with em.ui.window("Neural CA", pos=(10, 10), size=(320, 250)):
        em.ui.text(f"iteration {tr.iters}   loss {tr.loss:.5f}   CA age {s.age}")
        s.log_lr = demo_common.slider("log10 learning rate", s.log_lr, -4.0, -1.5)
        s.training = em.ui.checkbox("train", s.training)
        em.ui.same_line()
        s.auto_restart = em.ui.checkbox("regrow every 3K steps", s.auto_restart)
        s.ca_steps = demo_common.slider("CA steps per frame", s.ca_steps, 0, 8)
        s.brush = demo_common.slider("eraser radius", s.brush, 1.0, 8.0)
        if em.ui.button("restart CA"):
            s.x, s.age = tr.grow(0), 0
        em.ui.same_line()
        if em.ui.button("reset model"):
            tr.reset()
            s.x, s.age = tr.grow(0), 0
        if tr.iters:
            em.ui.plot("log10 loss", math.log10(max(tr.loss, 1e-12)), history=300)


def frame(win, s):
    """One frame: widgets, a train step (when on), the mouse's eraser, CA steps, show."""
    if s.ui:
        widgets(win, s)
    tr = s.trainer
    if s.training:
        tr.train(1, lr=10 ** s.log_lr)
    m, at = win.mouse, win.mouse_image
    if m.left and at is not None and not (s.ui and em.ui.wants_mouse()) and at[1] < tr.size:
        s.x = erase(s.x, float(at[0]), float(at[1]), s.brush)
    if s.auto_restart and s.age >= 3 * tr.steps:
        s.x, s.age = tr.grow(0), 0
    if s.ca_steps:
        s.x = rollout(tr.rule, s.x, s.ca_steps, 7919 * s.frames + 1, tr.fire_rate)
        s.age += s.ca_steps
    s.frames += 1
    s.image = picture(s.x, tr.target)
    win.show(s.image)
    return s.image


def train(args):
    """Trains args.iters steps in the terminal, printing the loss; then grows a CA from the seed
    with the trained rule and reports its loss. Returns the Trainer."""
    em.init(backend=args.backend)
    tr = Trainer(size=args.size, batch=args.batch, steps=args.steps, hidden=args.hidden, lr=args.lr)
    t0 = time.perf_counter()
    first = tr.train(1)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = max(1, args.iters // 10)
    while tr.iters < args.iters:
        tr.train(min(report, args.iters - tr.iters))
        print(f"iteration {tr.iters:5d}  loss {tr.loss:.5f}  {time.perf_counter() - t0:7.1f} s", flush=True)
    secs = time.perf_counter() - t0
    empty = float(np.mean(tr.target.numpy() ** 2))
    grown = tr.grown_loss()
    print(f"{args.iters} iterations of {args.steps} CA steps, batch {args.batch}, on {args.backend}: loss {first:.5f} "
          f"-> {tr.loss:.5f} in {secs:.1f} s (first iteration with compile {t_compile:.1f} s); a CA grown from the "
          f"seed: loss {grown:.5f} (an empty grid: {empty:.5f})")
    if args.save:
        em.save(args.save, tr.rule)
    return tr


def main():
    """Trains in the terminal, or live in a window with --window."""
    p = demo_common.parser(__doc__, 720, 360)
    p.add_argument("--window", action="store_true", help="train and grow live in a window")
    p.add_argument("--iters", type=int, default=300, help="train steps (terminal mode)")
    p.add_argument("--size", type=int, default=24, help="grid size")
    p.add_argument("--batch", type=int, default=4, help="CAs per train step")
    p.add_argument("--steps", type=int, default=20, help="CA steps per train step (the unrolled rollout)")
    p.add_argument("--hidden", type=int, default=32, help="hidden units of the update MLP")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate")
    p.add_argument("--save", default=None, help="save the trained rule (.npz) here (terminal mode)")
    args = p.parse_args()
    if args.window or args.headless or args.frames or args.out:
        demo_common.run(args, "Ember neural CA", make_state, frame)
    else:
        train(args)


if __name__ == "__main__":
    sys.exit(main())
