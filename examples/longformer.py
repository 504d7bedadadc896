"""Longformer sliding-window attention (the FreeTensor paper, Fig. 1, 5 and 8): token j of each
head attends only to the keys j - w .. j + w. For every (head, token): the dot products of its
query with the 2w + 1 keys of its window, a softmax over the window, then the attention-weighted
sum of the window's values. Nothing is padded or copied 2w + 1 times (the operator version's
as_strided Q); keys and values are read through index arithmetic.

Out-of-range window positions (j + k outside [0, L)) are handled as in the paper's program
(Fig. 8 and its evaluated main.py): their score is 0, which still takes part in the softmax,
and they add nothing to the weighted sum. As in that program, the softmax weights are scaled by
1 / sqrt(D) after normalization.

Two versions of the same computation:
  longformer         the paper's free-form program (Fig. 8): one explicit kernel, one thread per
                     (head, token), loops over the window and the features; one kernel.
  longformer_tensor  NumPy-style tensor code (dot over a 4-D index space, softmax along the
                     window axis, weighted sum); Ember fuses it into three kernels.

Usage: /usr/bin/python3 examples/longformer.py [--n 4096] [--heads 4] [--feats 64] [--w 32]
"""
import argparse
import math
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def longformer(Q: em.f32["H", "L", "D"], K: em.f32["H", "L", "D"], V: em.f32["H", "L", "D"], w: em.i32):  # noqa: F821
    """Fig. 8 of the paper: per (head i, token j), dot[k] = Q[i, j] . K[i, j + k] (0 outside the
    sequence), softmax over k, Y[i, j] = sum over in-range k of attn[k] * V[i, j + k]."""
    H, L, D = Q.shape
    dot = em.buffer((H, L, 2 * w + 1), em.f32)  # each thread owns its row dot[i, j, :]
    Y = em.buffer(Q.shape, em.f32)
    with em.kernel((H, L)) as (i, j):
        with em.loop(-w, w + 1) as k:
            acc = em.var(0.0)
            with em.if_((j + k >= 0) & (j + k < L)):
                with em.loop(D) as p:
                    acc.val += Q[i, j, p] * K[i, j + k, p]
            dot[i, j, k + w] = acc
        mx = em.var(-float("inf"))
        with em.loop(2 * w + 1) as k:
            mx.val = em.max(mx, dot[i, j, k])
        total = em.var(0.0)
        with em.loop(2 * w + 1) as k:
            total.val += em.exp(dot[i, j, k] - mx)
        scale = 1.0 / (total * em.sqrt(em.f32(D)))
        with em.loop(D) as p:
            Y[i, j, p] = 0.0
        with em.loop(-w, w + 1) as k:
            with em.if_((j + k >= 0) & (j + k < L)):
                attn = em.exp(dot[i, j, k + w] - mx) * scale
                with em.loop(D) as p:
                    Y[i, j, p] = Y[i, j, p] + attn * V[i, j + k, p]
    return Y


@em.compile
def longformer_tensor(Q: em.f32["H", "L", "D"], K: em.f32["H", "L", "D"], V: em.f32["H", "L", "D"],  # noqa: F821
                      w: em.i32):
    """The same as tensor code: h, j, k, p index a [H, L, 2w+1, D] space, never materialized."""
    H, L, D = Q.shape
    h, j, k, p = em.indices((H, L, 2 * w + 1, D))
    pos = j + k - w  # the key position (clamped by the gathers, masked below)
    dot = em.sum(Q[h, j, p] * K[h, pos, p], axis=3)
    _, jj, kk = em.indices((H, L, 2 * w + 1))
    inside = (jj + kk - w >= 0) & (jj + kk - w < L)
    dot = em.where(inside, dot, 0.0)
    e = em.exp(dot - em.max(dot, axis=2, keepdims=True))
    attn = em.where(inside, e / (em.sum(e, axis=2, keepdims=True) * em.sqrt(em.f32(D))), 0.0)
    return em.sum(attn[:, :, :, None] * V[h, pos, p], axis=2)


def longformer_numpy(Q, K, V, w):
    """NumPy reference (float64): the window as a padded sliding view, the paper's Fig. 1(b)."""
    H, L, D = Q.shape
    from numpy.lib.stride_tricks import sliding_window_view
    pad = ((0, 0), (w, w), (0, 0))
    Kw = sliding_window_view(np.pad(K.astype(np.float64), pad), 2 * w + 1, axis=1)  # H L D 2w+1
    Vw = sliding_window_view(np.pad(V.astype(np.float64), pad), 2 * w + 1, axis=1)
    inside = (np.arange(L)[:, None] + np.arange(-w, w + 1)[None, :] >= 0) & \
             (np.arange(L)[:, None] + np.arange(-w, w + 1)[None, :] < L)  # L x 2w+1
    dot = np.einsum("hjp,hjpk->hjk", Q.astype(np.float64), Kw)  # 0 where padded
    e = np.exp(dot - dot.max(axis=2, keepdims=True))
    attn = e / e.sum(axis=2, keepdims=True) / math.sqrt(D) * inside
    return np.einsum("hjk,hjpk->hjp", attn, Vw).astype(np.float32)


def main():
    """Times both Ember versions against NumPy on random inputs and checks the results."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096, help="sequence length")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--feats", type=int, default=64)
    p.add_argument("--w", type=int, default=32, help="window half-width")
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    rng = np.random.default_rng(0)
    Q, K, V = (rng.uniform(-1, 1, (a.heads, a.n, a.feats)).astype(np.float32) for _ in range(3))
    t0 = time.perf_counter()
    ref = longformer_numpy(Q, K, V, a.w)
    np_ms = (time.perf_counter() - t0) * 1e3
    print(f"longformer: {a.heads} heads, {a.n} tokens, {a.feats} features, window +-{a.w}: numpy {np_ms:.2f} ms")
    for prog in (longformer, longformer_tensor):
        prog(Q, K, V, a.w)  # compiles
        t0 = time.perf_counter()
        Y = prog(Q, K, V, a.w).numpy()
        ms = (time.perf_counter() - t0) * 1e3
        err = float(np.max(np.abs(Y - ref)) / np.max(np.abs(ref)))
        print(f"  {prog.name}: {ms:.2f} ms, {prog.kernel_count} kernel(s); max error vs NumPy {err:.1e} "
              "(relative to max |Y|)")


if __name__ == "__main__":
    main()
