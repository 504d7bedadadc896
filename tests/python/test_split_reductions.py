"""split_reductions (core/passes/split_reductions.h): on the GPU backends a reduction into few
outputs (a full sum, column sums of a tall matrix, an energy) runs over workgroups of 128 threads
with a tree in shared memory and a second kernel combining the partials in order, instead of a
loop in one thread. Each program here ran into llvmpipe's and lavapipe's 65 535-iteration loop
limit before (a BackendError), and ran in one thread on a real GPU. Checked against NumPy in
float64 on every backend, through the interpreter after every pass with the pass splitting every
loop it can, and for determinism (the same bits on every call)."""
import numpy as np
import pytest

import ember as em

GPU = ("vulkan", "vulkan-hlsl", "opengl", "cuda")


def stages_agree(prog, args, want, rtol=1e-5):
    """The interpreter gives `want` as traced and after every pass, as the GPU backends run the
    pipeline, with every loop split (min trips 1)."""
    stages = prog._interpret_stages(*args, split_reductions=1)
    names = [s for s, _ in stages]
    assert "split_reductions" in names, names
    for stage, outs in stages:
        assert not stage.startswith("error"), f"{stage}: {outs}"
        for k, w in enumerate(want):
            np.testing.assert_allclose(outs[k], w, rtol=rtol, atol=1e-6, err_msg=f"stage {stage}, output {k}")


def split_kernels(prog):
    """The kernels of the final IR that run in workgroups (the stages split_reductions made)."""
    return sum(1 for line in prog.ir().splitlines() if "kernel #" in line and "group" in line)


def test_a_ten_million_element_sum_and_max(backend, rng):
    @em.compile
    def f(x: em.f32["N"]):  # noqa: F821
        return em.sum(x * x), em.max(x), em.min(x)

    x = rng.standard_normal(10_000_000).astype(np.float32)
    s, mx, mn = f(x)
    want = np.sum(x.astype(np.float64) ** 2)
    assert abs(float(s.numpy()) - want) <= 1e-5 * want
    assert float(mx.numpy()) == x.max() and float(mn.numpy()) == x.min()
    again = f(x)[0].numpy()
    assert again.tobytes() == s.numpy().tobytes()  # the same bits every call
    if backend in GPU:
        assert split_kernels(f) == 3, f.ir()


