"""Stable-fluids step on a periodic N x N grid (examples/fluid.py): semi-Lagrangian advection of
the velocity and a dye with bilinear sampling, divergence, JACOBI_ITERS Jacobi iterations of the
pressure Poisson equation, projection.

Every implementation is a setup(inputs, opts) -> run function registered in IMPLS; run()
performs one step and returns (U', V', D', pressure) as NumPy arrays. setup raises common.Skip
when the implementation cannot run here.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import numpy as np

from common import import_ember, import_example

NAME = "fluid"
DEFAULT_N = 512
JACOBI_ITERS = 20
DT = 1.0  # in cells per unit velocity


def make_inputs(n, seed=0):
    """Seeded float32 velocity (u, v) and dye fields [n, n] plus the time step."""
    rng = np.random.default_rng(seed)
    U = rng.uniform(-2.0, 2.0, size=(n, n)).astype(np.float32)
    V = rng.uniform(-2.0, 2.0, size=(n, n)).astype(np.float32)
    D = rng.uniform(0.0, 1.0, size=(n, n)).astype(np.float32)
    return U, V, D, DT


def _advect_numpy(F, u, v, dt):
    H, W = F.shape
    i, j = np.indices(F.shape)
    x = j.astype(np.float32) - dt * u
    y = i.astype(np.float32) - dt * v
    x0, y0 = np.floor(x), np.floor(y)
    tx, ty = x - x0, y - y0
    j0, i0 = x0.astype(np.int32) % W, y0.astype(np.int32) % H
    j1, i1 = (j0 + 1) % W, (i0 + 1) % H
    a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
    b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
    return a + (b - a) * ty


def step_numpy(U, V, D, dt, iters=JACOBI_ITERS):
    """The step in vectorized NumPy, float32 throughout (also the reference)."""
    dt, h = np.float32(dt), np.float32(0.5)
    u, v, d = _advect_numpy(U, U, V, dt), _advect_numpy(V, U, V, dt), _advect_numpy(D, U, V, dt)
    sx = lambda a, k: np.roll(a, -k, axis=1)  # a[i, j + k]  # noqa: E731
    sy = lambda a, k: np.roll(a, -k, axis=0)  # a[i + k, j]  # noqa: E731
    div = h * ((sx(u, 1) - sx(u, -1)) + (sy(v, 1) - sy(v, -1)))
    p = np.zeros_like(U)
    for _ in range(iters):
        p = (sy(p, -1) + sy(p, 1) + sx(p, -1) + sx(p, 1) - div) * np.float32(0.25)
    return u - h * (sx(p, 1) - sx(p, -1)), v - h * (sy(p, 1) - sy(p, -1)), d, p


def reference(inputs):
    """The outputs every implementation is checked against."""
    return step_numpy(*inputs)


def setup_numpy(inputs, opts):
    """Plain vectorized NumPy (np.roll stencils, fancy-indexed bilinear gathers)."""
    return lambda: step_numpy(*inputs)


def _run(prog, *args):
    return lambda: tuple(t.numpy() for t in prog(*args))


def setup_ember(inputs, opts):
    """Ember, Jacobi iterations in an em.loop over an em.var pressure (examples/fluid.py)."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))
    return _run(import_example("fluid").fluid_step, *inputs, JACOBI_ITERS)


def setup_ember_unrolled(inputs, opts):
    """Ember, Jacobi iterations unrolled at trace time (a Python loop; fixed count per program)."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))
    return _run(import_example("fluid").fluid_step_unrolled(JACOBI_ITERS), *inputs)


# Order is the table's order. Peers: add a setup_<name> above and list it here.
IMPLS = {
    "ember": setup_ember,
    "ember-unrolled": setup_ember_unrolled,
    "numpy": setup_numpy,
}
