"""MLP training steps: the digits-sized classifier of issue 12 (64 -> 128 -> 10, ReLU, cross-entropy,
Adam), N = batch size. One run() is STEPS training steps from the same initial parameters on the
same minibatches, gathered on the device from the whole dataset by index each step (as
examples/train_digits.py trains); it returns the final parameters, checked against a float64
NumPy reference. summary() prints training steps per second for every implementation.

Peers: PyTorch eager and torch.compile (CPU, every core), JAX (jax.jit of the step), a hand-written
NumPy forward/backward/Adam in float32. Ember compiles the whole step (forward, loss, backward,
optimizer) into one program taking the model and the optimizer as arguments.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import os

import numpy as np

from common import import_ember, numpy_adam_step, quiet_output, require

NAME = "train_mlp"
DEFAULT_N = 128      # batch size
STEPS = 50           # training steps per run()
SAMPLES, FEATURES, HIDDEN, CLASSES = 1797, 64, 128, 10  # the digits data set's sizes
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8


def make_inputs(n, seed=0):
    """(X [1797, 64] f32, labels i32, batch indices [STEPS, n] i32, initial W1, b1, W2, b2 f32)."""
    rng = np.random.default_rng(seed)
    X = rng.random((SAMPLES, FEATURES), dtype=np.float32)
    y = rng.integers(0, CLASSES, SAMPLES).astype(np.int32)
    idx = np.stack([rng.permutation(SAMPLES)[:n] for _ in range(STEPS)]).astype(np.int32)
    b1, b2 = 1 / np.sqrt(FEATURES), 1 / np.sqrt(HIDDEN)  # PyTorch's nn.Linear default bounds
    params = (rng.uniform(-b1, b1, (HIDDEN, FEATURES)), rng.uniform(-b1, b1, HIDDEN),
              rng.uniform(-b2, b2, (CLASSES, HIDDEN)), rng.uniform(-b2, b2, CLASSES))
    return (X, y, idx) + tuple(p.astype(np.float32) for p in params)


def _numpy_train(inputs, dtype):
    """STEPS Adam steps in NumPy (forward, softmax cross-entropy, backward by hand)."""
    X, y, idx, *params = inputs
    X = X.astype(dtype)
    p = [a.astype(dtype) for a in params]
    m = [np.zeros_like(a) for a in p]
    v = [np.zeros_like(a) for a in p]
    for t in range(1, STEPS + 1):
        xb, yb = X[idx[t - 1]], y[idx[t - 1]]
        W1, b1, W2, b2 = p
        h_pre = xb @ W1.T + b1
        h = np.maximum(h_pre, 0)
        z = h @ W2.T + b2
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e / e.sum(axis=1, keepdims=True)
        dz = s
        dz[np.arange(len(yb)), yb] -= 1
        dz /= len(yb)
        gW2, gb2 = dz.T @ h, dz.sum(0)
        dh = (dz @ W2) * (h_pre > 0)
        gW1, gb1 = dh.T @ xb, dh.sum(0)
        numpy_adam_step(p, m, v, (gW1, gb1, gW2, gb2), t, LR, BETAS, EPS)
    return tuple(a.astype(np.float32) for a in p)


def reference(inputs):
    """The final parameters, trained in float64."""
    return _numpy_train(inputs, np.float64)


def setup_numpy(inputs, opts):
    """NumPy float32, forward and backward written by hand."""
    return lambda: _numpy_train(inputs, np.float32)


def setup_ember(inputs, opts):
    """Ember: the whole step (gather the batch, forward, cross-entropy, backward, Adam) is one
    compiled program with the model and the optimizer as arguments, updated in place."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))
    X, y, idx, *params = inputs

    class MLP(em.nn.Module):
        def __init__(self):
            self.fc1 = em.nn.Linear(FEATURES, HIDDEN)
            self.fc2 = em.nn.Linear(HIDDEN, CLASSES)

        def forward(self, x):
            return self.fc2(em.nn.relu(self.fc1(x)))

    @em.compile
    def train_step(model: MLP, opt: em.optim.Adam, X: em.f32["S", FEATURES], y: em.i32["S"],
                   idx: em.i32["T", "B"], t: em.i32):
        batch = idx[t]
        loss = em.nn.cross_entropy(model(X[batch]), y[batch])
        opt.step(loss)
        return loss

    Xd, yd, idxd = em.tensor(X), em.tensor(y), em.tensor(idx)
    model = MLP()

    def run():
        model.load_state_dict({"fc1.weight": params[0], "fc1.bias": params[1],
                               "fc2.weight": params[2], "fc2.bias": params[3]})
        opt = em.optim.Adam(model, lr=LR, betas=BETAS, eps=EPS)
        for t in range(STEPS):
            train_step(model, opt, Xd, yd, idxd, t)
        sd = model.state_dict()
        return sd["fc1.weight"], sd["fc1.bias"], sd["fc2.weight"], sd["fc2.bias"]
    return run


