"""Spectral-element interpolation (GPCE'17, Rink et al., Eq. 5), v_eijk = sum_lmn A_kn A_jm A_il u_elmn,
evaluated as three contractions per mesh element e, written as the naive loop nests one would write
first: each output element accumulates over the contracted index in the innermost loop. That loop
strides through u and t1 by N^2 and N elements. The paper's fix is a loop interchange that moves the
contracted loop outward, so the innermost loop runs along the last, contiguous axis; here it is an
em.schedule that isl checks before it is applied (interchange(n1, l1), interchange(m1, l1) and
interchange(n2, m2), as the paper's interchange(i4, i3), interchange(i4, i2), interchange(j2, j1)).

Usage: /usr/bin/python3 examples/spectral_interp.py [--elements 16] [--n 33] [--backend cpu]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def interp(A: em.f32["N", "N"], u: em.f32["E", "N", "N", "N"]):  # noqa: F821
    """v[e] = (A x A x A) u[e] by sum factorization; one thread per element e and first index i."""
    E, N = u.shape[0], A.shape[0]
    t1, t2, v = em.zeros(u.shape), em.zeros(u.shape), em.zeros(u.shape)
    with em.kernel((E, N)) as (e, i):
        # t1[e, i, m, n] = sum_l A[i, l] u[e, l, m, n]
        with em.loop(N) as m1:
            with em.loop(N) as n1:
                with em.loop(N) as l1:
                    t1[e, i, m1, n1] = t1[e, i, m1, n1] + A[i, l1] * u[e, l1, m1, n1]
        # t2[e, i, j, n] = sum_m A[j, m] t1[e, i, m, n]
        with em.loop(N) as j2:
            with em.loop(N) as n2:
                with em.loop(N) as m2:
                    t2[e, i, j2, n2] = t2[e, i, j2, n2] + A[j2, m2] * t1[e, i, m2, n2]
        # v[e, i, j, k] = sum_n A[k, n] t2[e, i, j, n]
        with em.loop(N) as j3:
            with em.loop(N) as k3:
                with em.loop(N) as n3:
                    v[e, i, j3, k3] = v[e, i, j3, k3] + A[k3, n3] * t2[e, i, j3, n3]
    return v


# The paper's interchanges: the contracted loop moves outward until the innermost loop runs along
# the contiguous last axis (each is checked: the accumulations into t1 and t2 have distance 0 on
# the loops that swap, so no dependence turns around).
interp_interchanged = interp.schedule(
    em.schedule.interchange("n1", "l1"), em.schedule.interchange("m1", "l1"),
    em.schedule.interchange("n2", "m2"))


def interp_numpy(A, u):
    """The NumPy reference (float64 einsum, rounded to float32)."""
    A64 = A.astype(np.float64)
    return np.einsum("kn,jm,il,elmn->eijk", A64, A64, A64, u.astype(np.float64), optimize=True).astype(np.float32)


def make_inputs(elements, n, seed=0):
    """A random interpolation matrix and element data (never zeros)."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
    u = rng.uniform(-1.0, 1.0, (elements, n, n, n)).astype(np.float32)
    return A, u


def main():
    """Checks both loop orders against NumPy and times them."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--elements", type=int, default=16)
    p.add_argument("--n", type=int, default=33)  # the paper's data size
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)
    A, u = make_inputs(a.elements, a.n)
    ref = interp_numpy(A, u)
    for prog in (interp, interp_interchanged):
        out = prog(A, u).numpy()  # compiles
        err = float(np.max(np.abs(out - ref)))
        t0 = time.perf_counter()
        for _ in range(5):
            prog(A, u).numpy()
        ms = (time.perf_counter() - t0) / 5 * 1e3
        print(f"{prog.name} {'(interchanged)' if prog is interp_interchanged else '(as written)'}: "
              f"{ms:.2f} ms, max |error| {err:.2e}")


if __name__ == "__main__":
    main()