def test_column_sums_of_a_tall_matrix(backend, rng):
    @em.compile
    def f(a: em.f32["M", 4], b: em.i32["M", 2]):  # noqa: F821
        return em.sum(a, axis=0), em.mean(a * a, axis=0), em.max(b, axis=0), em.sum(b, axis=0)

    a = rng.standard_normal((1_000_000, 4)).astype(np.float32)
    b = rng.integers(-1000, 1000, (1_000_000, 2)).astype(np.int32)
    s, m, mx, si = f(a, b)
    np.testing.assert_allclose(s.numpy(), a.astype(np.float64).sum(axis=0), rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(m.numpy(), (a.astype(np.float64) ** 2).mean(axis=0), rtol=1e-4)
    assert mx.numpy().tolist() == b.max(axis=0).tolist()
    assert si.numpy().tolist() == b.sum(axis=0).tolist()


@pytest.fixture(scope="module")
def energy_case():
    """4096 random points and their energy and gradient in float64, computed once for every backend
    (in blocks of rows: the whole [N, N, 3] difference array would take 400 MB)."""
    X = np.random.default_rng(1234).standard_normal((4096, 3)).astype(np.float32)
    X64 = X.astype(np.float64)
    want_E, want_g = 0.0, np.empty_like(X64)
    for b in range(0, len(X64), 512):
        d = X64[b:b + 512, None, :] - X64[None, :, :]
        r = np.sqrt((d * d).sum(-1) + 1e-2)
        want_E += -0.5 * (1 / r).sum()
        want_g[b:b + 512] = (d / r[..., None] ** 3).sum(axis=1)
    return X, want_E, want_g


def test_the_energy_and_its_gradient_at_4096_points(backend, energy_case):
    """Issue 39's energy program: no [N, N] buffer, and on a GPU no one-thread loop over N^2."""
    @em.compile
    def energy(X: em.f32["N", 3]):  # noqa: F821
        d = X[:, None, :] - X[None, :, :]
        r = em.sqrt(em.sum(d * d, axis=-1) + 1e-2)
        E = -0.5 * em.sum(1.0 / r)
        return E, em.grad(E, X)

    X, want_E, want_g = energy_case
    E, g = energy(X)
    assert abs(float(E.numpy()) - want_E) <= 1e-5 * abs(want_E)
    np.testing.assert_allclose(g.numpy(), want_g, rtol=1e-3, atol=1e-3 * np.abs(want_g).max())


def test_a_loss_inside_a_host_loop(backend, rng):
    """A sum in every step of an em.loop (gradient descent on a least-squares loss): the split's
    buffers and kernels sit inside the loop."""
    @em.compile
    def fit(x: em.f32["N"], y: em.f32["N"], steps: em.i32):  # noqa: F821
        w = em.var(0.0)
        losses = em.zeros([8], em.f32)
        with em.loop(steps) as t:
            e = w * x - y
            losses[t] = em.mean(e * e)
            w.val = w - 0.5 * em.mean(2.0 * e * x)
        return w, losses

    x = rng.standard_normal(100_000).astype(np.float32)
    y = (3.0 * x + 0.1 * rng.standard_normal(100_000)).astype(np.float32)
    w, losses = fit(x, y, 8)
    wr, lr = 0.0, []
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    for _ in range(8):
        e = wr * x64 - y64
        lr.append(np.mean(e * e))
        wr = wr - 0.5 * np.mean(2 * e * x64)
    assert abs(float(w.numpy()) - wr) <= 1e-4 * abs(wr)
    np.testing.assert_allclose(losses.numpy(), lr, rtol=1e-4)


@pytest.mark.parametrize("n", [1, 127, 128, 129, 5000])
def test_every_size_through_the_interpreter(rng, n):
    """Trip counts around a workgroup (128) and none at all, every reduction kind the pass takes,
    a multi-axis sum (nested loops), a strided and a reversed loop, through the interpreter after
    every pass with every loop split."""
    @em.compile
    def f(x: em.f32["N"], a: em.f32["N", 3], k: em.i32["N"]):  # noqa: F821
        out = [em.sum(x), em.prod(1.0 + 0.001 * x), em.max(x), em.min(x), em.sum(a), em.sum(a, axis=0),
               em.max(k), em.min(k), em.sum(k)]
        s = em.var(0.0)
        with em.loop(0, x.shape[0], 3) as i:
            s.val = s + x[i] * x[i]
        r = em.var(0.0)
        with em.loop(x.shape[0] - 1, -1, -2) as i:
            r.val = r - x[i]
        return (*out, s, r)

    x = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal((n, 3)).astype(np.float32)
    k = rng.integers(-50, 50, n).astype(np.int32)
    x64 = x.astype(np.float64)
    want = [x64.sum(), np.prod(1.0 + 0.001 * x64), x.max(), x.min(), a.astype(np.float64).sum(),
            a.astype(np.float64).sum(axis=0), k.max(), k.min(), k.sum(), (x64[::3] ** 2).sum(),
            -x64[::-2].sum()]
    stages_agree(f, [x, a, k], want, rtol=1e-4)


def test_an_empty_sum_and_a_sum_of_negative_zeros(backend):
    """No terms: the accumulator's start (-0.0 for a symbolic extent); every term -0.0: -0.0 (F10),
    also when the partials of many workgroups are combined."""
    @em.compile
    def f(x: em.f32["N"]):  # noqa: F821
        return em.bitcast(em.sum(x), em.u32)

    assert int(f(np.zeros(0, np.float32)).numpy()) == 0x80000000
    assert int(f(np.full(300_000, -0.0, np.float32)).numpy()) == 0x80000000
    z = np.full(300_000, -0.0, np.float32)
    z[123_457] = 0.0
    assert int(f(z).numpy()) == 0
