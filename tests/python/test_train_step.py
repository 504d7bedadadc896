"""A whole training step (forward, loss, backward, optimizer) as one compiled program taking a
Module and an optimizer: the loss of an MLP falls on a synthetic problem (every backend), module
buffers written in place, every wrong argument is a clear error naming the argument and the
difference, and the trace cache keys on the argument structure and the module classes (a warm
process hits, an edit of forward misses)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember as em

BUILD_PYTHON = str(Path(em.__file__).resolve().parents[1])


class MLP(em.nn.Module):
    def __init__(self, hidden=32, bias=True, seed=0):
        self.fc1 = em.nn.Linear(8, hidden, bias=bias, seed=seed)
        self.fc2 = em.nn.Linear(hidden, 3, seed=seed + 1)

    def forward(self, x):
        return self.fc2(em.nn.relu(self.fc1(x)))


class OtherMLP(MLP):
    pass


@em.compile
def train_step(model: MLP, opt: em.optim.Adam, x: em.f32["B", 8], y: em.i32["B"]):
    loss = em.nn.cross_entropy(model(x), y)
    opt.step(loss)
    return loss


def _data(rng, n=96):
    x = rng.standard_normal((n, 8)).astype(np.float32)
    y = ((x[:, 0] > 0).astype(np.int32) + (x[:, 1] + x[:, 2] > 0.5)).astype(np.int32)
    return x, y


def test_mlp_loss_falls(backend, rng):
    model = MLP()
    opt = em.optim.Adam(model, lr=1e-2)
    x, y = _data(rng)
    losses = [float(train_step(model, opt, x, y)) for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0], losses
    assert opt.step_count == 60
    accuracy = np.mean(np.argmax(model(x).numpy(), axis=1) == y)
    assert accuracy > 0.85, accuracy


class Counter(em.nn.Module):
    """A module whose forward writes its buffer (calls counted on the device)."""

    def __init__(self):
        self.lin = em.nn.Linear(4, 2, seed=3)
        self.calls = em.zeros((), em.i32)

    def forward(self, x):
        self.calls[...] = self.calls + 1
        return self.lin(x)


def test_buffer_written_in_place(backend, rng):
    c = Counter()
    x = rng.standard_normal((3, 4)).astype(np.float32)
    for _ in range(3):
        y = c(x)
    assert int(c.calls.item()) == 3
    np.testing.assert_allclose(y.numpy(), x @ c.lin.weight.numpy().T + c.lin.bias.numpy(), rtol=1e-5, atol=1e-6)


def test_wrong_arguments(rng):
    model = MLP()
    opt = em.optim.Adam(model)
    x, y = _data(rng, 8)
    train_step(model, opt, x, y)

    def call(m, o=None):
        train_step(m, o or em.optim.Adam(m), x, y)

    with pytest.raises(em.TypeError, match="argument 'model' of train_step is a OtherMLP, but train_step was traced "
                                           "with a MLP"):
        call(OtherMLP())
    with pytest.raises(em.TypeError, match="argument 'model' of train_step expects a MLP, got Linear"):
        call(em.nn.Linear(8, 3))
    with pytest.raises(em.TypeError, match="argument 'model' of train_step has no parameter 'fc1.bias' \\(it is None\\), which "
                                           r"train_step was traced with \(f32\[32\]\)"):
        call(MLP(bias=False))
    with pytest.raises(em.ShapeError, match=r"argument 'model' of train_step: parameter 'fc1.weight' has shape "
                                            r"\(16, 8\), but train_step was traced with shape \(32, 8\)"):
        call(MLP(hidden=16))
    extra = MLP()
    extra.temperature = em.nn.Parameter(np.ones(1, np.float32))
    with pytest.raises(em.TypeError, match="has parameter 'temperature' .*which train_step was not traced with"):
        call(extra)
    changed = MLP()
    changed.fc2 = em.nn.Sequential(em.nn.Linear(32, 3))
    with pytest.raises(em.TypeError, match="sub-module 'fc2' is a Sequential, but train_step was traced with a "
                                           "Linear"):
        call(changed)
    attr = MLP()
    attr.fc1.in_features = 9
    with pytest.raises(em.TypeError, match="attribute 'fc1.in_features' is 9, but train_step was traced with 8"):
        call(attr)
    with pytest.raises(em.TypeError, match="argument 'opt' of train_step expects a Adam, got SGD"):
        call(model, em.optim.SGD(model))
    with pytest.raises(em.TypeError, match="argument 'opt' of train_step is a AdamW, but train_step was traced "
                                           "with a Adam"):
        call(model, em.optim.AdamW(model))
    with pytest.raises(em.TypeError, match="missing a required argument: 'y'"):
        train_step(model, opt, x)
    # The right arguments still work after all that, with no retrace.
    assert np.isfinite(float(train_step(model, opt, x, y)))


def test_module_argument_needs_a_call_for_introspection():
    @em.compile
    def fwd(model: MLP, x: em.f32["B", 8]):
        return model(x)
    with pytest.raises(em.Error, match="call it once first"):
        fwd.ir("traced")
    model = MLP()
    fwd(model, np.ones((2, 8), np.float32))
    assert "model.fc1.weight" in fwd.ir("traced") and fwd.kernel_count >= 1
    del model  # the program keeps only weak references to the last call's objects
    fwd._traced_text = None
    with pytest.raises(em.Error, match="call it once first"):
        fwd.ir("traced")


USERMOD = textwrap.dedent("""
    import ember as em

    class Net(em.nn.Module):
        def __init__(self):
            self.fc = em.nn.Linear(4, 3, seed=1)

        def forward(self, x):
            return {body}

    @em.compile
    def step(model: Net, opt: em.optim.SGD, x: em.f32["B", 4], t: em.f32["B", 3]):
        loss = em.nn.mse_loss(model(x), t)
        opt.step(loss)
        return loss
