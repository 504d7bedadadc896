"""em.nn modules: registration (order, dotted names, buffers, shared parameters), state_dict /
load_state_dict / em.save / em.load, PyTorch-default initialization from seeds, eager calls
(compiled once per signature), and every layer against NumPy: its forward, and one SGD step
(lr 0.1, loss sum(layer(x) * r)) against the NumPy gradient of its parameters."""
import numpy as np
import pytest

import ember as em


def _sgd_step(module, x, r):
    """(output before the step, module after one SGD step on sum(module(x) * r))."""
    cls = type(module)
    xt = em.TensorType(em.f32 if x.dtype == np.float32 else em.i32, x.shape)

    @em.compile
    def step(m: cls, opt: em.optim.SGD, x: xt, r: em.f32[r.shape]):
        y = m(x)
        opt.step(em.sum(y * r))
        return y

    y = step(module, em.optim.SGD(module, lr=0.1), x, r).numpy()
    return y, module


def test_linear_forward_and_step(backend, rng):
    lin = em.nn.Linear(6, 4, seed=3)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    x = rng.standard_normal((5, 6)).astype(np.float32)
    r = rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(lin(x).numpy(), x @ w.T + b, rtol=1e-5, atol=1e-5)
    y, _ = _sgd_step(lin, x, r)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lin.weight.numpy(), w - 0.1 * r.T @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lin.bias.numpy(), b - 0.1 * r.sum(0), rtol=1e-5, atol=1e-5)


def test_sequential_and_activations(backend, rng):
    net = em.nn.Sequential(em.nn.Linear(4, 8, seed=1), em.nn.ReLU(), em.nn.Linear(8, 8, seed=2), em.nn.Sigmoid(),
                           em.nn.Linear(8, 3, seed=4), em.nn.SiLU(), em.nn.Softmax())
    assert len(net) == 7 and isinstance(net[1], em.nn.ReLU)
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    p = [a.numpy().astype(np.float64) for a in net.parameters()]
    x = rng.standard_normal((5, 4)).astype(np.float32)
    h = np.maximum(x @ p[0].T + p[1], 0)
    h = 1 / (1 + np.exp(-(h @ p[2].T + p[3])))
    h = h @ p[4].T + p[5]
    h = h / (1 + np.exp(-h))
    e = np.exp(h - h.max(1, keepdims=True))
    np.testing.assert_allclose(net(x).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_gelu_module(rng):
    from math import erf
    x = rng.standard_normal((3, 4)).astype(np.float32)
    want = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))(x.astype(np.float64))
    np.testing.assert_allclose(em.nn.GELU()(x).numpy(), want, rtol=1e-5, atol=1e-6)


def _conv_ref(x, w, b, s, p):
    n, c, hh, ww = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    ho, wo = (hh + 2 * p - kh) // s + 1, (ww + 2 * p - kw) // s + 1
    cols = np.stack([xp[:, :, i:i + s * ho:s, j:j + s * wo:s] for i in range(kh) for j in range(kw)], 2)
    cols = cols.reshape(n, c, kh, kw, ho, wo)
    return np.einsum("nckluv,ockl->nouv", cols, w) + b[None, :, None, None], cols


def test_conv2d_forward_and_step(rng):
    conv = em.nn.Conv2d(3, 4, 3, stride=2, padding=1, seed=5)
    w, b = conv.weight.numpy().astype(np.float64), conv.bias.numpy().astype(np.float64)
    assert w.shape == (4, 3, 3, 3) and np.abs(w).max() <= 1 / np.sqrt(27)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    want, cols = _conv_ref(x.astype(np.float64), w, b, 2, 1)
    r = rng.standard_normal(want.shape).astype(np.float32)
    y, _ = _sgd_step(conv, x, r)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(conv.weight.numpy(), w - 0.1 * np.einsum("nckluv,nouv->ockl", cols, r),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(conv.bias.numpy(), b - 0.1 * r.sum((0, 2, 3)), rtol=1e-4, atol=1e-5)


def test_embedding_forward_and_step(rng):
    emb = em.nn.Embedding(10, 3, seed=6)
    w = emb.weight.numpy().astype(np.float64)
    idx = np.array([[1, 4, 4], [9, 0, 1]], np.int32)
    r = rng.standard_normal((2, 3, 3)).astype(np.float32)
    y, _ = _sgd_step(emb, idx, r)
    np.testing.assert_allclose(y, w[idx], rtol=1e-6)
    g = np.zeros_like(w)
    np.add.at(g, idx.ravel(), r.reshape(-1, 3))
    np.testing.assert_allclose(emb.weight.numpy(), w - 0.1 * g, rtol=1e-5, atol=1e-6)


def test_layer_norm_forward_and_step(rng):
    ln = em.nn.LayerNorm(5, eps=1e-5)
    ln.load_state_dict({"weight": rng.standard_normal(5).astype(np.float32),
                        "bias": rng.standard_normal(5).astype(np.float32)})
    w, b = ln.weight.numpy().astype(np.float64), ln.bias.numpy().astype(np.float64)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    xd = x.astype(np.float64)
    xhat = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5)
    r = rng.standard_normal((4, 5)).astype(np.float32)
    y, _ = _sgd_step(ln, x, r)
    np.testing.assert_allclose(y, xhat * w + b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ln.weight.numpy(), w - 0.1 * (r * xhat).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ln.bias.numpy(), b - 0.1 * r.sum(0), rtol=1e-5, atol=1e-6)
    assert np.array_equal(em.nn.LayerNorm((2, 3)).weight.numpy(), np.ones((2, 3), np.float32))


