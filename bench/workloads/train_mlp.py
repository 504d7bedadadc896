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
import functools
import os

import numpy as np

from common import import_ember, quiet_output, require
from gpu_common import (ember_on, ember_steps, ember_upload, jax_on, jax_steps, torch_on, torch_steps, xp_on,
                        xp_steps)

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


def _adam_xp(xp, p, m, v, grads, step):
    """common.numpy_adam_step in array module xp (NumPy or CuPy), in place on the lists."""
    for n, g in enumerate(grads):
        m[n] = BETAS[0] * m[n] + (1 - BETAS[0]) * g
        v[n] = BETAS[1] * v[n] + (1 - BETAS[1]) * g * g
        mh = m[n] / (1 - BETAS[0] ** step)
        vh = v[n] / (1 - BETAS[1] ** step)
        p[n] = p[n] - LR * mh / (xp.sqrt(vh) + EPS)


def _train_xp(xp, inputs, dtype):
    """STEPS Adam steps in array module xp on its arrays `inputs` (forward, softmax cross-entropy,
    backward by hand); returns the final parameters."""
    X, y, idx, *params = inputs
    X = X.astype(dtype)
    p = [a.astype(dtype) for a in params]
    m = [xp.zeros_like(a) for a in p]
    v = [xp.zeros_like(a) for a in p]
    for t in range(1, STEPS + 1):
        xb, yb = X[idx[t - 1]], y[idx[t - 1]]
        W1, b1, W2, b2 = p
        h_pre = xb @ W1.T + b1
        h = xp.maximum(h_pre, 0)
        z = h @ W2.T + b2
        z = z - z.max(axis=1, keepdims=True)
        e = xp.exp(z)
        s = e / e.sum(axis=1, keepdims=True)
        dz = s
        dz[xp.arange(len(yb)), yb] -= 1
        dz /= len(yb)
        gW2, gb2 = dz.T @ h, dz.sum(0)
        dh = (dz @ W2) * (h_pre > 0)
        gW1, gb1 = dh.T @ xb, dh.sum(0)
        _adam_xp(xp, p, m, v, (gW1, gb1, gW2, gb2), t)
    return tuple(a.astype(np.float32) for a in p)


def _numpy_train(inputs, dtype):
    """STEPS Adam steps in NumPy (forward, softmax cross-entropy, backward by hand)."""
    return _train_xp(np, inputs, dtype)


def reference(inputs):
    """The final parameters, trained in float64."""
    return _numpy_train(inputs, np.float64)


def setup_numpy(inputs, opts):
    """NumPy float32, forward and backward written by hand."""
    return lambda: _numpy_train(inputs, np.float32)


def _ember_trainer(em, data, params):
    """train() -> model: STEPS Adam steps from `params` on `data` (X, y, idx as ember tensors), the
    whole step (gather the batch, forward, cross-entropy, backward, Adam) one compiled program with
    the model and the optimizer as arguments, updated in place."""
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

    model = MLP()

    def train():
        model.load_state_dict({"fc1.weight": params[0], "fc1.bias": params[1],
                               "fc2.weight": params[2], "fc2.bias": params[3]})
        opt = em.optim.Adam(model, lr=LR, betas=BETAS, eps=EPS)
        for t in range(STEPS):
            train_step(model, opt, *data, t)
        return model
    return train


def _ember_params(model):
    """The trained parameters as NumPy arrays, in the reference's order."""
    sd = model.state_dict()
    return sd["fc1.weight"], sd["fc1.bias"], sd["fc2.weight"], sd["fc2.bias"]