def _torch_setup(inputs, compiled):
    torch = require("torch")
    torch.set_num_threads(os.cpu_count() or 1)
    X, y, idx, *params = (torch.from_numpy(a) for a in inputs)
    y = y.long()
    idx = idx.long()
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES))

    def step(opt, t):
        b = idx[t]
        loss = torch.nn.functional.cross_entropy(model(X[b]), y[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    fn = torch.compile(step) if compiled else step

    def run():
        with torch.no_grad():
            for p, init in zip(model.parameters(), params):
                p.copy_(init)
        opt = torch.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS)
        with quiet_output():
            for t in range(STEPS):
                fn(opt, t)
        return tuple(p.detach().numpy().copy() for p in model.parameters())
    return run


def setup_torch(inputs, opts):
    """PyTorch eager on CPU (every core): nn.Linear, F.cross_entropy, optim.Adam."""
    return _torch_setup(inputs, compiled=False)


def setup_torch_compile(inputs, opts):
    """PyTorch with torch.compile of the step function (Inductor, CPU)."""
    return _torch_setup(inputs, compiled=True)


def setup_jax(inputs, opts):
    """JAX: the step (gather, forward, value_and_grad, Adam by hand) under jax.jit."""
    jax = require("jax")
    jnp = jax.numpy
    X, y, idx, *params = (jnp.asarray(a) for a in inputs)

    def loss_fn(p, xb, yb):
        W1, b1, W2, b2 = p
        z = jnp.maximum(xb @ W1.T + b1, 0) @ W2.T + b2
        return -jnp.mean(jax.nn.log_softmax(z)[jnp.arange(xb.shape[0]), yb])

    @jax.jit
    def step(p, m, v, t):
        b = idx[t]
        g = jax.grad(loss_fn)(p, X[b], y[b])
        tf = (t + 1).astype(jnp.float32)
        m = [BETAS[0] * mk + (1 - BETAS[0]) * gk for mk, gk in zip(m, g)]
        v = [BETAS[1] * vk + (1 - BETAS[1]) * gk * gk for vk, gk in zip(v, g)]
        p = [pk - LR * (mk / (1 - BETAS[0] ** tf)) / (jnp.sqrt(vk / (1 - BETAS[1] ** tf)) + EPS)
             for pk, mk, vk in zip(p, m, v)]
        return p, m, v

    def run():
        p = list(params)
        m = [jnp.zeros_like(a) for a in p]
        v = [jnp.zeros_like(a) for a in p]
        for t in range(STEPS):
            p, m, v = step(p, m, v, jnp.int32(t))
        return tuple(np.asarray(jax.block_until_ready(a)) for a in p)
    return run


IMPLS = {"ember": setup_ember, "numpy": setup_numpy, "torch": setup_torch,
         "torch_compile": setup_torch_compile, "jax": setup_jax}


def summary(results, opts):
    """Training steps per second of each implementation (STEPS steps per timed run)."""
    parts = []
    for impl, r in results.items():
        if r.get("median_ms"):
            parts.append(f"{impl} {STEPS / r['median_ms'] * 1e3:.0f} steps/s")
        else:
            parts.append(f"{impl} {r['status']}")
    return f"train_mlp ({STEPS} Adam steps per run): " + ", ".join(parts)
