"""The conv2d, SubdivNet, Longformer, prefix-sum and bitonic-sort examples against NumPy on
random inputs, with the kernel counts they are meant to reach, and each run as a script."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import _BUILD
from test_examples import EXAMPLES, assert_close, example, rand


# conv2d ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("xs,ks", [((2, 3, 11, 13), (4, 3, 3, 5)),   # rectangular filter
                                   ((1, 5, 8, 8), (2, 5, 1, 1)),     # 1x1 convolution
                                   ((3, 2, 6, 7), (3, 2, 6, 7))])    # the filter covers the image
def test_conv2d(rng, xs, ks):
    c = example("conv2d")
    X, K = rand(rng, *xs), rand(rng, *ks)
    Y = c.conv2d(X, K).numpy()
    assert Y.shape == (xs[0], ks[0], xs[2] - ks[2] + 1, xs[3] - ks[3] + 1)
    assert_close(Y, c.conv2d_numpy(X, K), rtol=1e-4)
    assert c.conv2d.kernel_count == 1  # the 7-D product is fused into the reduction loops


# SubdivNet ------------------------------------------------------------------------------------------

def _random_adjacency(rng, n):
    """Three distinct neighbours per face, none the face itself."""
    adj = np.empty((n, 3), np.int32)
    for i in range(n):
        adj[i] = rng.choice(np.delete(np.arange(n), i), 3, replace=False)
    return adj


def test_subdivnet_circular_difference(rng):
    s = example("subdivnet")
    for adj in (_random_adjacency(rng, 500), s.torus_adjacency(9)):
        E = rand(rng, adj.shape[0], 13)
        got = s.circular_difference(E, adj).numpy()
        np.testing.assert_allclose(got, s.circular_difference_numpy(E, adj), rtol=1e-5, atol=1e-6)
    assert s.circular_difference.kernel_count == 1


def test_subdivnet_torus_adjacency_is_a_closed_mesh():
    adj = example("subdivnet").torus_adjacency(6)
    n = adj.shape[0]
    assert n == 72 and adj.min() >= 0 and adj.max() < n
    assert not np.any(adj == np.arange(n)[:, None])
    pairs = {(i, int(j)) for i in range(n) for j in adj[i]}
    assert all((j, i) in pairs for i, j in pairs)  # adjacency is symmetric


def test_subdivnet_mesh_conv(rng):
    s = example("subdivnet")
    adj = _random_adjacency(rng, 300)
    X = rand(rng, 300, 13)
    Ws = [rand(rng, 13, 24) for _ in range(4)]
    assert_close(s.mesh_conv(X, adj, *Ws).numpy(), s.mesh_conv_numpy(X, adj, *Ws), rtol=1e-4)
    # The three neighbour sums over [N, F], then the four matmuls over [N, G] (merge_kernels
    # merges a run of same-shaped kernels, not just a pair).
    assert s.mesh_conv.kernel_count == 2


# Longformer -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,w", [((2, 50, 16), 4), ((1, 37, 8), 1), ((3, 6, 5), 9)],
                         ids=["w4", "w1", "window_wider_than_sequence"])
def test_longformer(rng, shape, w):
    lf = example("longformer")
    Q, K, V = (rand(rng, *shape) for _ in range(3))
    want = lf.longformer_numpy(Q, K, V, w)
    for prog in (lf.longformer, lf.longformer_tensor):
        assert_close(prog(Q, K, V, w).numpy(), want, rtol=1e-4, what=prog.name)
    assert lf.longformer.kernel_count == 1  # the paper's Fig. 8 program: one kernel
    # dot; row max, row sum and the softmax weights (merge_kernels runs the weights of a row as a
    # loop in the row's thread); weighted sum (fuse_loads will not recompute the exp of the
    # weights once per feature).
    assert lf.longformer_tensor.kernel_count == 3  # issue bound: <= 3


def test_longformer_out_of_range_positions_score_zero():
    """With Q = 0 every score is 0; the softmax then spreads 1/(2w+1) over the whole window,
    out-of-range positions included (as in the paper), so the first token gets less weight."""
    lf = example("longformer")
    L, D, w = 10, 4, 2
    Q = np.zeros((1, L, D), np.float32)
    K = np.ones((1, L, D), np.float32)
    V = np.ones((1, L, D), np.float32)
    Y = lf.longformer(Q, K, V, w).numpy()
    inside = np.array([min(L - 1, j + w) - max(0, j - w) + 1 for j in range(L)], np.float32)
    np.testing.assert_allclose(Y[0, :, 0], inside / (2 * w + 1) / np.sqrt(D), rtol=1e-6)


# prefix_sum -----------------------------------------------------------------------------------------

def test_prefix_sum_large_exact(rng):
    ps = example("prefix_sum")
    for n in (1 << 22, 1, 1000, (1 << 20) + 7):
        X = rng.integers(-1000, 1000, n).astype(np.int32)
        X[X == 0] = 3
        np.testing.assert_array_equal(ps.cumsum_i32(X).numpy(), np.cumsum(X, dtype=np.int32), err_msg=f"n={n}")
    big = rng.integers(2 ** 28, 2 ** 30, 1 << 16).astype(np.int32)  # wraps around, as np.cumsum in int32
    np.testing.assert_array_equal(ps.cumsum_i32(big).numpy(), np.cumsum(big, dtype=np.int32))


def test_prefix_sum_f32(rng):
    ps = example("prefix_sum")
    X = rand(rng, 100000, lo=0.0, hi=1.0)
    np.testing.assert_allclose(ps.cumsum_f32(X).numpy(), np.cumsum(X, dtype=np.float64), rtol=1e-4)


# Bitonic sort ---------------------------------------------------------------------------------------

def test_bitonic_sort(rng):
    bs = example("bitonic_sort")
    for n in (2, 16, 1 << 10, 1 << 16):
        keys = rng.integers(-2 ** 31, 2 ** 31, n).astype(np.int32)
        np.testing.assert_array_equal(bs.bitonic_sort(keys.copy()).numpy(), np.sort(keys), err_msg=f"n={n}")
    dup = rng.integers(-3, 3, 1 << 12).astype(np.int32)  # many equal keys
    dup[:2] = [-2 ** 31, 2 ** 31 - 1]
    np.testing.assert_array_equal(bs.bitonic_sort(dup.copy()).numpy(), np.sort(dup))
    assert bs.bitonic_sort.kernel_count == 2  # the compare-exchange (host stage loops), the returned copy


def test_bitonic_sort_2_20(rng):
    bs = example("bitonic_sort")
    keys = rng.integers(-2 ** 31, 2 ** 31, 1 << 20).astype(np.int32)
    out = keys.copy()
    got = bs.bitonic_sort(out).numpy()
    want = np.sort(keys)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(out, want)  # sorted in place too


# Scripts --------------------------------------------------------------------------------------------

SCRIPTS = [
    ("conv2d", ["--n", "2", "--channels", "3", "--out", "4", "--size", "12"], "1 kernel(s)"),
    ("subdivnet", ["--n", "8", "--feats", "5", "--out", "7"], "circular_difference"),
    ("longformer", ["--n", "64", "--heads", "2", "--feats", "8", "--w", "3"], "longformer_tensor"),
    ("prefix_sum", ["--n", "5000"], "equal to np.cumsum: True"),
    ("bitonic_sort", ["--n", "4096"], "equal to np.sort: True"),
]


@pytest.mark.parametrize("name,args,marker", SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_example_runs_as_a_script(name, args, marker):
    env = dict(os.environ, EMBER_BUILD_DIR=str(_BUILD))
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), *args], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert marker in proc.stdout, proc.stdout