""")

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ember as em
    sys.path.insert(0, sys.argv[1])
    import usermod
    model = usermod.Net()
    opt = em.optim.SGD(model, lr=0.1)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    t = rng.standard_normal((5, 3)).astype(np.float32)
    loss = float(usermod.step(model, opt, x, t))
    st = usermod.step.stats
    print(json.dumps({"hit": st["trace_cache_hit"], "loss": loss, "w": model.fc.weight.numpy().tolist()}))
""")


def _child(user, cache, body):
    user.mkdir(exist_ok=True)
    (user / "usermod.py").write_text(USERMOD.format(body=body))
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=BUILD_PYTHON, PYTHONDONTWRITEBYTECODE="1")
    for k in ("EMBER_VERIFY", "EMBER_PROGRAM_CACHE", "EMBER_DEBUG", "EMBER_TRACE_CACHE"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, "-c", CHILD, str(user)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_trace_cache_keys_on_module_class(tmp_path):
    """A warm process skips tracing the train step and gets the same result; editing the module's
    forward misses and computes the edited model."""
    user, cache = tmp_path / "user", tmp_path / "cache"
    cold = _child(user, cache, "self.fc(x)")
    warm = _child(user, cache, "self.fc(x)")
    assert not cold["hit"] and warm["hit"]
    assert warm["loss"] == cold["loss"] and warm["w"] == cold["w"]
    edited = _child(user, cache, "self.fc(x) * 2.0")
    assert not edited["hit"]
    fresh = _child(user, tmp_path / "fresh", "self.fc(x) * 2.0")
    assert edited["loss"] == fresh["loss"] != cold["loss"]


def test_copied_array_written_back_after_module_inputs(rng):
    """A strided NumPy argument after a module's flattened inputs is written back (positions count
    the module's tensors); a read-only one is an error naming it."""
    @em.compile
    def write_out(model: MLP, x: em.f32["B", 8], out: em.f32["B", 3]):
        out[...] = model(x)

    model = MLP()
    x = rng.standard_normal((4, 8)).astype(np.float32)
    out = np.zeros((3, 4), np.float32).T  # transposed: passed as a copy
    write_out(model, x, out)
    np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-6)
    ro = np.zeros((4, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(em.TypeError, match="argument 'out' is a read-only NumPy array"):
        write_out(model, x, ro)


def test_same_objects_changed_between_calls(rng, monkeypatch):
    """Calls passing the same unchanged model and optimizer reuse the last call's flattened
    arguments (no describe); every change to them in between is still seen: new parameter values
    (load_state_dict), a new learning rate, a changed attribute, a replaced parameter, and a
    module with a list attribute (which can change in place) is described at every call."""
    described = []
    orig = MLP._em_describe
    monkeypatch.setattr(MLP, "_em_describe", lambda self, *a: described.append(1) or orig(self, *a))

    @em.compile
    def step(model: MLP, opt: em.optim.SGD, x: em.f32["B", 8], y: em.i32["B"]):  # noqa: F821
        loss = em.nn.cross_entropy(model(x), y)
        opt.step(loss)
        return loss

    model, x, y = MLP(), *_data(rng, 16)
    opt = em.optim.SGD(model, lr=0.1)
    step(model, opt, x, y)
    first = len(described)  # describing, then tracing
    for _ in range(3):
        step(model, opt, x, y)
    assert len(described) == first

    state = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    opt.lr = 0.0
    loss = float(step(model, opt, x, y))
    assert len(described) == first + 1
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, state[k])  # lr 0: unchanged
    h = np.maximum(x @ state["fc1.weight"].T + state["fc1.bias"], 0) @ state["fc2.weight"].T + state["fc2.bias"]
    h = h - h.max(axis=1, keepdims=True)
    want = np.mean(np.log(np.exp(h).sum(axis=1)) - h[np.arange(len(y)), y])
    np.testing.assert_allclose(loss, want, rtol=1e-5)

    model.fc1.in_features = 9
    with pytest.raises(em.TypeError, match="attribute 'fc1.in_features' is 9, but step was traced with 8"):
        step(model, opt, x, y)
    model.fc1.in_features = 8
    model.fc2.bias = em.nn.Parameter(np.ones(3, np.float32))
    with pytest.raises(em.TypeError, match="trains parameter 'fc2.bias', which is not a parameter"):
        step(model, opt, x, y)

    class Listed(MLP):
        def __init__(self):
            super().__init__()
            self.sizes = [8, 32]

    @em.compile
    def step2(model: Listed, opt: em.optim.SGD, x: em.f32["B", 8], y: em.i32["B"]):  # noqa: F821
        loss = em.nn.cross_entropy(model(x), y)
        opt.step(loss)
        return loss

    listed = Listed()
    opt2 = em.optim.SGD(listed, lr=0.1)
    step2(listed, opt2, x, y)
    n = len(described)
    step2(listed, opt2, x, y)
    assert len(described) == n + 1
    listed.sizes.append(3)
    with pytest.raises(em.TypeError, match="sizes"):
        step2(listed, opt2, x, y)


def test_digits_step_kernels_and_host_plan(rng):
    """The bench's digits train step (64-128-10 MLP, Adam, minibatch gathered on the device) runs
    through the host plan with at most 18 kernels: 4 of them compute the global gradient norm
    in a host branch taken only while clip_norm is set; Adam's updates write in place."""
    class Digits(em.nn.Module):
        def __init__(self):
            self.fc1 = em.nn.Linear(64, 128, seed=1)
            self.fc2 = em.nn.Linear(128, 10, seed=2)

        def forward(self, x):
            return self.fc2(em.nn.relu(self.fc1(x)))

    @em.compile
    def step(model: Digits, opt: em.optim.Adam, X: em.f32["S", 64], y: em.i32["S"],  # noqa: F821
             idx: em.i32["T", "B"], t: em.i32):  # noqa: F821
        batch = idx[t]
        loss = em.nn.cross_entropy(model(X[batch]), y[batch])
        opt.step(loss)
        return loss

    X = rng.random((300, 64), dtype=np.float32)
    y = (X[:, :10].argmax(axis=1)).astype(np.int32)
    idx = np.stack([rng.permutation(300)[:32] for _ in range(20)]).astype(np.int32)
    model = Digits()
    opt = em.optim.Adam(model, lr=3e-3)
    losses = [float(step(model, opt, X, y, idx, t)) for t in range(20)]
    assert step.stats["host"] == "plan", step.stats["host_reason"]
    # Adam's update kernels read the parameters they write in place at their own element, so
    # fuse_loads recomputes the parameter reads there (no snapshot copies): 18 kernels.
    assert step.kernel_count <= 18
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    opt.clip_norm = 1e-3  # the norm branch runs now: the gradient that reaches Adam has norm 1e-3
    before = opt.state_dict()
    step(model, opt, X, y, idx, 0)
    after = opt.state_dict()
    names = [k for k in after if k.endswith(".exp_avg")]
    assert len(names) == 4
    g2 = sum(float(np.sum(((after[k] - 0.9 * before[k]) / 0.1).astype(np.float64) ** 2)) for k in names)
    np.testing.assert_allclose(np.sqrt(g2), 1e-3, rtol=1e-3)
