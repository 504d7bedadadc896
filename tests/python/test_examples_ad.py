"""The autodiff examples and a training step, against NumPy:

- examples/sdf_normals.py: a sphere-on-a-plane scene rendered by the example's renderer (sphere
  tracing in a per-thread em.loop with em.break_, the normal as em.grad of the field inside the
  kernel), its normals compared with the analytic ones at the hit points, on cpu and one GPU
  backend; the script itself (the fractal scene, a PNG written);
- examples/inverse_sim.py: the loss of the initial-velocity fit falls >= 100x within a bounded
  number of gradient steps through 100 simulation steps, and the program's gradient matches a
  float64 NumPy simulation's directional central difference;
- a 2-layer MLP's softmax cross-entropy and its gradients w.r.t. all four parameters in one
  program, against float64 analytic backpropagation (and central differences on a few elements),
  with its kernel count.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ember as em
from conftest import _BUILD, _SELECTED, _unavailable
from gradcheck import tolerance
from png_io import read_png
from test_examples import EXAMPLES, example


def _cpu_and_one_gpu():
    """cpu, and the first of vulkan/opengl this run selects (EMBER_TEST_BACKENDS)."""
    gpus = [b for b in ("vulkan", "opengl", "vulkan-hlsl") if b in _SELECTED]
    return [b for b in ("cpu",) if b in _SELECTED] + gpus[:1]


@pytest.fixture(params=_cpu_and_one_gpu())
def backend2(request):
    reason = _unavailable(request.param)
    if reason:
        pytest.skip(f"backend {request.param} unavailable: {reason}")
    em.init(backend=request.param)
    yield request.param


# examples/sdf_normals.py ---------------------------------------------------------------------------

CENTRE, RADIUS = np.array([0.3, 1.0, -0.2]), 1.0


def _sphere_on_plane(m, x, y, z):
    """A unit sphere resting on the floor y = 0 (a hard minimum: every normal is analytic)."""
    sx, sy, sz = x - CENTRE[0], y - CENTRE[1], z - CENTRE[2]
    return m.min(m.sqrt(sx * sx + sy * sy + sz * sz) - RADIUS, y)


def test_sdf_normals_of_an_analytic_scene(backend2):
    """Each hit's normal (em.grad of the field inside the kernel, normalized) is the sphere's radial
    direction or the floor's up vector, whichever surface the hit point lies on (points within
    0.02 of the crease where both are as near are left out); the hit points lie on the surface
    (all but a few grazing rays that run out of steps);
    misses have zero normals; the image has lit, shadowed and sky pixels."""
    sdf = example("sdf_normals")
    render = sdf.make_renderer(_sphere_on_plane, "render_sphere_on_plane")
    H, W = 48, 64
    cam, light = sdf.camera(0.4, pitch=0.3, dist=6.0, target=(0.3, 0.7, -0.2)), sdf.light_dir(2.2, 0.7)
    focal = 0.5 * H / np.tan(np.radians(50.0) / 2)
    img, nrm, dist = (t.numpy() for t in render(H, W, cam, focal, light, 96))
    assert render.kernel_count == 1

    p, hit = sdf.hit_points(cam, focal, dist, H, W)
    assert 0.3 < hit.mean() < 0.97, hit.mean()  # the floor fills the lower part, the sky the rest
    d_sphere = np.linalg.norm(p - CENTRE, axis=-1) - RADIUS
    d_floor = p[..., 1]
    # On the surface (the march's tolerance), but for grazing rays near the horizon that ran out of steps.
    conv = hit & (np.abs(np.minimum(d_sphere, d_floor)) <= 2 * sdf.HIT * (1.0 + dist))
    assert conv.sum() >= 0.97 * hit.sum(), (conv.sum(), hit.sum())
    on_sphere = conv & (d_sphere < d_floor - 0.02)
    on_floor = conv & (d_floor < d_sphere - 0.02)
    assert on_sphere.sum() > 150 and on_floor.sum() > 150, (on_sphere.sum(), on_floor.sum())
    want = np.where(on_sphere[..., None], (p - CENTRE) / np.linalg.norm(p - CENTRE, axis=-1, keepdims=True),
                    np.array([0.0, 1.0, 0.0]))
    tol = 1e-4 if backend2 == "cpu" else 1e-3
    err = np.abs(nrm - want)[on_sphere | on_floor].max()
    assert err < tol, f"normals off by {err:.3g} on {backend2}"
    np.testing.assert_array_equal(nrm[~hit], 0.0)

    # Not blank: sky pixels are the background gradient, hit pixels differ, the floor has shadow.
    assert img.std() > 0.05 and np.isfinite(img).all()
    sky = img[~hit]
    assert np.abs(img[on_sphere].mean(0) - sky.mean(0)).max() > 0.1
    floor_lum = img[on_floor].mean(-1)
    assert floor_lum.max() - floor_lum.min() > 0.2  # lit floor vs the sphere's shadow


def test_sdf_normals_script(tmp_path):
    """The example as a script: the fractal scene at 48 x 64, a PNG written, AD normals within a
    degree of float64 central differences at the 99th percentile."""
    out = tmp_path / "sdf.png"
    env = dict(os.environ, EMBER_BUILD_DIR=str(_BUILD))
    proc = subprocess.run([sys.executable, str(EXAMPLES / "sdf_normals.py"), "--size", "48", "--steps", "96",
                           "--out", str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "1 kernel(s)" in proc.stdout, proc.stdout
    p99 = re.search(r"99th percentile ([0-9.e+-]+) deg", proc.stdout)
    assert p99 and float(p99.group(1)) < 1.0, proc.stdout
    img = read_png(out)
    assert img.shape == (48, 64, 3) and img.std() > 10


# examples/inverse_sim.py ---------------------------------------------------------------------------

def _simulate64(X0, V0, nbr, rest, w, steps, dt, m):
    """examples/inverse_sim.py's simulation in float64 NumPy."""
    X, V = X0.astype(np.float64), V0.astype(np.float64)
    gravity = np.array([0.0, m.GRAVITY])
    for _ in range(steps):
        d = X[nbr] - X[:, None, :]
        length = np.sqrt(np.sum(d * d, axis=-1, keepdims=True))
        F = np.sum(m.STIFFNESS * w[..., None] * (length - rest[..., None]) * d / length, axis=1)
        V = V * (1.0 - m.DAMPING * dt) + (F + gravity) * dt
        X = X + V * dt
    return X


