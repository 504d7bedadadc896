"""The fusion cost model and full reductions on small MLP layers (the texture embedder's shapes):
a layer read once per output of the next layer is computed once, not once per output; a ReLU's
mask is loaded beside the activation rather than its matmul run again in the backward pass; a
full reduction to a scalar runs in parallel chunks on cpu, with the same result for any number
of threads. Results against NumPy on every backend; the IR and source checks on cpu."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ember as em

_KERNEL = re.compile(r"^\s*kernel #\d+\[([^\]]*)\] mem\(([^)]*)\)", re.M)


def _kernels_reading(prog, name):
    """The thread shapes (text) of the final IR's kernels that access input `name`."""
    ir = prog.ir()
    ident = re.search(r"^\s*(%\d+) = input .* '" + re.escape(name) + "'", ir, re.M).group(1)
    return [shape for shape, mem in _KERNEL.findall(ir) if ident in [m.strip() for m in mem.split(",")]]


@em.compile
def two_layers(x: em.f32["B", 16], w1: em.f32[32, 16], b1: em.f32[32], w2: em.f32[3, 32]):  # noqa: F821
    h = em.nn.relu(x @ w1.T + b1)
    y = h @ w2.T  # [B, 3, 32] products summed: each h[b, k] is read three times
    return y, em.grad(em.sum(y * y), [w2])[0]  # the products' factors are kept for the gradient


def test_a_layer_read_once_per_output_is_computed_once(backend, rng):
    x = rng.standard_normal((300, 16)).astype(np.float32)
    w1 = rng.standard_normal((32, 16)).astype(np.float32) / 4
    b1 = rng.standard_normal(32).astype(np.float32)
    w2 = rng.standard_normal((3, 32)).astype(np.float32) / 6
    got, g2 = (t.numpy() for t in two_layers(x, w1, b1, w2))
    h = np.maximum(x.astype(np.float64) @ w1.T + b1, 0)
    np.testing.assert_allclose(got, h @ w2.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g2, 2 * (h @ w2.T).T @ h, rtol=1e-4, atol=1e-3)
    if backend == "cpu":
        # The first layer's matmul (the one loop of 16 trips) runs once per element of h: no
        # kernel with an axis over the three outputs reads w1 (before: one [B, 3, 32] kernel
        # ran it three times).
        ir = two_layers.ir()
        assert len(re.findall(r"loop i32\[[^\]]*\] \(0, 16, 1\)", ir)) == 1, ir
        shapes = _kernels_reading(two_layers, "w1")
        assert shapes and not any("3" in s.split(", ") for s in shapes), ir


@em.compile
def relu_grads(x: em.f32["B", 16], w1: em.f32[32, 16], w2: em.f32[8, 32]):  # noqa: F821
    h = em.nn.relu(x @ w1.T)
    y = h @ w2.T
    return em.grad(em.sum(y * y), [w1, w2])


def test_relu_backward_loads_the_mask_instead_of_rerunning_the_matmul(backend, rng):
    x = rng.standard_normal((256, 16)).astype(np.float32)
    w1 = rng.standard_normal((32, 16)).astype(np.float32) / 4
    w2 = rng.standard_normal((8, 32)).astype(np.float32) / 6
    g1, g2 = (t.numpy() for t in relu_grads(x, w1, w2))
    x64, w164, w264 = (a.astype(np.float64) for a in (x, w1, w2))
    a = x64 @ w164.T
    h = np.maximum(a, 0)
    dy = 2 * (h @ w264.T)
    dh = (dy @ w264) * (a > 0)
    np.testing.assert_allclose(g2, dy.T @ h, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(g1, dh.T @ x64, rtol=1e-4, atol=1e-3)
    if backend == "cpu":
        # x @ w1.T runs in the forward kernel only; the backward kernels read w1 for dh @ w1
        # at most, never to recompute the activation's sign (before: a second [B, 32] matmul).
        shapes = _kernels_reading(relu_grads, "w1")
        assert shapes.count("B, 32") == 1, relu_grads.ir()


@em.compile
def mean_square(x: em.f32["N", 3], t: em.f32["N", 3]):  # noqa: F821
    d = em.nn.sigmoid(x) - t
    return em.mean(d * d)


def test_full_reduction_runs_in_chunks_with_one_result_for_any_thread_count(backend, rng, tmp_path):
    x = rng.standard_normal((20000, 3)).astype(np.float32)
    t = rng.uniform(0, 1, (20000, 3)).astype(np.float32)
    got = mean_square(x, t).numpy()
    d = 1 / (1 + np.exp(-x.astype(np.float64))) - t
    np.testing.assert_allclose(got, np.mean(d * d), rtol=2e-5)
    if backend != "cpu":
        return
    src = mean_square.source()
    assert re.search(r"for \(int64_t ember_c\d+ = 0; ember_c\d+ < ember_n\d+;", src), src
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "t.npy", t)
    child = ("import sys, numpy as np, ember as em\n"
             "sys.path.insert(0, %r)\n"
             "from test_recompute import mean_square\n"
             "x, t = np.load(%r), np.load(%r)\n"
             "print(repr(float(mean_square(x, t).numpy())))\n") % (os.path.dirname(__file__), str(tmp_path / "x.npy"),
                                                                    str(tmp_path / "t.npy"))
    for threads in ("1", "2", "3"):
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert float(out.stdout.strip().splitlines()[-1]) == float(got), (threads, out.stdout, got)


