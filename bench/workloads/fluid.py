"""Stable-fluids step on a periodic N x N grid (examples/fluid.py): semi-Lagrangian advection of
the velocity and a dye with bilinear sampling, divergence, JACOBI_ITERS Jacobi iterations of the
pressure Poisson equation, projection.

Every implementation is a setup(inputs, opts) -> run function registered in IMPLS; run()
performs one step and returns (U', V', D', pressure) as NumPy arrays. setup raises common.Skip
when the implementation cannot run here.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import functools
import os

import numpy as np

from common import Skip, import_ember, import_example, init_taichi, init_warp, quiet_output, require
from gpu_common import (ember_on, ember_steps, ember_upload, jax_on, jax_steps, torch_compile, torch_on,
                        torch_steps, xp_on, xp_steps)

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


def _advect_xp(xp, F, u, v, dt):
    H, W = F.shape
    i, j = xp.indices(F.shape)
    x = j.astype(np.float32) - dt * u
    y = i.astype(np.float32) - dt * v
    x0, y0 = xp.floor(x), xp.floor(y)
    tx, ty = x - x0, y - y0
    j0, i0 = x0.astype(np.int32) % W, y0.astype(np.int32) % H
    j1, i1 = (j0 + 1) % W, (i0 + 1) % H
    a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
    b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
    return a + (b - a) * ty


def step_xp(xp, U, V, D, dt, iters=JACOBI_ITERS):
    """The step in vectorized array module xp (NumPy, or CuPy on the GPU), float32 throughout."""
    dt, h = np.float32(dt), np.float32(0.5)
    u, v, d = _advect_xp(xp, U, U, V, dt), _advect_xp(xp, V, U, V, dt), _advect_xp(xp, D, U, V, dt)
    sx = lambda a, k: xp.roll(a, -k, axis=1)  # a[i, j + k]  # noqa: E731
    sy = lambda a, k: xp.roll(a, -k, axis=0)  # a[i + k, j]  # noqa: E731
    div = h * ((sx(u, 1) - sx(u, -1)) + (sy(v, 1) - sy(v, -1)))
    p = xp.zeros_like(U)
    for _ in range(iters):
        p = (sy(p, -1) + sy(p, 1) + sx(p, -1) + sx(p, 1) - div) * np.float32(0.25)
    return u - h * (sx(p, 1) - sx(p, -1)), v - h * (sy(p, 1) - sy(p, -1)), d, p


def step_numpy(U, V, D, dt, iters=JACOBI_ITERS):
    """The step in vectorized NumPy, float32 throughout (also the reference)."""
    return step_xp(np, U, V, D, dt, iters)


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


def _step_torch(torch, U, V, D, dt, iters=JACOBI_ITERS):
    """step_numpy in PyTorch ops (torch.roll stencils, advanced-indexing gathers)."""
    H, W = U.shape
    i = torch.arange(H, dtype=torch.float32, device=U.device).unsqueeze(1)
    j = torch.arange(W, dtype=torch.float32, device=U.device).unsqueeze(0)

    def advect(F):
        x, y = j - dt * U, i - dt * V
        x0, y0 = torch.floor(x), torch.floor(y)
        tx, ty = x - x0, y - y0
        j0, i0 = x0.long() % W, y0.long() % H  # torch's % on integers wraps negatives like Python
        j1, i1 = (j0 + 1) % W, (i0 + 1) % H
        a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
        b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
        return a + (b - a) * ty

    u, v, d = advect(U), advect(V), advect(D)
    sx = lambda a, k: torch.roll(a, -k, dims=1)  # noqa: E731
    sy = lambda a, k: torch.roll(a, -k, dims=0)  # noqa: E731
    div = 0.5 * ((sx(u, 1) - sx(u, -1)) + (sy(v, 1) - sy(v, -1)))
    p = torch.zeros_like(U)
    for _ in range(iters):
        p = (sy(p, -1) + sy(p, 1) + sx(p, -1) + sx(p, 1) - div) * 0.25
    return u - 0.5 * (sx(p, 1) - sx(p, -1)), v - 0.5 * (sy(p, 1) - sy(p, -1)), d, p


def _torch_setup(inputs, compiled):
    torch = require("torch")
    torch.set_num_threads(os.cpu_count() or 1)
    U, V, D = (torch.from_numpy(a) for a in inputs[:3])
    dt = float(inputs[3])
    fn = lambda U, V, D: _step_torch(torch, U, V, D, dt)  # noqa: E731
    if compiled:
        try:
            fn = torch.compile(fn, dynamic=False)
        except Exception as e:
            raise Skip(f"torch.compile unavailable: {type(e).__name__}: {e}") from None

    def run():
        with torch.no_grad():
            return tuple(t.numpy() for t in fn(U, V, D))
    return run


def setup_torch(inputs, opts):
    """PyTorch CPU eager, every core: the NumPy code with torch ops (one kernel per op)."""
    return _torch_setup(inputs, compiled=False)


def setup_torch_compile(inputs, opts):
    """PyTorch torch.compile (Inductor's C++/OpenMP CPU code, the Jacobi loop unrolled by the
    trace); the first (warm-up) call compiles."""
    return _torch_setup(inputs, compiled=True)


def _step_jax(jax, U, V, D, dt):
    """step_numpy in jax.numpy (to be jitted), the Jacobi iterations in lax.fori_loop."""
    jnp, lax = jax.numpy, jax.lax
    H, W = U.shape
    i = jnp.arange(H, dtype=jnp.float32)[:, None]
    j = jnp.arange(W, dtype=jnp.float32)[None, :]

    def advect(F):
        x, y = j - dt * U, i - dt * V
        x0, y0 = jnp.floor(x), jnp.floor(y)
        tx, ty = x - x0, y - y0
        j0, i0 = x0.astype(jnp.int32) % W, y0.astype(jnp.int32) % H
        j1, i1 = (j0 + 1) % W, (i0 + 1) % H
        a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
        b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
        return a + (b - a) * ty

    u, v, d = advect(U), advect(V), advect(D)
    sx = lambda a, k: jnp.roll(a, -k, axis=1)  # noqa: E731
    sy = lambda a, k: jnp.roll(a, -k, axis=0)  # noqa: E731
    div = 0.5 * ((sx(u, 1) - sx(u, -1)) + (sy(v, 1) - sy(v, -1)))

    def jacobi(_, p):
        return (sy(p, -1) + sy(p, 1) + sx(p, -1) + sx(p, 1) - div) * 0.25

    p = lax.fori_loop(0, JACOBI_ITERS, jacobi, jnp.zeros_like(U))
    return u - 0.5 * (sx(p, 1) - sx(p, -1)), v - 0.5 * (sy(p, 1) - sy(p, -1)), d, p


def setup_jax(inputs, opts):
    """JAX on CPU: the NumPy code in jax.numpy under jax.jit, Jacobi in lax.fori_loop."""
    jax = require("jax")
    step = jax.jit(functools.partial(_step_jax, jax))
    U, V, D = (jax.device_put(a) for a in inputs[:3])
    dt = np.float32(inputs[3])

    def run():
        outs = jax.block_until_ready(step(U, V, D, dt))
        return tuple(np.asarray(t) for t in outs)
    return run


def setup_numba(inputs, opts):
    """Numba: the loops a user would write, prange over rows, one pass per stage."""
    numba = require("numba")
    f32 = np.float32

    @numba.njit(inline="always")
    def sample(F, i0, j0, i1, j1, tx, ty):
        a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
        b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
        return a + (b - a) * ty

    @numba.njit(parallel=True)
    def step(U, V, D, dt, iters, u, v, d, p, q):
        H, W = U.shape
        for i in numba.prange(H):
            for j in range(W):
                x = f32(j) - dt * U[i, j]
                y = f32(i) - dt * V[i, j]
                x0, y0 = np.floor(x), np.floor(y)
                tx, ty = x - x0, y - y0
                j0, i0 = int(x0) % W, int(y0) % H  # Python % semantics in numba too
                j1, i1 = (j0 + 1) % W, (i0 + 1) % H
                u[i, j] = sample(U, i0, j0, i1, j1, tx, ty)
                v[i, j] = sample(V, i0, j0, i1, j1, tx, ty)
                d[i, j] = sample(D, i0, j0, i1, j1, tx, ty)
        div = np.empty_like(U)
        for i in numba.prange(H):
            im, ip = (i - 1) % H, (i + 1) % H
            for j in range(W):
                jm, jp = (j - 1) % W, (j + 1) % W
                div[i, j] = f32(0.5) * ((u[i, jp] - u[i, jm]) + (v[ip, j] - v[im, j]))
                p[i, j] = f32(0.0)
        for _ in range(iters):
            for i in numba.prange(H):
                im, ip = (i - 1) % H, (i + 1) % H
                for j in range(W):
                    jm, jp = (j - 1) % W, (j + 1) % W
                    q[i, j] = (p[im, j] + p[ip, j] + p[i, jm] + p[i, jp] - div[i, j]) * f32(0.25)
            p, q = q, p
        for i in numba.prange(H):
            im, ip = (i - 1) % H, (i + 1) % H
            for j in range(W):
                jm, jp = (j - 1) % W, (j + 1) % W
                u[i, j] -= f32(0.5) * (p[i, jp] - p[i, jm])
                v[i, j] -= f32(0.5) * (p[ip, j] - p[im, j])
        return p

    U, V, D = inputs[:3]
    dt = np.float32(inputs[3])

    def run():
        u, v, d, p, q = (np.empty_like(U) for _ in range(5))
        P = step(U, V, D, dt, JACOBI_ITERS, u, v, d, p, q)
        return u, v, d, P
    return run


def setup_taichi(inputs, opts):
    """Taichi on CPU: one kernel per stage (outermost ndrange loops run in parallel), Jacobi as
    JACOBI_ITERS launches ping-ponging two ndarrays allocated once."""
    ti = init_taichi()
    arr = ti.types.ndarray(dtype=ti.f32, ndim=2)

    @ti.func
    def sample(F: ti.template(), x: ti.f32, y: ti.f32):
        H, W = F.shape[0], F.shape[1]
        x0, y0 = ti.floor(x), ti.floor(y)
        tx, ty = x - x0, y - y0
        j0, i0 = ti.cast(x0, ti.i32) % W, ti.cast(y0, ti.i32) % H  # Taichi's % is Python's
        j1, i1 = (j0 + 1) % W, (i0 + 1) % H
        a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
        b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
        return a + (b - a) * ty

    @ti.kernel
    def advect(U: arr, V: arr, D: arr, dt: ti.f32, u: arr, v: arr, d: arr):
        for i, j in U:
            x, y = ti.cast(j, ti.f32) - dt * U[i, j], ti.cast(i, ti.f32) - dt * V[i, j]
            u[i, j] = sample(U, x, y)
            v[i, j] = sample(V, x, y)
            d[i, j] = sample(D, x, y)

    @ti.kernel
    def divergence(u: arr, v: arr, div: arr, p: arr):
        H, W = u.shape[0], u.shape[1]
        for i, j in u:
            div[i, j] = 0.5 * ((u[i, (j + 1) % W] - u[i, (j - 1) % W])
                               + (v[(i + 1) % H, j] - v[(i - 1) % H, j]))
            p[i, j] = 0.0

    @ti.kernel
    def jacobi(p: arr, div: arr, q: arr):
        H, W = p.shape[0], p.shape[1]
        for i, j in p:
            q[i, j] = (p[(i - 1) % H, j] + p[(i + 1) % H, j] + p[i, (j - 1) % W]
                       + p[i, (j + 1) % W] - div[i, j]) * 0.25

    @ti.kernel
    def project(p: arr, u: arr, v: arr):
        H, W = p.shape[0], p.shape[1]
        for i, j in p:
            u[i, j] -= 0.5 * (p[i, (j + 1) % W] - p[i, (j - 1) % W])
            v[i, j] -= 0.5 * (p[(i + 1) % H, j] - p[(i - 1) % H, j])

    U, V, D = inputs[:3]
    dt = float(inputs[3])
    div, p, q = (ti.ndarray(ti.f32, U.shape) for _ in range(3))

    def run():
        u, v, d = (np.empty_like(U) for _ in range(3))
        advect(U, V, D, dt, u, v, d)
        divergence(u, v, div, p)
        a, b = p, q
        for _ in range(JACOBI_ITERS):
            jacobi(a, div, b)
            a, b = b, a
        project(a, u, v)
        ti.sync()
        return u, v, d, a.to_numpy()
    return run


def setup_warp(inputs, opts):
    """NVIDIA Warp on its CPU device: one kernel per stage launched over the grid (Warp runs CPU
    launches on one thread), Jacobi as JACOBI_ITERS launches ping-ponging two arrays."""
    wp = init_warp()
    arr = wp.array2d(dtype=wp.float32)

    @wp.func
    def wrap(k: int, n: int):
        return ((k % n) + n) % n  # Warp's integer % truncates like C

    @wp.func
    def sample(F: arr, x: float, y: float):
        H, W = F.shape[0], F.shape[1]
        x0, y0 = wp.floor(x), wp.floor(y)
        tx, ty = x - x0, y - y0
        j0, i0 = wrap(int(x0), W), wrap(int(y0), H)
        j1, i1 = (j0 + 1) % W, (i0 + 1) % H
        a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
        b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
        return a + (b - a) * ty

    @wp.kernel
    def advect(U: arr, V: arr, D: arr, dt: float, u: arr, v: arr, d: arr):
        i, j = wp.tid()
        x, y = float(j) - dt * U[i, j], float(i) - dt * V[i, j]
        u[i, j] = sample(U, x, y)
        v[i, j] = sample(V, x, y)
        d[i, j] = sample(D, x, y)

    @wp.kernel
    def divergence(u: arr, v: arr, div: arr, p: arr):
        i, j = wp.tid()
        H, W = u.shape[0], u.shape[1]
        div[i, j] = 0.5 * ((u[i, (j + 1) % W] - u[i, wrap(j - 1, W)])
                           + (v[(i + 1) % H, j] - v[wrap(i - 1, H), j]))
        p[i, j] = 0.0

    @wp.kernel
    def jacobi(p: arr, div: arr, q: arr):
        i, j = wp.tid()
        H, W = p.shape[0], p.shape[1]
        q[i, j] = (p[wrap(i - 1, H), j] + p[(i + 1) % H, j] + p[i, wrap(j - 1, W)]
                   + p[i, (j + 1) % W] - div[i, j]) * 0.25

    @wp.kernel
    def project(p: arr, u: arr, v: arr):
        i, j = wp.tid()
        H, W = p.shape[0], p.shape[1]
        u[i, j] = u[i, j] - 0.5 * (p[i, (j + 1) % W] - p[i, wrap(j - 1, W)])
        v[i, j] = v[i, j] - 0.5 * (p[(i + 1) % H, j] - p[wrap(i - 1, H), j])

    shape, dt, dev = inputs[0].shape, float(inputs[3]), "cpu"
    U, V, D = (wp.array(a, dtype=wp.float32, device=dev) for a in inputs[:3])
    u, v, d, div, p, q = (wp.empty(shape, dtype=wp.float32, device=dev) for _ in range(6))

    def run():
        wp.launch(advect, dim=shape, inputs=[U, V, D, dt, u, v, d], device=dev)
        wp.launch(divergence, dim=shape, inputs=[u, v, div, p], device=dev)
        a, b = p, q
        for _ in range(JACOBI_ITERS):
            wp.launch(jacobi, dim=shape, inputs=[a, div, b], device=dev)
            a, b = b, a
        wp.launch(project, dim=shape, inputs=[a, u, v], device=dev)
        wp.synchronize_device(dev)
        return u.numpy().copy(), v.numpy().copy(), d.numpy().copy(), a.numpy().copy()
    return run


def setup_tensorfrost(inputs, opts):
    """TensorFrost on its CPU backend: the step as whole-grid tensor expressions with gathers
    (F[i0, j0]) and index stencils, the Jacobi iterations unrolled at trace time as in
    TensorFrost's own examples; it fuses them into kernels."""
    with quiet_output():  # it prints a banner on import and its g++ run while compiling
        tf = require("TensorFrost")
        tf.initialize(tf.cpu)

    def program():
        U = tf.input([-1, -1], tf.float32)
        H, W = U.shape
        V = tf.input([H, W], tf.float32)
        D = tf.input([H, W], tf.float32)
        dt = tf.input([1], tf.float32)[0]
        i, j = tf.indices([H, W])
        x, y = tf.float(j) - dt * U, tf.float(i) - dt * V
        x0, y0 = tf.floor(x), tf.floor(y)
        tx, ty = x - x0, y - y0
        j0, i0 = (tf.int(x0) % W + W) % W, (tf.int(y0) % H + H) % H  # % truncates like C
        j1, i1 = (j0 + 1) % W, (i0 + 1) % H

        def sample(F):
            a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
            b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
            return a + (b - a) * ty

        u, v, d = sample(U), sample(V), sample(D)
        im, ip, jm, jp = (i + H - 1) % H, (i + 1) % H, (j + W - 1) % W, (j + 1) % W
        div = 0.5 * ((u[i, jp] - u[i, jm]) + (v[ip, j] - v[im, j]))
        p = tf.zeros([H, W], tf.float32)
        for _ in range(JACOBI_ITERS):
            p = (p[im, j] + p[ip, j] + p[i, jm] + p[i, jp] - div) * 0.25
        return u - 0.5 * (p[i, jp] - p[i, jm]), v - 0.5 * (p[ip, j] - p[im, j]), d, p

    with quiet_output():
        prog = tf.compile(program)
    args = [tf.tensor(a) for a in inputs[:3]] + [tf.tensor(np.array([inputs[3]], np.float32))]
    return lambda: tuple(t.numpy for t in prog(*args))


