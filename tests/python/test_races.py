"""Stores that would race (issue 39): a value that varies along an axis of the store's threads that no
index of the target varies along is refused with an ember.ShapeError naming the target, the axis and
the line (core/passes/check_races.h); the aligned forms run and match NumPy, on every backend. The
race programs of the fuzzer (tests/fuzz/gen_race.py) on their CI seeds, on every backend."""
import os
import sys

import numpy as np
import pytest

import ember as em
from conftest import _SELECTED, _unavailable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.fuzz import gen_race, run  # noqa: E402


def _rnn_ref(x, w):
    y = np.zeros((x.shape[0], 3))
    for t in range(x.shape[0]):
        y[t] = np.tanh(w.astype(float) @ x[t] + (y[t - 1] if t > 0 else 0.0))
    return y


def test_the_issue_rnn_step_is_refused(backend, rng):
    """The issue's stacked-RNN step: the [3] sum broadcasts along k against the [3, 3] term (NumPy's
    rule), so the value varies along k while y[t, i] does not: refused, with the fix named."""
    @em.compile
    def g(x: em.f32["T", 3], w: em.f32[3, 3]):
        T = x.shape[0]
        y = em.zeros([T, 3], em.f32)
        with em.loop(T) as t:
            i, k = em.indices([3, 3])
            y[t, i] = em.tanh(em.sum(w[i, k] * x[t, k], axis=1) + em.where(t > 0, y[t - 1, i], 0.0))  # LINE
        return y

    line = next(n for n, s in enumerate(open(__file__), 1) if s.rstrip().endswith("# LINE"))
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    with pytest.raises(em.ShapeError) as e:
        g(x, w)
    msg = str(e.value)
    assert "races" in msg and "axis 1 (of size 3)" in msg and "keepdims=True" in msg, msg
    assert f"test_races.py:{line}" in msg, msg
    assert isinstance(e.value, ValueError)  # ShapeError is also a ValueError


def test_the_issue_rnn_step_with_keepdims_is_right(backend, rng):
    """The same step with keepdims=True: the sum keeps its row axis, so it lines up with i."""
    @em.compile
    def g(x: em.f32["T", 3], w: em.f32[3, 3]):
        T = x.shape[0]
        y = em.zeros([T, 3], em.f32)
        with em.loop(T) as t:
            i, k = em.indices([3, 3])
            y[t, i] = em.tanh(em.sum(w[i, k] * x[t, k], axis=1, keepdims=True) + em.where(t > 0, y[t - 1, i], 0.0))
        return y

    x = rng.standard_normal((5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    np.testing.assert_allclose(g(x, w).numpy(), _rnn_ref(x, w), rtol=1e-5, atol=1e-6)


def test_a_lower_rank_value_is_aligned_with_the_indices(backend, rng):
    """README "Index modes": a [3] value stored at y[t, i] (i of shape [3, 4]) takes i's axis."""
    @em.compile
    def g(x: em.f32["T", 4], w: em.f32[3, 4]):
        T = x.shape[0]
        y = em.zeros([T, 3], em.f32)
        with em.loop(T) as t:
            i, k = em.indices([3, 4])
            y[t, i] = em.sum(w[i, k] * x[t, k], axis=1)
        return y

    x = rng.standard_normal((2, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(g(x, w).numpy(), x.astype(float) @ w.T.astype(float), rtol=1e-5, atol=1e-6)


def test_kernel_stores_race_unless_the_axis_is_pinned_or_uniform(backend, rng):
    """In an em.kernel([M, K]): y[i] = A[i, k] races along k; under em.if_(k == 0), or with a value
    that does not depend on k (a per-thread loop over j into a var), it is one value per element."""
    A = rng.standard_normal((3, 4)).astype(np.float32)

    @em.compile
    def racy(a: em.f32[3, 4]):
        y = em.zeros([3])
        with em.kernel([3, 4]) as (i, k):
            y[i] = a[i, k]
        return y

    with pytest.raises(em.ShapeError, match=r"races: .* varies along axis 1 \(of size 4\)"):
        racy(A)

    @em.compile
    def pinned(a: em.f32[3, 4]):
        y = em.zeros([3])
        with em.kernel([3, 4]) as (i, k):
            with em.if_(k == 3):
                y[i] = a[i, k] * 2.0
        return y

    np.testing.assert_allclose(pinned(A).numpy(), A[:, 3] * 2.0, rtol=1e-6)

    @em.compile
    def rowsum(a: em.f32[3, 4]):
        y = em.zeros([3])
        with em.kernel([3, 4]) as (i, k):
            acc = em.var(em.f32(0.0))
            with em.loop(4) as j:
                acc.val = acc.val + a[i, j]
            y[i] = acc.val
        return y

    np.testing.assert_allclose(rowsum(A).numpy(), A.astype(float).sum(axis=1), rtol=1e-5, atol=1e-6)

    @em.compile
    def var_racy(a: em.f32[3, 4]):
        y = em.zeros([3])
        with em.kernel([3, 4]) as (i, k):
            acc = em.var(em.f32(0.0))
            with em.if_(a[i, k] > 0.0):
                acc.val = 1.0
            y[i] = acc.val
        return y

    with pytest.raises(em.ShapeError, match="races"):
        var_racy(A)


def test_a_scalar_target_with_a_tensor_value_is_refused(rng):
    """y[0] = x with x of shape [4]: four threads write y[0] (NumPy raises too)."""
    @em.compile
    def f(x: em.f32[4]):
        y = em.zeros([2])
        y[0] = x
        return y

    with pytest.raises(em.ShapeError, match="races"):
        f(rng.standard_normal(4).astype(np.float32))


def test_atomics_are_not_races(backend, rng):
    """An atomic combines its threads' values: em.atomic_add into y[i] over k is a row sum."""
    A = rng.standard_normal((3, 4)).astype(np.float32)

    @em.compile
    def f(a: em.f32[3, 4]):
        y = em.zeros([3])
        with em.kernel([3, 4]) as (i, k):
            em.atomic_add(y[i], a[i, k])
        return y

    np.testing.assert_allclose(f(A).numpy(), A.astype(float).sum(axis=1), rtol=1e-5, atol=1e-6)


RACE_SEEDS = list(range(200))


def _report(res):
    return "\n".join(f"race seed {s}: {f['cls']} on {f['where']}: {f.get('msg', '')[:300]}"
                     for s in sorted(res) for f in res[s]["fails"])


@pytest.mark.parametrize("backend_name", _SELECTED)
def test_fuzz_race_programs(backend_name):
    """The fuzzer's race programs: the racing ones refused, the others right (gen_race.py)."""
    reason = _unavailable(backend_name)
    if reason:
        pytest.skip(f"backend {backend_name} unavailable: {reason}")
    res = run.run_many(RACE_SEEDS, [backend_name], jobs=1, timeout=120.0, stages=backend_name == "cpu", race=True)
    assert all(not r["fails"] for r in res.values()), "\n" + _report(res)
    feats = [f for r in res.values() for f in r["features"]]
    assert feats.count("race_racy") >= 40 and feats.count("race_free") >= 40


def test_fuzz_race_seeds_cover_every_form():
    cov = set()
    for s in RACE_SEEDS:
        cov.update(gen_race.generate_race(s).features)
    missing = [f for f in gen_race.RACE_FEATURES if f not in cov]
    assert not missing, missing
