"""Row softmax, numerically stable (subtract the row maximum), two ways: NumPy-style tensor code
(softmax; one kernel: each row's thread takes the max, the sum, then writes the row) and an
explicit kernel with one thread per row and three em.loop passes over it (softmax_rows).

Usage: /usr/bin/python3 examples/softmax.py [--rows 4096] [--cols 1024] [--backend cpu]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def softmax(X: em.f32["N", "M"]):  # noqa: F821
    """exp(X - max) / sum(exp(X - max)) along each row."""
    e = em.exp(X - em.max(X, axis=1, keepdims=True))
    return e / em.sum(e, axis=1, keepdims=True)


@em.compile
def softmax_rows(X: em.f32["N", "M"]):  # noqa: F821
    """The same with one explicit kernel: each thread owns a row."""
    n, m = X.shape
    Y = em.buffer(X.shape, em.f32)
    with em.kernel(n) as i:
        mx, total = em.var(-float("inf")), em.var(0.0)
        with em.loop(m) as j:
            mx.val = em.max(mx, X[i, j])
        with em.loop(m) as j:
            total.val += em.exp(X[i, j] - mx)
        with em.loop(m) as j:
            Y[i, j] = em.exp(X[i, j] - mx) / total
    return Y


def softmax_numpy(X):
    """The NumPy reference."""
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main():
    """Times Ember against NumPy on random logits and checks the result."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    X = np.random.default_rng(0).normal(0.0, 4.0, (a.rows, a.cols)).astype(np.float32)
    t0 = time.perf_counter()
    ref = softmax_numpy(X)
    np_ms = (time.perf_counter() - t0) * 1e3
    print(f"softmax of {a.rows}x{a.cols}: numpy {np_ms:.2f} ms")
    for prog in (softmax, softmax_rows):
        prog(X)  # compiles
        t0 = time.perf_counter()
        Y = prog(X).numpy()
        ms = (time.perf_counter() - t0) * 1e3
        err = float(np.max(np.abs(Y - ref) / np.maximum(ref, 1e-30)))
        print(f"  {prog.name}: {ms:.2f} ms, {prog.kernel_count} kernel(s); rows sum to 1 within "
              f"{np.max(np.abs(Y.sum(1) - 1)):.1e}; max relative error vs NumPy {err:.1e}")


if __name__ == "__main__":
    main()