def setup_ember(inputs, opts):
    """Ember: the whole step (gather the batch, forward, cross-entropy, backward, Adam) is one
    compiled program with the model and the optimizer as arguments, updated in place."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))
    X, y, idx, *params = inputs
    train = _ember_trainer(em, (em.tensor(X), em.tensor(y), em.tensor(idx)), params)
    return lambda: _ember_params(train())


def _torch_trainer(torch, dev, inputs, compiled):
    """train() -> model: STEPS steps of nn.Linear layers, F.cross_entropy and optim.Adam on
    device `dev` from the initial parameters (one optimizer, its state cleared per run, so a
    compiled step is not recompiled for every new optimizer)."""
    X, y, idx, *params = (torch.from_numpy(a).to(dev) for a in inputs)
    y = y.long()
    idx = idx.long()
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, CLASSES)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS)

    def step(opt, t):
        b = idx[t]
        loss = torch.nn.functional.cross_entropy(model(X[b]), y[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    fn = torch.compile(step) if compiled else step

    def train():
        with torch.no_grad():
            for p, init in zip(model.parameters(), params):
                p.copy_(init)
        opt.state.clear()  # what a new Adam starts from (state made at the first step)
        with quiet_output():
            for t in range(STEPS):
                fn(opt, t)
        return model
    return train


def _torch_setup(inputs, compiled):
    torch = require("torch")
    torch.set_num_threads(os.cpu_count() or 1)
    train = _torch_trainer(torch, torch.device("cpu"), inputs, compiled)
    return lambda: tuple(p.detach().numpy().copy() for p in train().parameters())


def setup_torch(inputs, opts):
    """PyTorch eager on CPU (every core): nn.Linear, F.cross_entropy, optim.Adam."""
    return _torch_setup(inputs, compiled=False)


def setup_torch_compile(inputs, opts):
    """PyTorch with torch.compile of the step function (Inductor, CPU)."""
    return _torch_setup(inputs, compiled=True)


def _jax_trainer(jax, dev, inputs):
    """train() -> params: STEPS steps, each (gather, forward, value_and_grad, Adam by hand) under
    jax.jit, on device `dev`."""
    jnp = jax.numpy
    X, y, idx, *params = (jax.device_put(a, dev) for a in inputs)

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

    def train():
        p = list(params)
        m = [jnp.zeros_like(a) for a in p]
        v = [jnp.zeros_like(a) for a in p]
        for t in range(STEPS):
            p, m, v = step(p, m, v, jax.device_put(np.int32(t), dev))
        return p
    return train


def setup_jax(inputs, opts):
    """JAX: the step (gather, forward, value_and_grad, Adam by hand) under jax.jit."""
    jax = require("jax")
    train = _jax_trainer(jax, jax.devices()[0], inputs)
    return lambda: tuple(np.asarray(jax.block_until_ready(a)) for a in train())


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


# GPU setups (bench/gpu.py): setup(inputs, opts) -> (step, fetch), inputs uploaded once; see
# bench/gpu_common.py. One step here is a whole run: STEPS training steps from the initial
# parameters, so that its result can be checked against the reference.

def gpu_ember(inputs, opts):
    """Ember: the compiled train step on opts["backend"], the data set and batch indices uploaded
    once (the model's parameters are em.nn.Module tensors, as a user has them)."""
    em = ember_on(opts)
    X, y, idx, *params = inputs
    train = _ember_trainer(em, ember_upload(em, X, y, idx), params)
    return ember_steps(lambda: tuple(p.data for p in train().parameters()))  # fc1 weight, bias, fc2 ...


def _gpu_torch(inputs, opts, compiled):
    """The PyTorch GPU setups (GPU_IMPLS torch and torch_compile). PyTorch eager on the GPU: nn.Linear, F.cross_entropy, optim.Adam.
    Compiled: torch.compile of the step function (forward, backward, Adam) on the GPU."""
    torch, dev, sync = torch_on(opts)
    train = _torch_trainer(torch, dev, inputs, compiled)
    return torch_steps(torch, lambda: tuple(train().parameters()), sync, grad=True)


def gpu_jax(inputs, opts):
    """JAX: the jitted step on the GPU."""
    jax, dev = jax_on(opts)
    train = _jax_trainer(jax, dev, inputs)
    return jax_steps(jax, train)


def gpu_cupy(inputs, opts):
    """CuPy: the NumPy reference's hand-written forward, backward and Adam with cupy for numpy."""
    xp, sync = xp_on(opts)
    data = [xp.asarray(a) for a in inputs]
    return xp_steps(xp, lambda: _train_xp(xp, data, np.float32), sync)


# jax last: its memory pool does not shrink (bench/gpu.py caps it).
GPU_IMPLS = {"ember": gpu_ember, "torch": functools.partial(_gpu_torch, compiled=False),
             "torch_compile": functools.partial(_gpu_torch, compiled=True),
             "cupy": gpu_cupy, "jax": gpu_jax}
