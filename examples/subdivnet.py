"""SubdivNet mesh convolution (the FreeTensor paper's motivating example, Fig. 2 and 3): every
face i of a triangle mesh has three adjacent faces adj[i, 0..2]; the "circular difference"
sums |e[adj[i, p]] - e[adj[i, (p + 1) % 3]]| over p, gathering the neighbours' feature vectors
through the adjacency tensor instead of materializing the n_faces x 3 x feats tensor that the
operator version (index_select, cat, sub, abs, sum) builds.

circular_difference is that red box alone (one kernel); mesh_conv is the whole layer the paper
evaluates (its main.py): y = x @ W0 + sum_p x[adj] @ W1 + circular difference @ W2
+ sum_p |x[adj] - x[i]| @ W3.

Usage: /usr/bin/python3 examples/subdivnet.py [--n 256] [--feats 13] [--out 64]
(the mesh is a triangulated n x n torus: 2 n^2 faces)
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)


@em.compile
def circular_difference(E: em.f32["N", "F"], adj: em.i32["N", 3]):  # noqa: F821
    """y[i] = sum over p of |E[adj[i, p]] - E[adj[i, (p + 1) % 3]]| (per feature)."""
    n, f = E.shape
    i, p, c = em.indices((n, 3, f))
    return em.sum(em.abs(E[adj[i, p], c] - E[adj[i, (p + 1) % 3], c]), axis=1)


@em.compile
def mesh_conv(X: em.f32["N", "F"], adj: em.i32["N", 3], W0: em.f32["F", "G"], W1: em.f32["F", "G"],  # noqa: F821
              W2: em.f32["F", "G"], W3: em.f32["F", "G"]):  # noqa: F821
    """One SubdivNet convolution layer (the program of the paper's evaluation)."""
    n, f = X.shape
    i, p, c = em.indices((n, 3, f))
    nb = X[adj[i, p], c]  # the three neighbours' features, [N, 3, F], never stored
    s1 = em.sum(nb, axis=1)
    s2 = em.sum(em.abs(nb - X[adj[i, (p + 1) % 3], c]), axis=1)
    s3 = em.sum(em.abs(nb - X[i, c]), axis=1)
    return X @ W0 + s1 @ W1 + s2 @ W2 + s3 @ W3


def circular_difference_numpy(E, adj):
    """The operator version of the paper's Fig. 2(c): index_select, reshape, cat, sub, abs, sum."""
    adj_feat = E[adj.reshape(-1)].reshape(adj.shape[0], 3, E.shape[1])
    reordered = np.concatenate([adj_feat[:, 1:], adj_feat[:, :1]], axis=1)
    return np.abs(adj_feat - reordered).sum(axis=1)


def mesh_conv_numpy(X, adj, W0, W1, W2, W3):
    """NumPy reference of mesh_conv."""
    nb = X[adj]
    s1 = nb.sum(axis=1)
    s2 = circular_difference_numpy(X, adj)
    s3 = np.abs(nb - X[:, None, :]).sum(axis=1)
    return X @ W0 + s1 @ W1 + s2 @ W2 + s3 @ W3


def torus_adjacency(n):
    """Face adjacency of a closed triangle mesh: an n x n grid on a torus, each quad split in two
    (2 n^2 faces). Row i lists the three faces that share an edge with face i, in the order of
    face i's edges (v0 v1, v1 v2, v2 v0)."""
    v = lambda a, b: (a % n) * n + (b % n)  # noqa: E731
    faces = []
    for a in range(n):
        for b in range(n):
            faces.append((v(a, b), v(a + 1, b), v(a + 1, b + 1)))
            faces.append((v(a, b), v(a + 1, b + 1), v(a, b + 1)))
    owner = {}
    for f, (x, y, z) in enumerate(faces):
        for e in ((x, y), (y, z), (z, x)):
            owner.setdefault(frozenset(e), []).append(f)
    adj = np.empty((len(faces), 3), np.int32)
    for f, (x, y, z) in enumerate(faces):
        for k, e in enumerate(((x, y), (y, z), (z, x))):
            a, b = owner[frozenset(e)]
            adj[f, k] = b if a == f else a
    return adj


def main():
    """Times Ember against NumPy on a torus mesh with random features and checks the results."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=256, help="torus grid size (2 n^2 faces)")
    p.add_argument("--feats", type=int, default=13, help="input features per face (the paper uses 13)")
    p.add_argument("--out", type=int, default=64, help="output features per face (the paper uses 64)")
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    rng = np.random.default_rng(0)
    adj = torus_adjacency(a.n)
    X = rng.uniform(-1, 1, (adj.shape[0], a.feats)).astype(np.float32)
    Ws = [rng.uniform(-1, 1, (a.feats, a.out)).astype(np.float32) / a.feats for _ in range(4)]
    print(f"mesh of {adj.shape[0]} faces, {a.feats} -> {a.out} features")
    for prog, args, ref_fn in ((circular_difference, (X, adj), circular_difference_numpy),
                               (mesh_conv, (X, adj, *Ws), mesh_conv_numpy)):
        t0 = time.perf_counter()
        ref = ref_fn(*args)
        np_ms = (time.perf_counter() - t0) * 1e3
        prog(*args)  # compiles
        t0 = time.perf_counter()
        Y = prog(*args).numpy()
        ms = (time.perf_counter() - t0) * 1e3
        err = float(np.max(np.abs(Y - ref)) / np.max(np.abs(ref)))
        print(f"  {prog.name}: ember {ms:.2f} ms, {prog.kernel_count} kernel(s); numpy {np_ms:.2f} ms; "
              f"max error vs NumPy {err:.1e} (relative to max |y|)")


if __name__ == "__main__":
    main()
