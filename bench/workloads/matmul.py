"""Dense float32 matrix product C = A @ B of two N x N matrices.

Every implementation is a setup(inputs, opts) -> run function registered in IMPLS; run()
computes C and returns it as a NumPy array (timing includes getting it back to the host).
setup raises common.Skip when the implementation cannot run here. Sum orders differ between
implementations; the reference is computed in float64.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import functools
import os

import numpy as np

from common import import_ember, init_taichi, init_warp, quiet_output, require
from gpu_common import (ember_on, ember_steps, ember_upload, jax_on, jax_steps, torch_compile, torch_on,
                        torch_steps, xp_on, xp_steps)

NAME = "matmul"
DEFAULT_N = 512


def make_inputs(n, seed=0):
    """Seeded float32 matrices A, B of shape [n, n]."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1.0, 1.0, size=(n, n)).astype(np.float32)
    B = rng.uniform(-1.0, 1.0, size=(n, n)).astype(np.float32)
    return A, B


def reference(inputs):
    """A @ B in float64, rounded to float32."""
    A, B = inputs
    return ((A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32),)


def setup_numpy(inputs, opts):
    """NumPy's matmul (whatever BLAS this NumPy links: Debian's is the reference BLAS)."""
    A, B = inputs
    return lambda: (A @ B,)


def _ember_matmul(em):
    """The compiled program `a @ b` (em imported and initialized)."""
    @em.compile
    def mm(a: em.f32["N", "K"], b: em.f32["K", "M"]):  # noqa: F821 ("N" is a symbol)
        return a @ b
    return mm