# Order is the table's order. Peers: add a setup_<name> above and list it here.
IMPLS = {
    "ember": setup_ember,
    "ember-unrolled": setup_ember_unrolled,
    "numpy": setup_numpy,
    "torch": setup_torch,
    "torch-compile": setup_torch_compile,
    "numba": setup_numba,
    "jax": setup_jax,
    "taichi": setup_taichi,
    "warp": setup_warp,
    "tensorfrost": setup_tensorfrost,
}


# GPU setups (bench/gpu.py): setup(inputs, opts) -> (step, fetch), inputs uploaded once; see
# bench/gpu_common.py. opts["device"] / opts["xp"] let a test run the peers' code on the CPU.

def gpu_ember(inputs, opts):
    """Ember: examples/fluid.py's fluid_step (Jacobi in an em.loop) on opts["backend"]."""
    em = ember_on(opts)
    step = import_example("fluid").fluid_step
    U, V, D = ember_upload(em, *inputs[:3])
    dt = inputs[3]
    return ember_steps(lambda: step(U, V, D, dt, JACOBI_ITERS))


def _gpu_torch(inputs, opts, compiled):
    """The PyTorch GPU setups (GPU_IMPLS torch and torch_compile). PyTorch eager: torch.roll stencils and advanced-indexing gathers, a kernel per op.
    Compiled: torch.compile of the same code (Inductor/Triton; the Jacobi loop unrolled by the trace)."""
    torch, dev, sync = torch_on(opts)
    U, V, D = (torch.from_numpy(a).to(dev) for a in inputs[:3])
    dt = float(inputs[3])
    fn = lambda U, V, D: _step_torch(torch, U, V, D, dt)  # noqa: E731
    fn = torch_compile(torch, fn) if compiled else fn
    return torch_steps(torch, lambda: fn(U, V, D), sync)


def gpu_jax(inputs, opts):
    """JAX: the step under jax.jit on the GPU, Jacobi in lax.fori_loop."""
    jax, dev = jax_on(opts)
    step = jax.jit(functools.partial(_step_jax, jax))
    U, V, D = (jax.device_put(a, dev) for a in inputs[:3])
    dt = np.float32(inputs[3])
    return jax_steps(jax, lambda: step(U, V, D, dt))


def gpu_cupy(inputs, opts):
    """CuPy: step_numpy's code with cupy for numpy (cp.roll stencils, fancy-index gathers)."""
    xp, sync = xp_on(opts)
    U, V, D = (xp.asarray(a) for a in inputs[:3])
    dt = inputs[3]
    return xp_steps(xp, lambda: step_xp(xp, U, V, D, dt), sync)


# jax last: its memory pool does not shrink (bench/gpu.py caps it).
GPU_IMPLS = {"ember": gpu_ember, "torch": functools.partial(_gpu_torch, compiled=False),
             "torch_compile": functools.partial(_gpu_torch, compiled=True),
             "cupy": gpu_cupy, "jax": gpu_jax}
