"""N-body step of DESIGN.md section 5: all-pairs softened gravity, then one Euler step.

Every implementation is a setup(inputs, opts) -> run function registered in IMPLS; run()
performs one step and returns (X2, V2) as NumPy arrays, so timing includes getting results
back to the host. setup raises common.Skip when the implementation cannot run here.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import functools
import os

import numpy as np

from common import (Skip, build_cpp, float_ptr, import_ember, import_example, init_taichi,
                    init_warp, quiet_output, require)
from gpu_common import (ember_on, ember_steps, ember_upload, jax_on, jax_steps, torch_compile, torch_on,
                        torch_steps, xp_on, xp_steps)

NAME = "nbody"
DEFAULT_N = 4096
SOFTENING = 1e-4
DT = 0.01


def make_inputs(n, seed=0):
    """Seeded float32 positions and velocities [n, 3] plus the time step."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3)).astype(np.float32)
    V = rng.normal(0.0, 0.1, size=(n, 3)).astype(np.float32)
    return X, V, DT


def _step_rows(xp, Xi, Vi, X, dt):
    """The step of the bodies at Xi, Vi (pulled by every body of X) with broadcasting in array
    module xp, float32 throughout."""
    dt = np.float32(dt)
    d = Xi[:, None, :] - X[None, :, :]
    r2 = xp.sum(d * d, axis=-1, keepdims=True) + np.float32(SOFTENING)
    F = xp.sum(-d / (r2 * xp.sqrt(r2)), axis=1)
    V2 = Vi + F * dt
    return Xi + V2 * dt, V2


def step_xp(xp, X, V, dt):
    """The step written with broadcasting in array module xp (NumPy, or CuPy on the GPU)."""
    return _step_rows(xp, X, V, X, dt)


def step_numpy(X, V, dt):
    """The step written with NumPy broadcasting, float32 throughout (also the reference)."""
    return step_xp(np, X, V, dt)


def reference(inputs):
    """The outputs every implementation is checked against."""
    return step_numpy(*inputs)


