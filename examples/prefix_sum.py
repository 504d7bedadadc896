"""Inclusive prefix sum (np.cumsum) of a large array with em.prefix_sum, which Ember lowers to a
blocked parallel scan: per-block sums, a scan of the block sums, then each block rescanned from
its offset. Integer sums are exact (i32 wraps around as np.cumsum with dtype=int32 does).

Usage: /usr/bin/python3 examples/prefix_sum.py [--n 16777216] [--dtype i32|f32]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def cumsum_i32(X: em.i32["N"]):  # noqa: F821
    """Inclusive scan of integers."""
    return em.prefix_sum(X, axis=0)


@em.compile
def cumsum_f32(X: em.f32["N"]):  # noqa: F821
    """Inclusive scan of floats (the blocked order of additions differs from np.cumsum's)."""
    return em.prefix_sum(X, axis=0)


def main():
    """Times Ember against np.cumsum on random data and checks the result."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 24)
    p.add_argument("--dtype", choices=("i32", "f32"), default="i32")
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    rng = np.random.default_rng(0)
    if a.dtype == "i32":
        X, prog = rng.integers(-1000, 1000, a.n).astype(np.int32), cumsum_i32
    else:
        X, prog = rng.uniform(0, 1, a.n).astype(np.float32), cumsum_f32
    t0 = time.perf_counter()
    ref = np.cumsum(X, dtype=X.dtype)
    np_ms = (time.perf_counter() - t0) * 1e3
    prog(X[:1024])  # compiles
    t0 = time.perf_counter()
    Y = prog(X).numpy()
    ms = (time.perf_counter() - t0) * 1e3
    if a.dtype == "i32":
        check = f"equal to np.cumsum: {bool(np.array_equal(Y, ref))}"
    else:
        check = f"max relative error vs float64 cumsum {np.max(np.abs(Y - np.cumsum(X, dtype=np.float64)) / np.arange(1, a.n + 1)):.1e} per element"
    print(f"prefix_sum of {a.n} {a.dtype}: ember {ms:.2f} ms, {prog.kernel_count} kernel(s); "
          f"numpy {np_ms:.2f} ms; {check}")


if __name__ == "__main__":
    main()
