"""Gradient of the N-body potential energy with respect to the positions, by reverse-mode autodiff,
next to the forward force computation it replaces.

    E(X) = -1/2 sum_{i,j} 1 / sqrt(|x_i - x_j|^2 + 1e-4)      (unit masses, 1e-4 softening)
    dE/dX = -F, F the force of examples/nbody.py's step

"ember" is em.grad(E, X) of the energy written in tensor code; "ember-force" is the force part of
examples/nbody.py's step (the program autodiff has to compete with), returning -F; summary()
prints the ratio of their times (the issue's target: the gradient in at most 2 kernels and within
1.5x the force's time) and both programs' kernel counts. The peers differentiate the same energy
with their own autodiff (jax.grad, torch autograd); numpy, cpp and numba write the gradient by hand
(the force loop with the sign flipped). run() returns dE/dX as a NumPy array.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import os

import numpy as np

from common import build_cpp, float_ptr, import_ember, require

NAME = "nbody_grad"
DEFAULT_N = 4096
SOFTENING = 1e-4

# Kernel counts of the Ember programs, filled in by their setups (for summary()).
KERNELS = {}


def make_inputs(n, seed=0):
    """Seeded float32 positions [n, 3] (the nbody workload's)."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1.0, 1.0, size=(n, 3)).astype(np.float32),)


def reference(inputs):
    """dE/dX in float64 (row blocks of 256 bodies), rounded to float32."""
    X = inputs[0].astype(np.float64)
    G = np.empty_like(X)
    for s in range(0, len(X), 256):
        d = X[s:s + 256, None, :] - X[None, :, :]
        r2 = np.sum(d * d, axis=-1, keepdims=True) + SOFTENING
        G[s:s + 256] = np.sum(d / (r2 * np.sqrt(r2)), axis=1)
    return (G.astype(np.float32),)


def setup_ember(inputs, opts):
    """Ember: em.grad of the energy, one @em.compile program (the first call compiles)."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))

    @em.compile
    def energy_grad(X: em.f32["N", 3]):  # noqa: F821 ("N" is a symbol)
        d = X[:, None, :] - X[None, :, :]
        r2 = em.sum(d * d, axis=-1) + SOFTENING
        E = -0.5 * em.sum(1.0 / em.sqrt(r2))
        return em.grad(E, X)

    X = inputs[0]

    def run():
        G = energy_grad(X).numpy()
        KERNELS["ember"] = energy_grad.kernel_count
        return (G,)
    return run


def setup_ember_force(inputs, opts):
    """Ember: the force part of examples/nbody.py's step (returns -F, i.e. dE/dX; the negation is
    NumPy's, on N x 3 floats)."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))

    @em.compile
    def force(X: em.f32["N", 3]):  # noqa: F821
        d = X[:, None, :] - X[None, :, :]
        r2 = em.sum(d * d, axis=-1, keepdims=True) + SOFTENING
        return em.sum(-d / (r2 * em.sqrt(r2)), axis=1)

    X = inputs[0]

    def run():
        F = force(X).numpy()
        KERNELS["ember-force"] = force.kernel_count
        return (-F,)
    return run


def setup_numpy(inputs, opts):
    """NumPy broadcasting, float32, the analytic gradient (= -F): [N, N, 3] temporaries."""
    X = inputs[0]

    def run():
        d = X[:, None, :] - X[None, :, :]
        r2 = np.sum(d * d, axis=-1, keepdims=True) + np.float32(SOFTENING)
        return (np.sum(d / (r2 * np.sqrt(r2)), axis=1),)
    return run


def setup_cpp(inputs, opts):
    """Hand-written fused C++/OpenMP loop (bench/reference/nbody_grad.cpp: nbody.cpp's force loop
    with the sign flipped) called through ctypes."""
    import ctypes
    lib = build_cpp("nbody_grad.cpp")
    fn = lib.nbody_energy_grad
    fn.restype = None
    fn.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    X = np.ascontiguousarray(inputs[0])

    def run():
        G = np.empty_like(X)
        fn(float_ptr(X), X.shape[0], float_ptr(G))
        return (G,)
    return run


def setup_numba(inputs, opts):
    """Numba parallel explicit loop, the analytic gradient written like the cpp reference (nbody's
    numba loop with the sign flipped: prange over bodies, a structure-of-arrays copy, fastmath
    reassoc and contract as the reference's `omp simd reduction` and g++'s FMA contraction)."""
    numba = require("numba")
    f32 = np.float32

    @numba.njit(parallel=True, fastmath={"reassoc", "contract"})
    def kernel(X, G):
        n = X.shape[0]
        P = np.ascontiguousarray(X.T)
        xs, ys, zs = P[0], P[1], P[2]
        for i in numba.prange(n):
            xi, yi, zi = xs[i], ys[i], zs[i]
            gx, gy, gz = f32(0.0), f32(0.0), f32(0.0)
            for j in range(n):
                dx, dy, dz = xi - xs[j], yi - ys[j], zi - zs[j]
                r2 = dx * dx + dy * dy + dz * dz + f32(SOFTENING)
                inv = f32(1.0) / (r2 * np.sqrt(r2))
                gx += dx * inv
                gy += dy * inv
                gz += dz * inv
            G[i, 0], G[i, 1], G[i, 2] = gx, gy, gz

    X = inputs[0]

    def run():
        G = np.empty_like(X)
        kernel(X, G)
        return (G,)
    return run


def setup_torch(inputs, opts):
    """PyTorch CPU eager autograd of the energy (every core; [N, N, 3] temporaries)."""
    torch = require("torch")
    torch.set_num_threads(os.cpu_count() or 1)
    X0 = torch.from_numpy(inputs[0])

    def run():
        X = X0.detach().requires_grad_(True)
        d = X[:, None, :] - X[None, :, :]
        r2 = torch.sum(d * d, dim=-1) + SOFTENING
        E = -0.5 * torch.sum(1.0 / torch.sqrt(r2))
        (G,) = torch.autograd.grad(E, X)
        return (G.numpy(),)
    return run


def setup_jax(inputs, opts):
    """JAX on CPU: jax.jit(jax.grad(energy)) (XLA fuses what it can)."""
    jax = require("jax")
    jnp = jax.numpy

    def energy(X):
        d = X[:, None, :] - X[None, :, :]
        r2 = jnp.sum(d * d, axis=-1) + SOFTENING
        return -0.5 * jnp.sum(1.0 / jnp.sqrt(r2))

    grad = jax.jit(jax.grad(energy))
    X = jax.device_put(inputs[0])
    return lambda: (np.asarray(jax.block_until_ready(grad(X))),)


def summary(results, opts=None):
    """The gradient's time over the force's (both Ember, this run) and their kernel counts."""
    g, f = results.get("ember", {}), results.get("ember-force", {})
    if "median_ms" not in g or "median_ms" not in f:
        return "grad / force: n/a (ember or ember-force did not run)"
    ratio = g["median_ms"] / f["median_ms"]
    kg, kf = KERNELS.get("ember", "?"), KERNELS.get("ember-force", "?")
    ok = isinstance(kg, int) and kg <= 2 and ratio <= 1.5
    return (f"grad / force time: {ratio:.2f} ({g['median_ms']:.2f} ms / {f['median_ms']:.2f} ms); kernels: "
            f"grad {kg}, force {kf} (target: <= 2 kernels and <= 1.5x: {'met' if ok else 'not met'})")


# Order is the table's order.
IMPLS = {
    "ember": setup_ember,
    "ember-force": setup_ember_force,
    "numpy": setup_numpy,
    "cpp": setup_cpp,
    "numba": setup_numba,
    "torch": setup_torch,
    "jax": setup_jax,
}
