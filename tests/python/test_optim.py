"""em.optim: every optimizer against a NumPy reference of PyTorch's documented update (three steps,
so momentum buffers and Adam's bias correction with the step count are exercised), gradient
clipping, hyperparameters changed between calls without recompiling, state_dict/save/load and
argument errors. SGD and Adam run on every backend, the rest on cpu."""
import numpy as np
import pytest

import ember as em


class Affine(em.nn.Module):
    """y = x @ w.T + b, written without em.nn.functional so these tests check the optimizers only."""

    def __init__(self, rng):
        self.w = em.nn.Parameter(rng.standard_normal((3, 5)).astype(np.float32))
        self.b = em.nn.Parameter(rng.standard_normal(3).astype(np.float32))

    def forward(self, x):
        return x @ self.w.T + self.b


def _step_program(opt_cls):
    @em.compile
    def step(model: Affine, opt: opt_cls, x: em.f32["B", 5], t: em.f32["B", 3]):
        loss = em.mean((model(x) - t) ** 2)
        opt.step(loss)
        return loss
    return step


def _grads(w, b, x, t):
    """d mean((x w^T + b - t)^2) / d(w, b), float64."""
    d = 2.0 * (x @ w.T + b - t) / t.size
    return d.T @ x, d.sum(0)


def _clip(gs, clip_value, clip_norm):
    if clip_value is not None:
        gs = [np.clip(g, -clip_value, clip_value) for g in gs]
    if clip_norm is not None:
        total = np.sqrt(sum(float(np.sum(g * g)) for g in gs))
        gs = [g * min(clip_norm / (total + 1e-6), 1.0) for g in gs]
    return gs


def _reference(kind, h, params, x, t, steps):
    """PyTorch's torch.optim update rules (documentation pseudocode), in float64."""
    ps = [p.astype(np.float64) for p in params]
    st = [{} for _ in ps]
    for k in range(1, steps + 1):
        gs = _clip(list(_grads(ps[0], ps[1], x, t)), h.get("clip_value"), h.get("clip_norm"))
        for i, (p, g) in enumerate(zip(ps, gs)):
            s = st[i]
            if kind == "SGD":
                g = g + h["weight_decay"] * p
                if h["momentum"] != 0:
                    s["b"] = g.copy() if k == 1 else h["momentum"] * s["b"] + (1 - h["dampening"]) * g
                    g = g + h["momentum"] * s["b"] if h["nesterov"] else s["b"]
                ps[i] = p - h["lr"] * g
            elif kind in ("Adam", "AdamW"):
                b1, b2 = h["betas"]
                if kind == "AdamW":
                    p = p * (1 - h["lr"] * h["weight_decay"])
                else:
                    g = g + h["weight_decay"] * p
                s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
                s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
                mh, vh = s["m"] / (1 - b1 ** k), s["v"] / (1 - b2 ** k)
                ps[i] = p - h["lr"] * mh / (np.sqrt(vh) + h["eps"])
            else:  # RMSprop
                a = h["alpha"]
                g = g + h["weight_decay"] * p
                s["v"] = a * s.get("v", 0) + (1 - a) * g * g
                vt = s["v"]
                if h["centered"]:
                    s["ga"] = a * s.get("ga", 0) + (1 - a) * g
                    vt = vt - s["ga"] ** 2
                if h["momentum"] > 0:
                    s["b"] = h["momentum"] * s.get("b", 0) + g / (np.sqrt(vt) + h["eps"])
                    ps[i] = p - h["lr"] * s["b"]
                else:
                    ps[i] = p - h["lr"] * g / (np.sqrt(vt) + h["eps"])
    return ps


def _run(kind, h, rng, steps=3):
    model = Affine(rng)
    x = rng.standard_normal((7, 5)).astype(np.float32)
    t = rng.standard_normal((7, 3)).astype(np.float32)
    start = [model.w.numpy(), model.b.numpy()]
    opt = getattr(em.optim, kind)(model, **h)
    step = _step_program(type(opt))
    losses = [float(step(model, opt, x, t)) for _ in range(steps)]
    want = _reference(kind, {**_DEFAULTS[kind], **h}, start, x.astype(np.float64), t.astype(np.float64), steps)
    np.testing.assert_allclose(model.w.numpy(), want[0], rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(model.b.numpy(), want[1], rtol=2e-5, atol=2e-6)
    assert opt.step_count == steps
    w0, b0 = start
    np.testing.assert_allclose(losses[0], np.mean((x @ w0.T + b0 - t) ** 2), rtol=1e-5)
    return model, opt, step


_DEFAULTS = {
    "SGD": dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False),
    "Adam": dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0),
    "AdamW": dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2),
    "RMSprop": dict(alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False),
}


