"""Dense float32 matrix product C = A @ B of two N x N matrices.

Every implementation is a setup(inputs, opts) -> run function registered in IMPLS; run()
computes C and returns it as a NumPy array (timing includes getting it back to the host).
setup raises common.Skip when the implementation cannot run here. Sum orders differ between
implementations; the reference is computed in float64.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import os

import numpy as np

from common import import_ember, require

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


def setup_ember(inputs, opts):
    """Ember: `a @ b` under @em.compile (one kernel of 4 x 16 register tiles, tile_threads)."""
    em = import_ember()
    em.init(backend=opts.get("backend", "cpu"))

    @em.compile
    def mm(a: em.f32["N", "K"], b: em.f32["K", "M"]):  # noqa: F821 ("N" is a symbol)
        return a @ b

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


# Order is the table's order. Peers: add a setup_<name> above and list it here.
IMPLS = {
    "ember": setup_ember,
    "numpy": setup_numpy,
    "torch": setup_torch,
}
