"""Trains an MLP or a small CNN on scikit-learn's digits (1797 8x8 images, bundled with
python3-sklearn: no download), the whole train step -- forward, cross-entropy, backward, Adam --
as one compiled program taking the model and the optimizer as arguments.

The data set is uploaded once (em.Tensor); each minibatch is gathered inside the train step
from indices drawn there (em.data.random_batch, seeded by the step number), so the loop copies
nothing per step but the loss, and only when it prints it. The batch size and the learning rate
are runtime scalars: changing them never recompiles.

--window shows it training live: loss and test-accuracy plots, the first layer's weights as
images (orange positive, blue negative), 16 test digits with the predicted digit under each
(green right, red wrong), sliders for the learning rate, batch size and steps per frame, pause
and reset buttons.

Usage: /usr/bin/python3 examples/train_digits.py [--model mlp|cnn] [--steps 500] [--batch 64]
       [--lr 3e-3] [--backend cpu] [--window [--headless --frames N --out DIR]]
"""
import math
import time
from types import SimpleNamespace

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
import demo_common


def load_data(n_test=360, seed=0):
    """(X_train, y_train, X_test, y_test): the digits scaled to [0, 1] (f32 [n, 64]) and their
    labels (i32), split by a fixed permutation (`seed`) with n_test images held out."""
    from sklearn.datasets import load_digits
    d = load_digits()
    X, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int32)
    p = np.random.default_rng(seed).permutation(len(X))
    return X[p[n_test:]], y[p[n_test:]], X[p[:n_test]], y[p[:n_test]]


class MLP(em.nn.Module):
    """64 -> hidden -> 10 with a ReLU."""

    def __init__(self, hidden=128, seed=0):
        self.fc1 = em.nn.Linear(64, hidden, seed=seed)
        self.fc2 = em.nn.Linear(hidden, 10, seed=seed + 1)

    def forward(self, x):
        """Logits [B, 10] of images x [B, 64] (traced)."""
        return self.fc2(em.nn.relu(self.fc1(x)))

    def filters(self):
        """The first layer's weights as images [hidden, 8, 8] (traced)."""
        return em.reshape(self.fc1.weight, (self.fc1.out_features, 8, 8))


class CNN(em.nn.Module):
    """conv 3x3 (c channels) -> ReLU -> conv 3x3 stride 2 (2c) -> ReLU -> linear, on [B, 64] input."""

    def __init__(self, channels=8, seed=0):
        c = channels
        self.conv1 = em.nn.Conv2d(1, c, 3, padding=1, seed=seed)
        self.conv2 = em.nn.Conv2d(c, 2 * c, 3, stride=2, padding=1, seed=seed + 1)
        self.fc = em.nn.Linear(2 * c * 16, 10, seed=seed + 2)

    def forward(self, x):
        """Logits [B, 10] of images x [B, 64] (traced)."""
        h = em.nn.relu(self.conv1(em.reshape(x, (x.shape[0], 1, 8, 8))))
        h = em.nn.relu(self.conv2(h))  # [B, 2c, 4, 4]
        return self.fc(em.reshape(h, (h.shape[0], self.fc.in_features)))

    def filters(self):
        """The first convolution's kernels as images [c, 3, 3] (traced)."""
        return em.reshape(self.conv1.weight, (self.conv1.out_channels, 3, 3))


MODELS = {"mlp": MLP, "cnn": CNN}

# The frame drawn beside the widgets (canvas pixels; the window shows it scaled to its size).
CANVAS = (270, 480)
TILE, CELL, COLS = 24, 28, 8            # a weight image or digit, its cell with the gap, per row
WEIGHTS_AT, DIGITS_AT = (16, 224), (146, 224)
N_SHOWN = 16                            # test digits shown
FONT = np.array([[int(c) for c in row] for g in (  # 3x5 glyphs of 0..9
    "111 101 101 101 111", "010 110 010 010 111", "111 001 111 100 111", "111 001 111 001 111",
    "101 101 111 001 001", "111 100 111 001 111", "111 100 111 101 111", "111 001 010 010 010",
    "111 101 111 101 111", "111 101 111 001 111") for row in g.split()], np.int32).reshape(10, 5, 3)