def reference_rows(inputs, rows, block=256):
    """reference(inputs)'s rows `rows` only, computed a block of rows at a time: bench/gpu.py checks
    these at sizes whose [N, N, 3] NumPy temporaries would not fit in memory (or time)."""
    X, V, dt = inputs
    parts = [_step_rows(np, X[r], V[r], X, dt) for r in np.array_split(rows, max(1, len(rows) // block))]
    return tuple(np.concatenate(k) for k in zip(*parts))


def setup_numpy(inputs, opts):
    """Plain vectorized NumPy: builds [N, N, 3] temporaries, one op at a time."""
    return lambda: step_numpy(*inputs)


def setup_cpp(inputs, opts):
    """Hand-written fused C++/OpenMP loop (bench/reference/nbody.cpp) called through ctypes."""
    import ctypes
    lib = build_cpp("nbody.cpp")
    fn = lib.nbody_step
    fn.restype = None
    fn.argtypes = [ctypes.POINTER(ctypes.c_float)] * 2 + [ctypes.c_float, ctypes.c_int] + \
        [ctypes.POINTER(ctypes.c_float)] * 2
    X, V, dt = (np.ascontiguousarray(inputs[0]), np.ascontiguousarray(inputs[1]), inputs[2])

    def run():
        X2, V2 = np.empty_like(X), np.empty_like(V)
        fn(float_ptr(X), float_ptr(V), dt, X.shape[0], float_ptr(X2), float_ptr(V2))
        return X2, V2
    return run


def setup_ember(inputs, opts):
    """Ember: the DESIGN section 5 step under @em.compile (examples/nbody.py); the first
    (warm-up) call compiles."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))
    step = import_example("nbody").step
    X, V, dt = inputs

    def run():
        X2, V2 = step(X, V, dt)
        return X2.numpy(), V2.numpy()
    return run


def setup_ember_loop(inputs, opts):
    """Ember, explicit loop (examples/nbody_loop.py): one em.kernel thread per body, an em.loop
    over j accumulating the force in three em.var registers."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))

    step = import_example("nbody_loop").step_loop
    X, V, dt = inputs

    def run():
        X2, V2 = step(X, V, dt)
        return X2.numpy(), V2.numpy()
    return run


def _step_torch(torch, X, V, dt):
    """step_numpy in PyTorch ops (on whatever device X and V are)."""
    d = X[:, None, :] - X[None, :, :]
    r2 = torch.sum(d * d, dim=-1, keepdim=True) + SOFTENING
    F = torch.sum(-d / (r2 * torch.sqrt(r2)), dim=1)
    V2 = V + F * dt
    return X + V2 * dt, V2


def _torch_setup(inputs, compiled):
    torch = require("torch")
    torch.set_num_threads(os.cpu_count() or 1)
    X, V = (torch.from_numpy(a) for a in inputs[:2])
    dt = float(inputs[2])

    def step(X, V):
        return _step_torch(torch, X, V, dt)

    if compiled:
        try:
            step = torch.compile(step, dynamic=False)
        except Exception as e:
            raise Skip(f"torch.compile unavailable: {type(e).__name__}: {e}") from None

    def run():
        with torch.no_grad():
            return tuple(t.numpy() for t in step(X, V))
    return run


def setup_torch(inputs, opts):
    """PyTorch CPU eager, every core (the NumPy broadcasting code, [N, N, 3] temporaries)."""
    return _torch_setup(inputs, compiled=False)


def setup_torch_compile(inputs, opts):
    """The same code under torch.compile (Inductor fuses it into C++/OpenMP loops); the first
    (warm-up) call compiles."""
    return _torch_setup(inputs, compiled=True)


def setup_numba(inputs, opts):
    """Numba parallel explicit loop, written like the cpp reference: prange over bodies i, a
    structure-of-arrays copy so the inner j loop reads contiguous floats, and the same
    floating-point licence (fastmath reassoc = its `omp simd reduction`, contract = g++'s
    default FMA contraction), which lets LLVM vectorize the force sums."""
    numba = require("numba")
    f32 = np.float32

    @numba.njit(parallel=True, fastmath={"reassoc", "contract"})
    def kernel(X, V, dt, X2, V2):
        n = X.shape[0]
        P = np.ascontiguousarray(X.T)
        xs, ys, zs = P[0], P[1], P[2]
        for i in numba.prange(n):
            xi, yi, zi = xs[i], ys[i], zs[i]
            fx, fy, fz = f32(0.0), f32(0.0), f32(0.0)
            for j in range(n):
                dx, dy, dz = xi - xs[j], yi - ys[j], zi - zs[j]
                r2 = dx * dx + dy * dy + dz * dz + f32(SOFTENING)
                inv = f32(1.0) / (r2 * np.sqrt(r2))
                fx -= dx * inv
                fy -= dy * inv
                fz -= dz * inv
            vx, vy, vz = V[i, 0] + fx * dt, V[i, 1] + fy * dt, V[i, 2] + fz * dt
            V2[i, 0], V2[i, 1], V2[i, 2] = vx, vy, vz
            X2[i, 0], X2[i, 1], X2[i, 2] = xi + vx * dt, yi + vy * dt, zi + vz * dt

    X, V, dt = inputs[0], inputs[1], np.float32(inputs[2])

    def run():
        X2, V2 = np.empty_like(X), np.empty_like(V)
        kernel(X, V, dt, X2, V2)
        return X2, V2
    return run


def _step_jax(jnp, X, V, dt):
    """step_numpy in jax.numpy (to be jitted; XLA fuses what it can)."""
    d = X[:, None, :] - X[None, :, :]
    r2 = jnp.sum(d * d, axis=-1, keepdims=True) + 1e-4
    F = jnp.sum(-d / (r2 * jnp.sqrt(r2)), axis=1)
    V2 = V + F * dt
    return X + V2 * dt, V2


def setup_jax(inputs, opts):
    """JAX on CPU, jit-compiled broadcasting code (XLA fuses what it can)."""
    jax = require("jax")
    step = jax.jit(functools.partial(_step_jax, jax.numpy))
    X, V = (jax.device_put(a) for a in inputs[:2])
    dt = np.float32(inputs[2])

    def run():
        X2, V2 = jax.block_until_ready(step(X, V, dt))
        return np.asarray(X2), np.asarray(V2)
    return run


def setup_taichi(inputs, opts):
    """Taichi on CPU: explicit loop kernel; the outermost range-for is parallelized."""
    ti = init_taichi()
    vec_arr = ti.types.ndarray(dtype=ti.math.vec3, ndim=1)

    @ti.kernel
    def step(X: vec_arr, V: vec_arr, dt: ti.f32, X2: vec_arr, V2: vec_arr):
        for i in range(X.shape[0]):
            xi = X[i]
            f = ti.math.vec3(0.0)
            for j in range(X.shape[0]):
                d = xi - X[j]
                r2 = d.dot(d) + 1e-4
                f -= d / (r2 * ti.sqrt(r2))
            v = V[i] + f * dt
            V2[i] = v
            X2[i] = xi + v * dt

    X, V, dt = inputs

    def run():
        X2, V2 = np.empty_like(X), np.empty_like(V)
        step(X, V, dt, X2, V2)
        ti.sync()
        return X2, V2
    return run


def setup_warp(inputs, opts):
    """NVIDIA Warp on its CPU device: one thread per body, inner loop over all bodies (Warp runs
    CPU launches on one thread)."""
    wp = init_warp()

    @wp.kernel
    def step(X: wp.array(dtype=wp.vec3), V: wp.array(dtype=wp.vec3), dt: float,
             X2: wp.array(dtype=wp.vec3), V2: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        xi = X[i]
        f = wp.vec3(0.0, 0.0, 0.0)
        for j in range(X.shape[0]):
            d = xi - X[j]
            r2 = wp.dot(d, d) + 1.0e-4
            f = f - d / (r2 * wp.sqrt(r2))
        v = V[i] + f * dt
        V2[i] = v
        X2[i] = xi + v * dt

    n, dt = inputs[0].shape[0], float(inputs[2])
    X, V = (wp.array(a, dtype=wp.vec3, device="cpu") for a in inputs[:2])
    X2, V2 = (wp.empty(n, dtype=wp.vec3, device="cpu") for _ in range(2))

    def run():
        wp.launch(step, dim=n, inputs=[X, V, dt, X2, V2], device="cpu")
        wp.synchronize_device("cpu")
        return X2.numpy(), V2.numpy()
    return run


def setup_tensorfrost(inputs, opts):
    """TensorFrost (the closest prior system) on its CPU backend, same broadcasting code."""
    with quiet_output():  # it prints a banner on import and its g++ run while compiling
        tf = require("TensorFrost")
        tf.initialize(tf.cpu)

    def program():
        X = tf.input([-1, 3], tf.float32)
        V = tf.input([X.shape[0], 3], tf.float32)
        dt = tf.input([1], tf.float32)[0]
        d = tf.unsqueeze(X, axis=1) - tf.unsqueeze(X, axis=0)
        r2 = tf.unsqueeze(tf.sum(d * d, axis=-1), axis=-1) + 1e-4
        F = tf.sum(-d / (r2 * tf.sqrt(r2)), axis=1)
        V2 = V + F * dt
        return X + V2 * dt, V2

    with quiet_output():
        prog = tf.compile(program)
    X, V = (tf.tensor(a) for a in inputs[:2])
    dt = tf.tensor(np.array([inputs[2]], np.float32))

    def run():
        X2, V2 = prog(X, V, dt)
        return X2.numpy, V2.numpy
    return run


# Order is the table's order. Peers: add a setup_<name> above and list it here.
IMPLS = {
    "ember": setup_ember,
    "ember-loop": setup_ember_loop,
    "numpy": setup_numpy,
    "cpp": setup_cpp,
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
    """Ember: examples/nbody.py's step on opts["backend"] (one kernel, a thread per body)."""
    em = ember_on(opts)
    step = import_example("nbody").step
    X, V = ember_upload(em, *inputs[:2])
    dt = inputs[2]
    return ember_steps(lambda: step(X, V, dt))


def _gpu_torch(inputs, opts, compiled):
    """The PyTorch GPU setups (GPU_IMPLS torch and torch_compile). PyTorch eager: the broadcasting code, [N, N, 3] temporaries in device memory.
    Compiled: torch.compile of the same code (Inductor fuses it into Triton kernels)."""
    torch, dev, sync = torch_on(opts)
    X, V = (torch.from_numpy(a).to(dev) for a in inputs[:2])
    dt = float(inputs[2])
    fn = lambda X, V: _step_torch(torch, X, V, dt)  # noqa: E731
    fn = torch_compile(torch, fn) if compiled else fn
    return torch_steps(torch, lambda: fn(X, V), sync)


def gpu_jax(inputs, opts):
    """JAX: the broadcasting code under jax.jit on the GPU."""
    jax, dev = jax_on(opts)
    step = jax.jit(functools.partial(_step_jax, jax.numpy))
    X, V = (jax.device_put(a, dev) for a in inputs[:2])
    dt = np.float32(inputs[2])
    return jax_steps(jax, lambda: step(X, V, dt))


def gpu_cupy(inputs, opts):
    """CuPy: step_numpy's broadcasting code with cupy for numpy ([N, N, 3] temporaries)."""
    xp, sync = xp_on(opts)
    X, V = (xp.asarray(a) for a in inputs[:2])
    dt = inputs[2]
    return xp_steps(xp, lambda: step_xp(xp, X, V, dt), sync)


# jax last: its memory pool does not shrink (bench/gpu.py caps it).
GPU_IMPLS = {"ember": gpu_ember, "torch": functools.partial(_gpu_torch, compiled=False),
             "torch_compile": functools.partial(_gpu_torch, compiled=True),
             "cupy": gpu_cupy, "jax": gpu_jax}