class Block(em.nn.Module):
    def __init__(self):
        self.scale = em.tensor(np.float32([2.0]))  # a buffer
        self.fc = em.nn.Linear(3, 3, seed=1)
        self.act = "relu"
        self.head = em.nn.Linear(3, 2, seed=2)

    def forward(self, x):
        return self.head(em.nn.relu(self.fc(x)) * self.scale)


def test_registration_and_state_dict():
    blk = Block()
    assert [n for n, _ in blk.named_parameters()] == ["fc.weight", "fc.bias", "head.weight", "head.bias"]
    assert [n for n, _ in blk.named_buffers()] == ["scale"] and len(blk.buffers()) == 1
    assert list(blk.state_dict()) == ["scale", "fc.weight", "fc.bias", "head.weight", "head.bias"]
    assert all(isinstance(p, em.nn.Parameter) and p.dtype == em.f32 for p in blk.parameters())
    shared = em.nn.Sequential(blk.fc, blk.fc)  # a shared module counts once
    assert [n for n, _ in shared.named_parameters()] == ["0.weight", "0.bias"]
    assert "Linear(in_features=3, out_features=3" in repr(blk)


def test_seeds_reproduce_and_differ():
    a, b, c = em.nn.Linear(5, 4, seed=7), em.nn.Linear(5, 4, seed=7), em.nn.Linear(5, 4, seed=8)
    assert np.array_equal(a.weight.numpy(), b.weight.numpy())
    assert not np.array_equal(a.weight.numpy(), c.weight.numpy())
    assert np.abs(a.weight.numpy()).max() <= 1 / np.sqrt(5) and np.abs(a.bias.numpy()).max() <= 1 / np.sqrt(5)
    em.random.seed(11)
    d = em.nn.Linear(5, 4)
    em.random.seed(11)
    assert np.array_equal(d.weight.numpy(), em.nn.Linear(5, 4).weight.numpy())


def test_load_state_dict_errors_and_save_load(tmp_path, rng):
    blk = Block()
    sd = blk.state_dict()
    with pytest.raises(em.Error, match=r"missing keys \['head.bias'\]"):
        blk.load_state_dict({k: v for k, v in sd.items() if k != "head.bias"})
    with pytest.raises(em.Error, match=r"unexpected keys \['extra'\]"):
        blk.load_state_dict({**sd, "extra": np.zeros(1, np.float32)})
    with pytest.raises(em.ShapeError, match=r"'fc.weight' has shape \(3, 4\), expected \(3, 3\)"):
        blk.load_state_dict({**sd, "fc.weight": np.zeros((3, 4), np.float32)})
    with pytest.raises(em.TypeError, match="'fc.bias' has dtype float64, expected float32"):
        blk.load_state_dict({**sd, "fc.bias": np.zeros(3)})
    new = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in sd.items()}
    em.save(tmp_path / "blk.npz", new)
    blk.load_state_dict(em.load(tmp_path / "blk.npz"))
    for k, v in blk.state_dict().items():
        np.testing.assert_array_equal(v, new[k])
    em.save(str(tmp_path / "again"), blk)  # no .npz appended
    assert set(em.load(str(tmp_path / "again"))) == set(new)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    h = np.maximum(x @ new["fc.weight"].T + new["fc.bias"], 0) * new["scale"]
    np.testing.assert_allclose(blk(x).numpy(), h @ new["head.weight"].T + new["head.bias"], rtol=1e-5, atol=1e-6)


def test_eager_call_compiles_once_per_signature(rng):
    from ember.nn import _eager
    lin = em.nn.Linear(3, 2, seed=1)
    before = len(_eager._PROGRAMS)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y1 = lin(x)
    assert isinstance(y1, em.Tensor)
    lin(em.tensor(rng.standard_normal((4, 3))))  # same signature
    em.nn.Linear(3, 2, seed=2)(x)  # another instance of the same structure
    assert len(_eager._PROGRAMS) == before + 1
    lin(rng.standard_normal((5, 3)).astype(np.float32))
    assert len(_eager._PROGRAMS) == before + 2
    with pytest.raises(em.TypeError, match="argument 0 is a ndarray of dtype float64"):
        lin(np.zeros((4, 3)))


def test_parameter_and_module_misuse(rng):
    with pytest.raises(em.TypeError, match="floating point"):
        em.nn.Parameter(np.arange(3))
    p = em.nn.Parameter(rng.standard_normal(3))
    assert p.dtype == em.f32 and p.shape == (3,) and np.asarray(p).dtype == np.float32
    lin = em.nn.Linear(3, 3, seed=1)

    @em.compile
    def captured(x: em.f32[2, 3]):
        return lin(x)

    with pytest.raises(em.TypeError, match="pass it as an argument annotated with Linear"):
        captured(np.ones((2, 3), np.float32))

    @em.compile
    def passes_param(w: em.f32[3, 3]):
        return w * 2.0
    np.testing.assert_allclose(passes_param(lin.weight).numpy(), 2 * lin.weight.numpy())
    with pytest.raises(em.TypeError, match="not an em.nn.Module"):
        em.nn.Sequential(lin, "relu")