def test_sgd_momentum_dampening_weight_decay(backend, rng):
    _run("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01), rng)


def test_adam_weight_decay(backend, rng):
    _run("Adam", dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.02), rng)


@pytest.mark.parametrize("h", [dict(lr=0.1), dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)],
                         ids=["plain", "nesterov"])
def test_sgd_variants(h, rng):
    _run("SGD", h, rng)


def test_adamw_decoupled_weight_decay(rng):
    _run("AdamW", dict(lr=0.05, weight_decay=0.1), rng)


@pytest.mark.parametrize("h", [dict(lr=0.01), dict(lr=0.01, momentum=0.9, weight_decay=0.01),
                               dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5)],
                         ids=["plain", "momentum", "centered"])
def test_rmsprop(h, rng):
    _run("RMSprop", h, rng)


@pytest.mark.parametrize("h", [dict(clip_value=0.05), dict(clip_norm=0.1), dict(clip_value=0.2, clip_norm=0.3)],
                         ids=["value", "norm", "both"])
def test_gradient_clipping(h, rng):
    _run("SGD", dict(lr=0.5, **h), rng)


def test_hyperparameters_change_without_recompiling(rng):
    traces = []
    model = Affine(rng)
    opt = em.optim.Adam(model, lr=0.01)

    @em.compile
    def step(model: Affine, opt: em.optim.Adam, x: em.f32["B", 5], t: em.f32["B", 3]):
        traces.append(1)
        loss = em.mean((model(x) - t) ** 2)
        opt.step(loss)
        return loss

    x = rng.standard_normal((7, 5)).astype(np.float32)
    t = rng.standard_normal((7, 3)).astype(np.float32)
    step(model, opt, x, t)
    compiled = step._compiled["cpu"]
    traced = step.ir("traced")
    start = [model.w.numpy(), model.b.numpy()]
    state = opt.state_dict()
    # New values for every hyperparameter, the clips switched on: the same compiled program runs.
    opt.lr, opt.betas, opt.eps, opt.weight_decay, opt.clip_norm = 0.2, (0.5, 0.9), 1e-4, 0.03, 0.05
    opt.param_groups[0]["clip_value"] = 0.02
    step(model, opt, x, t)
    assert len(traces) == 1 and step._compiled["cpu"] is compiled and step.ir("traced") == traced
    # The second step used the new values: Adam from the saved moments, step count 2.
    b1, b2 = 0.5, 0.9
    gs = _clip(list(_grads(*[p.astype(np.float64) for p in start], x, t)), 0.02, 0.05)
    for p, g, name in zip(start, gs, ("w", "b")):
        g = g + 0.03 * p
        m = b1 * state[f"state.{name}.exp_avg"] + (1 - b1) * g
        v = b2 * state[f"state.{name}.exp_avg_sq"] + (1 - b2) * g * g
        want = p - 0.2 * (m / (1 - b1 ** 2)) / (np.sqrt(v / (1 - b2 ** 2)) + 1e-4)
        np.testing.assert_allclose(getattr(model, name).numpy(), want, rtol=2e-5, atol=2e-6)


def test_state_dict_save_load_roundtrip(tmp_path, rng):
    model, opt, step = _run("Adam", dict(lr=0.05), rng, steps=2)
    em.save(tmp_path / "m.npz", model)
    em.save(tmp_path / "o.npz", opt)
    model2 = Affine(np.random.default_rng(99))
    opt2 = em.optim.Adam(model2, lr=0.5, clip_norm=1.0)
    model2.load_state_dict(em.load(tmp_path / "m.npz"))
    opt2.load_state_dict(em.load(tmp_path / "o.npz"))
    assert opt2.lr == 0.05 and opt2.clip_norm is None and opt2.step_count == 2
    for k, v in opt.state_dict().items():
        np.testing.assert_array_equal(opt2.state_dict()[k], v)
    x = rng.standard_normal((7, 5)).astype(np.float32)
    t = rng.standard_normal((7, 3)).astype(np.float32)
    step(model, opt, x, t)
    step(model2, opt2, x, t)  # another model and optimizer of the same structure: the same program
    np.testing.assert_array_equal(model.w.numpy(), model2.w.numpy())
    np.testing.assert_array_equal(model.b.numpy(), model2.b.numpy())