def test_inverse_sim_loss_falls_100x():
    """An 8 x 8 jelly, 100 steps: gradient descent from V0 = 0 brings the loss down >= 100x within
    20 iterations (it takes 7 at the time of writing), and the gradient at the start agrees with a
    float64 central difference of the NumPy simulation along a random direction."""
    m = example("inverse_sim")
    X0, nbr, rest, w = m.jelly(8)
    steps, dt = 100, np.float32(0.01)
    target = m.forward(X0, m.hidden_velocity(X0), nbr, rest, w, steps, dt).numpy()

    V0 = np.zeros_like(X0)
    loss, g = (t.numpy() for t in m.loss_and_grad(X0, V0, nbr, rest, w, target, steps, dt))

    def L64(V):
        diff = _simulate64(X0, V, nbr, rest, w, steps, float(dt), m) - target
        return np.mean(np.sum(diff * diff, -1))
    assert abs(float(loss) - L64(V0)) <= 1e-4 * L64(V0)
    u = np.random.default_rng(5).normal(size=X0.shape)
    h = 1e-4
    want = (L64(V0 + h * u) - L64(V0 - h * u)) / (2 * h)
    assert abs(np.sum(g * u) - want) <= 1e-3 * abs(want), (np.sum(g * u), want)

    _, losses = m.fit(X0, nbr, rest, w, target, steps, dt, 20, until=1e-2)
    assert losses[0] > 1.0
    assert losses[-1] <= losses[0] / 100, losses