def setup_ember(inputs, opts):
    """Ember: `a @ b` under @em.compile (one kernel: packed panels and a 6 x 16 micro-kernel, codegen/cpu_gemm.h)."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))
    mm = _ember_matmul(em)
    A, B = inputs
    return lambda: (mm(A, B).numpy(),)


def setup_torch(inputs, opts):
    """PyTorch CPU, using every core (Debian's build defaults to one thread)."""
    torch = require("torch")
    torch.set_num_threads(os.cpu_count() or 1)
    A, B = (torch.from_numpy(a) for a in inputs)

    def run():
        with torch.no_grad():
            return ((A @ B).numpy(),)
    return run


def setup_jax(inputs, opts):
    """JAX on CPU: jnp.matmul under jax.jit (XLA's CPU GEMM library call)."""
    jax = require("jax")
    mm = jax.jit(jax.numpy.matmul)
    A, B = (jax.device_put(a) for a in inputs)
    return lambda: (np.asarray(jax.block_until_ready(mm(A, B))),)


def setup_numba(inputs, opts):
    """Numba: the triple loop a user would write, prange over rows, i-k-j order so the inner
    loop streams rows of B and C and vectorizes (fastmath contract: FMAs, as g++ makes by
    default; reassoc as in nbody)."""
    numba = require("numba")

    @numba.njit(parallel=True, fastmath={"reassoc", "contract"})
    def mm(A, B, C):
        n, kk, m = A.shape[0], A.shape[1], B.shape[1]
        for i in numba.prange(n):
            for j in range(m):
                C[i, j] = np.float32(0.0)
            for k in range(kk):
                a = A[i, k]
                for j in range(m):
                    C[i, j] += a * B[k, j]

    A, B = inputs

    def run():
        C = np.empty((A.shape[0], B.shape[1]), np.float32)
        mm(A, B, C)
        return (C,)
    return run


def setup_taichi(inputs, opts):
    """Taichi on CPU (it has no library GEMM for ndarrays): the outermost loop over rows runs in
    parallel, each row accumulated in i-k-j order so the inner loop streams rows of B and C (about
    3x faster here than a dot product per output element)."""
    ti = init_taichi()
    arr = ti.types.ndarray(dtype=ti.f32, ndim=2)

    @ti.kernel
    def mm(A: arr, B: arr, C: arr):
        for i in range(A.shape[0]):
            for j in range(B.shape[1]):
                C[i, j] = 0.0
            for k in range(A.shape[1]):
                a = A[i, k]
                for j in range(B.shape[1]):
                    C[i, j] += a * B[k, j]

    A, B = inputs

    def run():
        C = np.empty((A.shape[0], B.shape[1]), np.float32)
        mm(A, B, C)
        ti.sync()
        return (C,)
    return run


TILE = 32  # Warp tile edge (M, N and K)


def setup_warp(inputs, opts):
    """NVIDIA Warp on its CPU device, its GEMM idiom: a tiled launch, each block loading 32 x 32
    tiles of A and B and accumulating wp.tile_matmul into a register tile (tile_load zero-fills
    past the edges, tile_store skips them); about 10x faster here than one thread per output
    element. Warp runs CPU launches on one thread."""
    wp = init_warp()

    @wp.kernel
    def mm(A: wp.array2d(dtype=float), B: wp.array2d(dtype=float), C: wp.array2d(dtype=float)):
        i, j = wp.tid()
        acc = wp.tile_zeros(shape=(TILE, TILE), dtype=float)
        for k in range((A.shape[1] + TILE - 1) // TILE):
            a = wp.tile_load(A, shape=(TILE, TILE), offset=(i * TILE, k * TILE))
            b = wp.tile_load(B, shape=(TILE, TILE), offset=(k * TILE, j * TILE))
            wp.tile_matmul(a, b, acc)
        wp.tile_store(C, acc, offset=(i * TILE, j * TILE))

    dev = "cpu"
    A, B = (wp.array(a, dtype=float, device=dev) for a in inputs)
    n, m = inputs[0].shape[0], inputs[1].shape[1]
    C = wp.empty((n, m), dtype=float, device=dev)
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)

    def run():
        wp.launch_tiled(mm, dim=grid, inputs=[A, B, C], block_dim=64, device=dev)
        wp.synchronize_device(dev)
        return (C.numpy().copy(),)
    return run


def setup_tensorfrost(inputs, opts):
    """TensorFrost on its CPU backend: tf.matmul in a compiled program."""
    with quiet_output():  # it prints a banner on import and its g++ run while compiling
        tf = require("TensorFrost")
        tf.initialize(tf.cpu)

    def program():
        A = tf.input([-1, -1], tf.float32)
        B = tf.input([A.shape[1], -1], tf.float32)
        return tf.matmul(A, B)

    with quiet_output():
        prog = tf.compile(program)
    A, B = (tf.tensor(a) for a in inputs)
    return lambda: (prog(A, B).numpy,)


# Order is the table's order. Peers: add a setup_<name> above and list it here.
IMPLS = {
    "ember": setup_ember,
    "numpy": setup_numpy,
    "torch": setup_torch,
    "numba": setup_numba,
    "jax": setup_jax,
    "taichi": setup_taichi,
    "warp": setup_warp,
    "tensorfrost": setup_tensorfrost,
}


# GPU setups (bench/gpu.py): setup(inputs, opts) -> (step, fetch), inputs uploaded once; see
# bench/gpu_common.py. Every peer computes in full FP32 (no TF32), as the reference does.

def gpu_ember(inputs, opts):
    """Ember: `a @ b` under @em.compile on opts["backend"]."""
    em = ember_on(opts)
    mm = _ember_matmul(em)
    A, B = ember_upload(em, *inputs)
    return ember_steps(lambda: mm(A, B))


def _gpu_torch(inputs, opts, compiled):
    """The PyTorch GPU setups (GPU_IMPLS torch and torch_compile). PyTorch eager: torch.matmul (cuBLAS SGEMM).
    Compiled: torch.compile of `a @ b` (default mode: Inductor calls cuBLAS for a lone matmul)."""
    torch, dev, sync = torch_on(opts)
    A, B = (torch.from_numpy(a).to(dev) for a in inputs)
    fn = torch.matmul
    fn = torch_compile(torch, lambda a, b: a @ b) if compiled else fn
    return torch_steps(torch, lambda: fn(A, B), sync)


def gpu_jax(inputs, opts):
    """JAX: jnp.matmul under jax.jit, precision HIGHEST (JAX's GPU default would use TF32)."""
    jax, dev = jax_on(opts)
    mm = jax.jit(lambda a, b: jax.numpy.matmul(a, b, precision=jax.lax.Precision.HIGHEST))
    A, B = (jax.device_put(a, dev) for a in inputs)
    return jax_steps(jax, lambda: mm(A, B))


def gpu_cupy(inputs, opts):
    """CuPy: cp.matmul (cuBLAS SGEMM; CuPy uses no TF32 unless CUPY_TF32=1)."""
    xp, sync = xp_on(opts)
    A, B = (xp.asarray(a) for a in inputs)
    return xp_steps(xp, lambda: xp.matmul(A, B), sync)


# jax last: its memory pool does not shrink (bench/gpu.py caps it).
GPU_IMPLS = {"ember": gpu_ember, "torch": functools.partial(_gpu_torch, compiled=False),
             "torch_compile": functools.partial(_gpu_torch, compiled=True),
             "cupy": gpu_cupy, "jax": gpu_jax}
