"""2D convolution (valid padding, stride 1, NCHW) written as ONE sum over the whole index space
(batch, out-channel, y, x, in-channel, ky, kx): the broadcast product X[b, c, y+ky, x+kx] *
K[o, c, ky, kx] is summed over its last three axes. Ember fuses the product into the reduction
loops, so the 7-D tensor is never stored and the whole convolution is one kernel.

Usage: /usr/bin/python3 examples/conv2d.py [--n 8] [--channels 16] [--out 32] [--size 64] [--k 3]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def conv2d(X: em.f32["B", "C", "H", "W"], K: em.f32["O", "C", "KH", "KW"]):  # noqa: F821
    """Y[b, o, y, x] = sum over c, ky, kx of X[b, c, y + ky, x + kx] * K[o, c, ky, kx]."""
    B, C, H, W = X.shape
    O, _, KH, KW = K.shape
    b, o, y, x, c, ky, kx = em.indices((B, O, H - KH + 1, W - KW + 1, C, KH, KW))
    return em.sum(X[b, c, y + ky, x + kx] * K[o, c, ky, kx], axis=(4, 5, 6))


def conv2d_numpy(X, K):
    """The NumPy reference: sliding windows contracted with the filters (float64 accumulation)."""
    from numpy.lib.stride_tricks import sliding_window_view
    win = sliding_window_view(X.astype(np.float64), K.shape[2:], axis=(2, 3))  # B C OH OW KH KW
    return np.einsum("bcyxij,ocij->boyx", win, K.astype(np.float64)).astype(np.float32)


def main():
    """Times Ember against NumPy on random images and filters and checks the result."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=8, help="batch size")
    p.add_argument("--channels", type=int, default=16, help="input channels")
    p.add_argument("--out", type=int, default=32, help="output channels")
    p.add_argument("--size", type=int, default=64, help="image height and width")
    p.add_argument("--k", type=int, default=3, help="filter height and width")
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (a.n, a.channels, a.size, a.size)).astype(np.float32)
    K = rng.uniform(-1, 1, (a.out, a.channels, a.k, a.k)).astype(np.float32)
    t0 = time.perf_counter()
    ref = conv2d_numpy(X, K)
    np_ms = (time.perf_counter() - t0) * 1e3
    conv2d(X, K)  # compiles
    t0 = time.perf_counter()
    Y = conv2d(X, K).numpy()
    ms = (time.perf_counter() - t0) * 1e3
    err = float(np.max(np.abs(Y - ref)) / np.max(np.abs(ref)))
    print(f"conv2d {X.shape} * {K.shape} -> {Y.shape}: ember {ms:.2f} ms, {conv2d.kernel_count} kernel(s); "
          f"numpy {np_ms:.2f} ms; max error vs NumPy {err:.1e} (relative to max |Y|)")


if __name__ == "__main__":
    main()