def test_inverse_sim_script():
    env = dict(os.environ, EMBER_BUILD_DIR=str(_BUILD))
    proc = subprocess.run([sys.executable, str(EXAMPLES / "inverse_sim.py"), "--size", "5", "--steps", "100",
                           "--iters", "8"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "x lower" in proc.stdout and "kernel(s)" in proc.stdout, proc.stdout
    drop = re.search(r"\(([0-9.e+]+)x lower\)", proc.stdout)
    assert drop and float(drop.group(1)) > 100, proc.stdout  # 171x at the time of writing


# A 2-layer MLP's loss and gradients ---------------------------------------------------------------

@em.compile
def mlp_loss_and_grads(x: em.f32["B", 64], y: em.i32["B"], W1: em.f32[64, 128], b1: em.f32[128],  # noqa: F821
                       W2: em.f32[128, 10], b2: em.f32[10]):
    """Softmax cross-entropy of x -> relu(x W1 + b1) -> W2 + b2 with integer labels y, averaged
    over the batch, and its gradients w.r.t. W1, b1, W2, b2."""
    h = em.max(x @ W1 + b1, 0.0)
    z = h @ W2 + b2
    m = em.max(z, axis=1)
    lse = em.log(em.sum(em.exp(z - m[:, None]), axis=1)) + m
    (rows,) = em.indices(y.shape)
    loss = em.mean(lse - z[rows, y])
    return (loss, *em.grad(loss, [W1, b1, W2, b2]))


def _mlp_loss64(x, y, W1, b1, W2, b2):
    z = np.maximum(x @ W1 + b1, 0.0) @ W2 + b2
    zmax = z.max(1, keepdims=True)
    lse = np.log(np.sum(np.exp(z - zmax), 1)) + zmax[:, 0]
    return np.mean(lse - z[np.arange(len(y)), y])


def _mlp_grads64(x, y, W1, b1, W2, b2):
    """Backpropagation by hand, float64."""
    B = len(y)
    hp = x @ W1 + b1
    h = np.maximum(hp, 0.0)
    z = h @ W2 + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dz = p
    dz[np.arange(B), y] -= 1.0
    dz /= B
    dhp = (dz @ W2.T) * (hp > 0)
    return x.T @ dhp, dhp.sum(0), h.T @ dz, dz.sum(0)


def test_mlp_cross_entropy_gradients(backend, no_split_reductions):
    """B = 32: loss and the four gradients against float64 backpropagation (errors relative to each
    gradient's largest element: gradcheck's 1e-4 on cpu, 1e-3 on the GPU dialects), and against
    float64 central differences of the loss on six elements of each parameter. Compiles to 11
    kernels: 4 for the forward pass (hidden layer, logits, row max, loss), 7 for the reverse sweep.
    """
    rng = np.random.default_rng(11)
    B = 32
    x = rng.normal(0.0, 1.0, (B, 64)).astype(np.float32)
    y = rng.integers(0, 10, B).astype(np.int32)
    params = [(rng.normal(0.0, 1.0, (64, 128)) / 8).astype(np.float32), rng.normal(0.0, 0.1, 128).astype(np.float32),
              (rng.normal(0.0, 1.0, (128, 10)) / 11).astype(np.float32), rng.normal(0.0, 0.1, 10).astype(np.float32)]
    hp = x.astype(np.float64) @ params[0] + params[1]
    assert np.abs(hp).min() > 1e-5  # no pre-activation at the relu's kink

    loss, *grads = (t.numpy() for t in mlp_loss_and_grads(x, y, *params))
    # 10 since cross_entropy picks the label's logit with a masked row sum (no scatter in its gradient).
    assert mlp_loss_and_grads.kernel_count == 10
    x64, p64 = x.astype(np.float64), [p.astype(np.float64) for p in params]
    rt = tolerance(backend)
    assert abs(float(loss) - _mlp_loss64(x64, y, *p64)) <= rt * _mlp_loss64(x64, y, *p64)
    for name, g, want in zip(("W1", "b1", "W2", "b2"), grads, _mlp_grads64(x64, y, *p64)):
        assert g.shape == want.shape, name
        err = np.abs(g - want).max() / np.abs(want).max()
        assert err <= rt, f"d loss / d {name} on {backend}: max error {err:.3g} of the largest element"
    for k, g in enumerate(grads):  # central differences, a few elements per parameter
        for idx in zip(*(rng.integers(0, n, 6) for n in params[k].shape)):
            h = 1e-6
            pp = [q.copy() for q in p64]
            pp[k][idx] += h
            lp = _mlp_loss64(x64, y, *pp)
            pp[k][idx] -= 2 * h
            want = (lp - _mlp_loss64(x64, y, *pp)) / (2 * h)
            assert abs(g[idx] - want) <= rt * np.abs(grads[k]).max() + 1e-7, (k, idx, g[idx], want)
