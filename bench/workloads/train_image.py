"""Texture-embedder training steps: examples/train_image.py's model (a [16, 16, 8] embedding
texture read twice with smoothstep-weighted bilinear interpolation, on the grid and half a texel
off, decoded by a 16 -> 32 -> 32 -> 3 MLP, ReLU, sigmoid out; TensorFrost's texture embedder)
fit to a 128 x 128 RGB image by MSE and Adam (lr 1e-2), N = pixels per step. One run() is STEPS
steps from the same initial parameters on the same pixel batches (indices given, gathered on the
device from the image), returning the final parameters, checked against a float64 NumPy
reference with the forward and backward written by hand. summary() prints steps per second.

The example draws its batches with em.random.randint inside the program; here the indices are
an input so that every implementation computes the same steps. Peers: PyTorch eager and
torch.compile (CPU), the same math with autograd and torch.optim.Adam; NumPy float32 by hand.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import os
import sys

import numpy as np

from common import REPO_ROOT, import_ember, numpy_adam_step, quiet_output, require

NAME = "train_image"
DEFAULT_N = 2048           # pixels per step
STEPS = 20                 # training steps per run()
SIZE, GRID, CHANNELS, HIDDEN = 128, 16, 8, 32
LR, BETAS, EPS = 1e-2, (0.9, 0.999), 1e-8
PARAM_NAMES = ("tex", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias")


def _target(size):
    """A smooth procedural RGB image in (0, 1): f32 [size, size, 3]."""
    y, x = (np.mgrid[0:size, 0:size].astype(np.float64) + 0.5) / size
    img = np.stack([0.5 + 0.4 * np.sin(7 * x + 3 * y), 0.5 + 0.4 * np.cos(5 * y - 2 * x * x),
                    0.5 + 0.3 * np.sin(11 * x * y + 1)], -1)
    return img.astype(np.float32)


def make_inputs(n, seed=0):
    """(target [128, 128, 3], pixel indices [STEPS, n] i32, then the initial tex, fc1-3 weights
    and biases as the example initializes them: tex U(-0.5, 0.5), nn.Linear's default bounds)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, SIZE * SIZE, (STEPS, n)).astype(np.int32)
    params = [rng.uniform(-0.5, 0.5, (GRID, GRID, CHANNELS))]
    for i, o in ((2 * CHANNELS, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, 3)):
        b = 1 / np.sqrt(i)
        params += [rng.uniform(-b, b, (o, i)), rng.uniform(-b, b, o)]
    return (_target(SIZE), idx) + tuple(p.astype(np.float32) for p in params)


def _corners(p, G):
    """Smoothstep weights (wi, wj) [B, 1] and the four clamped corner indices of texel coordinates p [B, 2]."""
    base = np.floor(p)
    t = p - base
    w = t * t * (3 - 2 * t)
    i, j = base[:, 0].astype(np.int64), base[:, 1].astype(np.int64)
    c = lambda a: np.clip(a, 0, G - 1)  # noqa: E731
    return w[:, :1], w[:, 1:], [(c(i), c(j)), (c(i), c(j + 1)), (c(i + 1), c(j)), (c(i + 1), c(j + 1))]


def _numpy_train(inputs, dtype):
    """STEPS Adam steps in NumPy: forward, MSE, backward by hand (the texture's gradient by
    np.add.at over the four corners of both lookups)."""
    target, idx, *params = inputs
    target = target.astype(dtype)
    p = [a.astype(dtype) for a in params]
    m = [np.zeros_like(a) for a in p]
    v = [np.zeros_like(a) for a in p]
    H = W = SIZE
    one = dtype(1)
    for step in range(1, STEPS + 1):
        k = idx[step - 1].astype(np.int64)
        i, j = k // W, k % W
        uv = np.stack([(i.astype(dtype) + dtype(0.5)) / dtype(H), (j.astype(dtype) + dtype(0.5)) / dtype(W)], -1)
        tex, W1, b1, W2, b2, W3, b3 = p
        pos = uv * dtype(GRID - 1)
        looks = []
        for q in (pos, pos + dtype(0.5)):
            wi, wj, cs = _corners(q, GRID)
            coef = [(one - wi) * (one - wj), (one - wi) * wj, wi * (one - wj), wi * wj]
            t00, t01, t10, t11 = (tex[a, b] for a, b in cs)
            top = t00 * (one - wj) + t01 * wj
            bottom = t10 * (one - wj) + t11 * wj
            looks.append((top * (one - wi) + bottom * wi, cs, coef))
        f = np.concatenate([looks[0][0], looks[1][0]], -1)
        a1 = f @ W1.T + b1
        h1 = np.maximum(a1, 0)
        a2 = h1 @ W2.T + b2
        h2 = np.maximum(a2, 0)
        out = 1 / (1 + np.exp(-(h2 @ W3.T + b3)))
        tgt = target[i, j]
        dout = dtype(2) * (out - tgt) / dtype(out.size)
        dz3 = dout * out * (one - out)
        dh2 = (dz3 @ W3) * (a2 > 0)
        dh1 = (dh2 @ W2) * (a1 > 0)
        df = dh1 @ W1
        gtex = np.zeros_like(tex)
        for (_, cs, coef), d in zip(looks, (df[:, :CHANNELS], df[:, CHANNELS:])):
            for (a, b), c in zip(cs, coef):
                np.add.at(gtex, (a, b), d * c)
        grads = (gtex, dh1.T @ f, dh1.sum(0), dh2.T @ h1, dh2.sum(0), dz3.T @ h2, dz3.sum(0))
        numpy_adam_step(p, m, v, grads, step, LR, BETAS, EPS)
    return tuple(a.astype(np.float32) for a in p)


def reference(inputs):
    """The final parameters, trained in float64."""
    return _numpy_train(inputs, np.float64)


def setup_numpy(inputs, opts):
    """NumPy float32, forward and backward written by hand."""
    return lambda: _numpy_train(inputs, np.float32)


def setup_ember(inputs, opts):
    """Ember: examples/train_image.py's TextureEmbedder and pixel_uv in one compiled step (gather
    the batch's pixels and targets, forward, MSE, backward, Adam on the texture and the MLP)."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))
    examples = str(REPO_ROOT / "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)
    import train_image as ti
    target, idx, *params = inputs

    @em.compile
    def train_step(model: ti.TextureEmbedder, opt: em.optim.Adam, target: em.f32["H", "W", 3],  # noqa: F821
                   idx: em.i32["T", "B"], t: em.i32):  # noqa: F821
        H, W = target.shape[0], target.shape[1]
        k = idx[t]
        i, j = k // W, k % W
        loss = em.nn.mse_loss(model(ti.pixel_uv(i, j, H, W)), target[i, j])
        opt.step(loss)
        return loss

    target_d, idx_d = em.tensor(target), em.tensor(idx)
    model = ti.TextureEmbedder(grid=GRID, channels=CHANNELS, hidden=HIDDEN)

    def run():
        model.load_state_dict(dict(zip(PARAM_NAMES, params)))
        opt = em.optim.Adam(model, lr=LR, betas=BETAS, eps=EPS)
        for t in range(STEPS):
            train_step(model, opt, target_d, idx_d, t)
        sd = model.state_dict()
        return tuple(sd[n] for n in PARAM_NAMES)
    return run


def _torch_setup(inputs, compiled):
    torch = require("torch")
    torch.set_num_threads(os.cpu_count() or 1)
    target, idx, *params = (torch.from_numpy(a) for a in inputs)
    idx = idx.long()
    ps = [torch.nn.Parameter(a.clone()) for a in params]
    G = GRID

    def sample(tex, q):
        base = torch.floor(q)
        t = q - base
        w = t * t * (3 - 2 * t)
        i, j = base[:, 0].long(), base[:, 1].long()
        c = lambda a: a.clamp(0, G - 1)  # noqa: E731
        wi, wj = w[:, :1], w[:, 1:]
        top = tex[c(i), c(j)] * (1 - wj) + tex[c(i), c(j + 1)] * wj
        bottom = tex[c(i + 1), c(j)] * (1 - wj) + tex[c(i + 1), c(j + 1)] * wj
        return top * (1 - wi) + bottom * wi

    def step(opt, t):
        tex, W1, b1, W2, b2, W3, b3 = ps
        k = idx[t]
        i, j = k // SIZE, k % SIZE
        uv = torch.stack([(i.float() + 0.5) / SIZE, (j.float() + 0.5) / SIZE], -1)
        pos = uv * (G - 1)
        f = torch.cat([sample(tex, pos), sample(tex, pos + 0.5)], -1)
        h = torch.relu(f @ W1.T + b1)
        h = torch.relu(h @ W2.T + b2)
        out = torch.sigmoid(h @ W3.T + b3)
        loss = torch.nn.functional.mse_loss(out, target[i, j])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    fn = torch.compile(step) if compiled else step

    def run():
        with torch.no_grad():
            for p, init in zip(ps, params):
                p.copy_(init)
        opt = torch.optim.Adam(ps, lr=LR, betas=BETAS, eps=EPS)
        with quiet_output():
            for t in range(STEPS):
                fn(opt, t)
        return tuple(p.detach().numpy().copy() for p in ps)
    return run


def setup_torch(inputs, opts):
    """PyTorch eager on CPU (every core): the same lookups, MLP, MSE; autograd; optim.Adam."""
    return _torch_setup(inputs, compiled=False)


def setup_torch_compile(inputs, opts):
    """PyTorch with torch.compile of the step function (Inductor, CPU)."""
    return _torch_setup(inputs, compiled=True)


IMPLS = {"ember": setup_ember, "numpy": setup_numpy, "torch": setup_torch, "torch_compile": setup_torch_compile}


def summary(results, opts):
    """Training steps per second of each implementation (STEPS steps per timed run)."""
    parts = []
    for impl, r in results.items():
        if r.get("median_ms"):
            parts.append(f"{impl} {STEPS / r['median_ms'] * 1e3:.0f} steps/s")
        else:
            parts.append(f"{impl} {r['status']}")
    return f"train_image ({STEPS} Adam steps per run): " + ", ".join(parts)
