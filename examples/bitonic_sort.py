"""Bitonic sort of 2^k integer keys in place, as one explicit kernel of n/2 threads with two
stage loops. Each step compares and swaps the pairs (i, i + dist); the step reads what other
threads wrote in the previous one, so Ember runs the stage loops grid-synchronously: it hoists
them to the host around one compare-exchange dispatch per step (log2(n) (log2(n) + 1) / 2 steps).

Usage: /usr/bin/python3 examples/bitonic_sort.py [--n 1048576]   (n a power of two)
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def bitonic_sort(keys: em.i32["N"]):  # noqa: F821
    """Sorts keys (length a power of two) ascending in place and returns them."""
    n = keys.shape[0]
    stages = em.i32(em.round(em.log2(em.f32(n))))  # log2(n), exact for powers of two
    with em.kernel(n // 2) as t:
        with em.loop(stages) as s:  # merge sorted runs of 2^s into runs of 2^(s+1)
            with em.loop(s, -1, -1) as d:  # compare at distance 2^d
                dist = 1 << d
                i = (t // dist) * (2 * dist) + t % dist
                j = i + dist
                ascending = ((i >> (s + 1)) & 1) == 0
                a, b = keys[i], keys[j]
                swap = (a > b) == ascending
                keys[i] = em.where(swap, b, a)
                keys[j] = em.where(swap, a, b)
    return keys


def main():
    """Sorts random keys, checks against np.sort and times both."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    if a.n < 2 or a.n & (a.n - 1):
        p.error("--n must be a power of two >= 2")
    em.init(backend=a.backend)

    keys = np.random.default_rng(0).integers(-2 ** 31, 2 ** 31, a.n).astype(np.int32)
    t0 = time.perf_counter()
    ref = np.sort(keys)
    np_ms = (time.perf_counter() - t0) * 1e3
    bitonic_sort(keys[:2].copy())  # compiles
    t0 = time.perf_counter()
    out = bitonic_sort(keys.copy()).numpy()
    ms = (time.perf_counter() - t0) * 1e3
    print(f"bitonic sort of {a.n} keys: ember {ms:.2f} ms, {bitonic_sort.kernel_count} kernel(s); "
          f"numpy {np_ms:.2f} ms; equal to np.sort: {bool(np.array_equal(out, ref))}")


if __name__ == "__main__":
    main()