def _render(model, Xs, ys, font):
    """The canvas [H, W, 3]: the first layer's weights (up to 32, each scaled by its largest
    |w|) and the test digits Xs with the model's prediction drawn under each (traced)."""
    i, j = em.indices(CANVAS)
    img = [em.where(j < 200, 0.06, 0.1) + 0.0 * em.f32(i) for _ in range(3)]
    F = model.filters()
    nt, h, w = F.shape
    m = em.max(em.abs(F), axis=(1, 2)) + 1e-8
    y, x = i - WEIGHTS_AT[0], j - WEIGHTS_AT[1]
    r, c, ly, lx = y // CELL, x // CELL, y % CELL, x % CELL
    t = r * COLS + c
    on = (y >= 0) & (x >= 0) & (c < COLS) & (t < min(nt, 32)) & (ly < TILE) & (lx < TILE)
    v = F[t, ly * h // TILE, lx * w // TILE] / m[t]
    pos, neg = em.max(v, 0.0), em.max(-v, 0.0)
    for k, (a, b) in enumerate(((1.0, 0.2), (0.6, 0.6), (0.2, 1.0))):  # orange +, blue -
        img[k] = em.where(on, 0.08 + a * pos + b * neg, img[k])
    pred = em.argmax(model(Xs), axis=1)
    good = pred == ys
    y, x = i - DIGITS_AT[0], j - DIGITS_AT[1]
    r, c, ly, lx = y // 42, x // CELL, y % 42, x % CELL
    k = r * COLS + c
    cell = (y >= 0) & (x >= 0) & (c < COLS) & (k < N_SHOWN)
    px = Xs[k, ((ly - 2) // 3) * 8 + (lx - 2) // 3]
    inner = (ly >= 2) & (ly < 26) & (lx >= 2) & (lx < 26)
    frame = (ly < 28) & ~inner
    gy, gx = (ly - 30) // 2, (lx - 11) // 2
    glyph = (ly >= 30) & (ly < 40) & (lx >= 11) & (lx < 17) & (font[pred[k], gy, gx] == 1)
    ok = good[k]
    for ch, (g, b) in enumerate(((0.25, 0.95), (0.85, 0.3), (0.35, 0.3))):  # (green, red) per channel
        mark = em.where(ok, g, b)
        img[ch] = em.where(cell & inner, px, em.where(cell & (frame | glyph), mark, img[ch]))
    return em.stack(img, axis=-1), pred


_PROGRAMS = {}


def programs(cls):
    """The compiled programs of a model class (made once per class): train (one step), evaluate
    (test accuracy and predictions) and render (the canvas)."""
    if cls in _PROGRAMS:
        return _PROGRAMS[cls]

    def train(model: cls, opt: em.optim.Adam, X: em.f32["N", 64], y: em.i32["N"], seed: em.i32,  # noqa: F821
              batch: em.i32):
        xb, yb = em.data.random_batch(batch, seed, X, y)
        loss = em.nn.cross_entropy(model(xb), yb)
        opt.step(loss)
        return loss

    def evaluate(model: cls, X: em.f32["M", 64], y: em.i32["M"]):  # noqa: F821
        pred = em.argmax(model(X), axis=1)
        return em.mean(em.f32(pred == y)), pred

    def render(model: cls, Xs: em.f32["K", 64], ys: em.i32["K"], font: em.i32[10, 5, 3]):  # noqa: F821
        return _render(model, Xs, ys, font)

    for f in (train, evaluate, render):
        f.__qualname__ = f"{cls.__name__}_{f.__name__}"
    p = _PROGRAMS[cls] = SimpleNamespace(train=em.compile(train), evaluate=em.compile(evaluate),
                                         render=em.compile(render))
    return p


class Trainer:
    """A model, its Adam optimizer and the data set on the device; `step(n)` trains, `accuracy()`
    evaluates on the test set."""

    def __init__(self, model="mlp", lr=3e-3, batch=64, seed=0, data=None):
        Xtr, ytr, Xte, yte = data if data is not None else load_data()
        self.kind, self.batch, self.seed = model, batch, seed
        self.X, self.y = em.tensor(Xtr), em.tensor(ytr)  # uploaded once
        self.Xte, self.yte = em.tensor(Xte), em.tensor(yte)
        self.progs = programs(MODELS[model])
        self.reset(lr)

    def reset(self, lr=None):
        """A freshly initialized model and optimizer (the seed advances each reset)."""
        lr = self.opt.lr if lr is None else lr
        self.model = MODELS[self.kind](seed=self.seed)
        self.opt = em.optim.Adam(self.model, lr=lr)
        self.steps, self.seed = 0, self.seed + 10

    def step(self, n=1):
        """n train steps; the last loss as an em.Tensor (read it with float() when needed)."""
        loss = None
        for _ in range(n):
            loss = self.progs.train(self.model, self.opt, self.X, self.y, self.steps, self.batch)
            self.steps += 1
        return loss

    def accuracy(self):
        """The test accuracy (a float) and the predictions (em.Tensor i32)."""
        acc, pred = self.progs.evaluate(self.model, self.Xte, self.yte)
        return float(acc), pred


def train(model="mlp", steps=500, batch=64, lr=3e-3, log_every=100, quiet=False):
    """Trains for `steps` steps, printing the loss every `log_every`; returns (test accuracy,
    seconds of training after the first (compiling) step, trainer)."""
    tr = Trainer(model, lr=lr, batch=batch)
    loss = tr.step()  # traces and compiles (cached on disk for the next run)
    float(loss)
    t0 = time.perf_counter()
    for k in range(1, steps):
        loss = tr.step()
        if not quiet and (k + 1) % log_every == 0:
            print(f"step {k + 1:5d}  loss {float(loss):.4f}")  # the only host copy of a step
    float(loss)
    seconds = time.perf_counter() - t0
    acc, _ = tr.accuracy()
    if not quiet:
        print(f"{model}: {steps} steps (batch {batch}) in {seconds:.2f} s after the first "
              f"({(steps - 1) / max(seconds, 1e-9):.0f} steps/s) on {em.backend()}; test accuracy {100 * acc:.1f}%")
    return acc, seconds, tr


# Window ---------------------------------------------------------------------------------------

def make_state(args):
    """The trainer, the digits shown (uploaded once) and the widgets' values."""
    tr = Trainer(getattr(args, "model", "mlp"), lr=getattr(args, "lr", 3e-3), batch=getattr(args, "batch", 64))
    return SimpleNamespace(
        tr=tr, Xs=em.tensor(np.ascontiguousarray(tr.Xte.numpy()[:N_SHOWN])),
        ys=em.tensor(np.ascontiguousarray(tr.yte.numpy()[:N_SHOWN])), font=em.tensor(FONT),
        log_lr=math.log10(tr.opt.lr), steps_per_frame=5, paused=False, losses=[], accs=[], acc=0.0,
        eval_every=10, frame_count=0, timing=True, image=None, t_train=0.0)


def widgets(win, s):
    """The controls: status, loss and accuracy plots, lr / batch / steps sliders, pause, reset."""
    tr = s.tr
    w, h = win.size
    with em.ui.window("Training", pos=(8, 8), size=(0.4 * w - 16, h - 16)):
        em.ui.text(f"{tr.kind.upper()} on digits, {em.backend()}")
        em.ui.text(f"step {tr.steps}, test accuracy {100 * s.acc:.1f}%")
        if s.timing:
            em.ui.text(f"{s.steps_per_frame / max(s.t_train, 1e-9):.0f} steps/s, {win.fps:.0f} fps")
        em.ui.plot("loss", s.losses, history=300, height=70)
        em.ui.plot("test accuracy", s.accs, history=300, height=70)
        s.log_lr = demo_common.slider("log10 lr", s.log_lr, -4.0, -1.0)
        tr.opt.lr = 10.0 ** s.log_lr  # a runtime scalar: no recompile
        tr.batch = demo_common.slider("batch size", tr.batch, 8, 256)  # also a runtime scalar
        s.steps_per_frame = demo_common.slider("steps/frame", s.steps_per_frame, 1, 20)
        if em.ui.button(("resume" if s.paused else "pause") + "##pause"):
            s.paused = not s.paused
        em.ui.same_line()
        if em.ui.button("reset"):
            tr.reset()
            s.losses, s.accs, s.acc = [], [], 0.0
        em.ui.text("right: first-layer weights;")
        em.ui.text("test digits, prediction below")


def frame(win, s):
    """One frame: widgets, `steps_per_frame` train steps (unless paused), the test accuracy every
    `eval_every` frames, and the canvas."""
    widgets(win, s)
    if not s.paused:
        t0 = time.perf_counter()
        loss = s.tr.step(s.steps_per_frame)
        s.losses = (s.losses + [float(loss)])[-300:]
        s.t_train = time.perf_counter() - t0
        if s.frame_count % s.eval_every == 0:
            s.acc = s.tr.accuracy()[0]
            s.accs = (s.accs + [s.acc])[-300:]
    s.image = s.tr.progs.render(s.tr.model, s.Xs, s.ys, s.font)[0]
    win.show(s.image)
    s.frame_count += 1
    return s.image


def main():
    p = demo_common.parser(__doc__, 960, 540)
    p.add_argument("--model", choices=sorted(MODELS), default="mlp", help="mlp (default) or cnn")
    p.add_argument("--steps", type=int, default=500, help="train steps without --window (default 500)")
    p.add_argument("--batch", type=int, default=64, help="batch size (default 64)")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate (default 3e-3)")
    p.add_argument("--window", action="store_true", help="train live in a window")
    args = p.parse_args()
    if args.window:
        demo_common.run(args, f"Ember digits ({args.model})", make_state, frame)
    else:
        em.init(backend=args.backend)
        train(args.model, args.steps, args.batch, args.lr)


if __name__ == "__main__":
    main()