def test_short_full_reduction_stays_one_loop():
    @em.compile
    def total(x: em.f32[100]):  # noqa: F821
        return em.sum(x * 2.0)

    x = np.arange(100, dtype=np.float32)
    assert float(total(x).numpy()) == pytest.approx(9900.0)
    assert "ember_c" not in total.source()


def test_texture_embedder_step_computes_each_layer_once(rng):
    """The bench's train_image step (bench/workloads/train_image.py) on cpu: fc2 is not run
    once per output colour in a [B, 3, 32] kernel, the backward pass does not rerun fc1's matmul
    for the ReLU's sign, and the loss is summed in parallel chunks. The loss against NumPy."""
    from test_examples import example
    ti = example("train_image")

    @em.compile
    def step(model: ti.TextureEmbedder, opt: em.optim.Adam, target: em.f32["H", "W", 3],  # noqa: F821
             idx: em.i32["B"]):  # noqa: F821
        H, W = target.shape[0], target.shape[1]
        i, j = idx // W, idx % W
        loss = em.nn.mse_loss(model(ti.pixel_uv(i, j, H, W)), target[i, j])
        opt.step(loss)
        return loss

    em.init(backend="cpu")
    model = ti.TextureEmbedder(grid=16, channels=8, hidden=32)
    opt = em.optim.Adam(model, lr=1e-2)
    target = rng.uniform(0, 1, (32, 32, 3)).astype(np.float32)
    idx = rng.integers(0, 32 * 32, 2048).astype(np.int32)
    sd = {k: v.copy() for k, v in model.state_dict().items()}
    loss = float(step(model, opt, target, idx).numpy())
    # The loss of the initial parameters, in NumPy.
    k = idx.astype(np.int64)
    i, j = k // 32, k % 32
    uv = np.stack([(i + 0.5) / 32, (j + 0.5) / 32], -1) * 15
    def sample(p):
        base = np.floor(p)
        t = p - base
        w = t * t * (3 - 2 * t)
        a, b = base[:, 0].astype(int), base[:, 1].astype(int)
        at = lambda r, c: sd["tex"][np.clip(r, 0, 15), np.clip(c, 0, 15)]  # noqa: E731
        wi, wj = w[:, :1], w[:, 1:]
        return (at(a, b) * (1 - wj) + at(a, b + 1) * wj) * (1 - wi) + (at(a + 1, b) * (1 - wj) + at(a + 1, b + 1) * wj) * wi
    f = np.concatenate([sample(uv), sample(uv + 0.5)], -1).astype(np.float64)
    h = np.maximum(f @ sd["fc1.weight"].T + sd["fc1.bias"], 0)
    h = np.maximum(h @ sd["fc2.weight"].T + sd["fc2.bias"], 0)
    out = 1 / (1 + np.exp(-(h @ sd["fc3.weight"].T + sd["fc3.bias"])))
    assert loss == pytest.approx(np.mean((out - target[i, j]) ** 2), rel=1e-4)
    ir = step.ir()
    assert not re.search(r"kernel #\d+\[B, 3, 32\]", ir), ir
    assert _kernels_reading(step, "model.fc1.weight").count("B, 32") == 1, ir
    assert re.search(r"ember_c\d+ < ember_n\d+", step.source()), step.source()


@em.compile
def _energy_and_grad(X: em.f32["N", 3]):  # noqa: F821
    d = X[:, None, :] - X[None, :, :]
    r = em.sqrt(em.sum(d * d, axis=-1) + 1e-2)
    E = -0.5 * em.sum(1.0 / r)
    return E, em.grad(E, X)


def test_energy_and_its_gradient_keep_no_pair_buffer(backend, rng):
    """Issue 39: the [N, N] of 1 / r feeds both the energy's full sum and the gradient; each of the
    two would leave it stored for the other, so both recompute it (fuse_loads fuses all of a
    buffer's loads at once when that frees its producer): O(N) memory, as the force alone. (N = 128
    on the GPU backends: the full sum still runs in one thread there, and lavapipe stops a shader's
    loops after 65535 iterations; issue 40 makes GPU reductions parallel.)"""
    X = rng.standard_normal((256 if backend == "cpu" else 128, 3)).astype(np.float32)
    E, G = _energy_and_grad(X)
    st = _energy_and_grad.stats
    assert all("N, N" not in s for s in st["buffer_shapes"]), st["buffer_shapes"]
    # [%k]: the partials of a split reduction on a GPU backend (split_reductions), at most 1024.
    assert st["buffer_shapes"] and all(s in ("[]", "[N, 3]") or re.fullmatch(r"\[%\d+\]", s)
                                       for s in st["buffer_shapes"]), st["buffer_shapes"]
    x = X.astype(np.float64)
    d = x[:, None, :] - x[None, :, :]
    r = np.sqrt(np.sum(d * d, axis=-1) + np.float32(1e-2))
    np.testing.assert_allclose(float(E.numpy()), -0.5 * np.sum(1.0 / r), rtol=2e-5)
    np.testing.assert_allclose(G.numpy(), np.sum(d / r[:, :, None] ** 3, axis=1), rtol=2e-4, atol=2e-4)
