"""Spectral-element interpolation (GPCE'17 Eq. 5): v[e] = (A x A x A) u[e] for E elements of
N^3 values, three contractions per element written as naive loop nests
(examples/spectral_interp.py). `ember` runs them as written (the contracted loop innermost, strided
reads); `ember_sched` runs them with the paper's loop interchanges applied by em.schedule (checked by
isl), so the innermost loops read contiguous rows. The reference is NumPy's float64 einsum.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import numpy as np

from common import import_ember, import_example

NAME = "spectral_interp"
DEFAULT_N = 16  # mesh elements (E); the points per element edge are fixed below
ORDER = 33       # N: values per element edge (the paper's data size)


def make_inputs(n, seed=0):
    """Seeded interpolation matrix A [ORDER, ORDER] and element data u [n, ORDER, ORDER, ORDER]."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1.0, 1.0, (ORDER, ORDER)).astype(np.float32)
    u = rng.uniform(-1.0, 1.0, (n, ORDER, ORDER, ORDER)).astype(np.float32)
    return A, u


def reference(inputs):
    """einsum in float64, rounded to float32."""
    A, u = (x.astype(np.float64) for x in inputs)
    return (np.einsum("kn,jm,il,elmn->eijk", A, A, A, u, optimize=True).astype(np.float32),)


def _setup(prog_name):
    def setup(inputs, opts):
        em = import_ember()
        em.init(backend=opts.get("backend", "cpu"))
        prog = getattr(import_example("spectral_interp"), prog_name)
        A, u = inputs
        return lambda: (prog(A, u).numpy(),)
    setup.__doc__ = f"Ember: examples/spectral_interp.py's {prog_name}."
    return setup


def setup_numpy(inputs, opts):
    """NumPy: three tensordot contractions in float32 (BLAS)."""
    A, u = inputs

    def run():
        t1 = np.einsum("il,elmn->eimn", A, u, optimize=True)
        t2 = np.einsum("jm,eimn->eijn", A, t1, optimize=True)
        return (np.einsum("kn,eijn->eijk", A, t2, optimize=True),)
    return run


IMPLS = {
    "ember": _setup("interp"),
    "ember_sched": _setup("interp_interchanged"),
    "numpy": setup_numpy,
}