def test_optimizer_errors(rng):
    model = Affine(rng)
    opt = em.optim.SGD(model, lr=0.1)
    with pytest.raises(em.Error, match="inside a compiled function"):
        opt.step(1.0)
    with pytest.raises(em.Error, match="invalid lr"):
        em.optim.Adam(model, lr=-1.0)
    with pytest.raises(em.Error, match="invalid beta2"):
        em.optim.Adam(model, betas=(0.9, 1.0))
    with pytest.raises(em.TypeError, match="nesterov must be a bool"):
        em.optim.SGD(model, nesterov=1)
    with pytest.raises(em.TypeError, match="lr must be a number"):
        opt.lr = "fast"
    with pytest.raises(em.TypeError, match="not an em.nn.Parameter"):
        em.optim.SGD([model.w, np.ones(3, np.float32)])
    with pytest.raises(em.Error, match="no parameters"):
        em.optim.SGD([])
    with pytest.raises(em.Error, match=r"missing keys \['step'\]"):
        d = opt.state_dict()
        del d["step"]
        opt.load_state_dict(d)
    with pytest.raises(em.ShapeError, match="state.w.momentum_buffer"):
        opt.load_state_dict({**opt.state_dict(), "state.w.momentum_buffer": np.ones((2, 2), np.float32)})

    @em.compile
    def lonely(opt: em.optim.SGD, x: em.f32[3]):
        opt.step(em.sum(x))
        return x

    with pytest.raises(em.TypeError, match="trains parameter 'w', which is not a parameter of a Module argument"):
        lonely(opt, rng.standard_normal(3).astype(np.float32))


def test_optimizer_bound_to_another_model_object(rng):
    """The optimizer must train the very module object passed with it (decision: identity, not
    just the same structure)."""
    a, b = Affine(rng), Affine(rng)
    opt_a = em.optim.SGD(a, lr=0.1)
    step = _step_program(em.optim.SGD)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    t = rng.standard_normal((4, 3)).astype(np.float32)
    with pytest.raises(em.TypeError, match="argument 'opt'.*trains parameter 'w'"):
        step(b, opt_a, x, t)


def test_apply_gradients_equals_step_and_checks_its_gradients(rng):
    """opt.apply_gradients(g) with g computed elsewhere (here: em.grad scaled by a runtime 1.0, and
    gradients written to a second model, as examples/distributed_train.py does) makes the update
    opt.step(loss) makes, clipping included; a wrong count or shape is an error at trace time."""
    x = rng.standard_normal((6, 5)).astype(np.float32)
    t = rng.standard_normal((6, 3)).astype(np.float32)
    m1, m2, buf = Affine(rng), Affine(rng), Affine(rng)
    m2.load_state_dict(m1.state_dict())
    o1 = em.optim.Adam(m1, lr=0.05, clip_norm=0.5)
    o2 = em.optim.Adam(m2, lr=0.05, clip_norm=0.5)
    step = _step_program(em.optim.Adam)
    w0 = m1.w.numpy()

    @em.compile
    def grads(model: Affine, g: Affine, x: em.f32["B", 5], t: em.f32["B", 3], one: em.f32):  # noqa: F821
        loss = em.mean((model(x) - t) ** 2)
        gw, gb = em.grad(loss * one, [model.w, model.b])
        g.w[...] = gw
        g.b[...] = gb

    @em.compile
    def apply(model: Affine, opt: em.optim.Adam, g: Affine):
        opt.apply_gradients([g.w, g.b])

    for _ in range(3):
        step(m1, o1, x, t)
        grads(m2, buf, x, t, 1.0)
        apply(m2, o2, buf)
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
    assert np.abs(m2.w.numpy() - w0).max() > 0.01  # three steps moved the weights
    grads(m2, buf, x, t, 1.0)  # the gradient buffer holds the gradient at the current weights
    for got, want in zip((buf.w, buf.b), _grads(m2.w.numpy().astype(np.float64), m2.b.numpy(), x, t)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)

    @em.compile
    def too_few(model: Affine, opt: em.optim.Adam, g: Affine):
        opt.apply_gradients([g.w])

    with pytest.raises(em.TypeError, match="1 gradients for 2 parameters"):
        too_few(m2, o2, buf)

    @em.compile
    def wrong_shape(model: Affine, opt: em.optim.Adam, g: Affine):
        opt.apply_gradients([g.w, g.w])

    with pytest.raises(em.ShapeError, match="gradient of 'b' has shape"):
        wrong_shape(m2, o2, buf)
    with pytest.raises(em.Error, match="inside a compiled function"):
        o2.apply_gradients([m2.w, m2.b])
