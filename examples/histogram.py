"""Histogram with em.atomic_add: one explicit kernel, one thread per sample, atomic bin counts.

Samples outside [lo, lo + nbins / scale) are dropped. The bin of v is floor((v - lo) * scale),
computed in float32 exactly as NumPy does it, so the counts match np.bincount exactly.

Usage: /usr/bin/python3 examples/histogram.py [--n 1000000] [--bins 32] [--backend cpu]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def histogram(V: em.f32["N"], lo: em.f32, scale: em.f32, nbins: em.i32):  # noqa: F821
    """Counts (i32[nbins]) of the samples V in bins of width 1 / scale starting at lo."""
    H = em.zeros((nbins,), em.i32)
    with em.kernel(V.shape[0]) as i:
        b = em.i32(em.floor((V[i] - lo) * scale))
        with em.if_((b >= 0) & (b < nbins)):
            em.atomic_add(H[b], 1)
    return H


def histogram_numpy(V, lo, scale, nbins):
    """The same histogram with NumPy (float32 bin arithmetic, then np.bincount)."""
    b = np.floor((V - np.float32(lo)) * np.float32(scale)).astype(np.int64)
    return np.bincount(b[(b >= 0) & (b < nbins)], minlength=nbins).astype(np.int32)


def main():
    """Histograms normally distributed samples and draws the counts as a text bar chart."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--bins", type=int, default=32)
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    V = np.random.default_rng(0).normal(0.0, 1.0, a.n).astype(np.float32)
    lo, hi = -4.0, 4.0
    scale = a.bins / (hi - lo)
    H = histogram(V, lo, scale, a.bins).numpy()  # the first call compiles
    t0 = time.perf_counter()
    H = histogram(V, lo, scale, a.bins).numpy()
    ms = (time.perf_counter() - t0) * 1e3
    same = np.array_equal(H, histogram_numpy(V, lo, scale, a.bins))
    width = (hi - lo) / a.bins
    for k, c in enumerate(H):
        print(f"{lo + k * width:+6.2f} {c:8d} {'#' * int(60 * c / H.max())}")
    print(f"{a.n} samples, {a.bins} bins, {histogram.kernel_count} kernel(s), {ms:.2f} ms; "
          f"equal to np.bincount: {same}")


if __name__ == "__main__":
    main()
