"""The runtime runs the host plan (issue 13 item 0): the programs em.export writes as manifests run
through Ember's plan executor (prog.stats["host"] == "plan") on every backend, with results equal
to NumPy and to the same program compiled with EMBER_HOST_PLAN=0 (the host IR interpreted);
programs the plan cannot express, or with an autodiff tape, say why they use the interpreter."""
import os

import numpy as np
import pytest

import ember as em
from test_export import block_sum, example


def compile_with(fn, plan):
    """A fresh compile of `fn` (a Python function) with the host plan on or off (read at compile time)."""
    old = os.environ.get("EMBER_HOST_PLAN")
    if plan:
        os.environ.pop("EMBER_HOST_PLAN", None)
    else:
        os.environ["EMBER_HOST_PLAN"] = "0"
    try:
        prog = em.compile(fn)
        prog.stats  # compiles now, under this setting
        return prog
    finally:
        if old is None:
            os.environ.pop("EMBER_HOST_PLAN", None)
        else:
            os.environ["EMBER_HOST_PLAN"] = old


def outputs(result):
    return [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]


def copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def nbody_numpy(X, V, dt):
    d = X[:, None, :] - X[None, :, :]
    r2 = np.sum(d * d, axis=-1, keepdims=True) + np.float32(1e-4)
    F = np.sum(-d / (r2 * np.sqrt(r2)), axis=1)
    V2 = V + F * np.float32(dt)
    return [X + V2 * np.float32(dt), V2]


def block_sum_numpy(X):
    n = len(X)
    pad = np.zeros(-(-n // 64) * 64, np.float32)
    pad[:n] = X
    return [pad.reshape(-1, 64).sum(axis=1)]


def cases():
    """name -> (Python function, args from rng, NumPy reference, rtol)."""
    nbody, fluid, bitonic = example("nbody"), example("fluid"), example("bitonic_sort")
    return {
        "nbody": (nbody.step.fn, lambda r: (r.uniform(-4, 4, (96, 3)).astype(np.float32),
                                            r.normal(0, 1, (96, 3)).astype(np.float32), 0.01), nbody_numpy, 1e-4),
        "fluid": (fluid.fluid_step.fn, lambda r: (r.uniform(-1, 1, (16, 24)).astype(np.float32),
                                                  r.uniform(-1, 1, (16, 24)).astype(np.float32),
                                                  r.uniform(0, 1, (16, 24)).astype(np.float32), 0.5, 7),
                  lambda *a: list(fluid.fluid_numpy(*a)), 1e-4),
        "bitonic": (bitonic.bitonic_sort.fn, lambda r: (r.integers(-1000, 1000, 256).astype(np.int32),),
                    lambda k: [np.sort(k)], 0),
        "block_sum": (block_sum.fn, lambda r: (r.uniform(-1, 1, 1000).astype(np.float32),), block_sum_numpy, 1e-5),
    }


@pytest.mark.parametrize("name", ["nbody", "fluid", "bitonic", "block_sum"])
def test_runs_through_the_plan(name, backend, rng):
    fn, make_args, reference, rtol = cases()[name]
    planned, interpreted = compile_with(fn, True), compile_with(fn, False)
    assert planned.stats["host"] == "plan", planned.stats["host_reason"]
    assert planned.stats["host_reason"] == "" and planned.stats["host_plan_ms"] >= 0
    assert interpreted.stats["host"] == "interpreter"
    assert interpreted.stats["host_reason"] == "EMBER_HOST_PLAN=0"
    for _ in range(2):  # a second call reuses the plan
        args = make_args(rng)
        got = outputs(planned(*copies(args)))
        want = outputs(interpreted(*copies(args)))
        ref = reference(*copies(args))
        assert len(got) == len(want) == len(ref)
        for g, w, r in zip(got, want, ref):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)  # the same kernels with the same buffers and params
            np.testing.assert_allclose(g, r, rtol=rtol, atol=rtol)


def test_inputs_written_in_place(backend, rng):
    """bitonic_sort sorts its argument in place: the caller's array changes as with the interpreter."""
    prog = compile_with(example("bitonic_sort").bitonic_sort.fn, True)
    keys = rng.integers(-1000, 1000, 128).astype(np.int32)
    mine = keys.copy()
    out = prog(mine)
    assert prog.stats["host"] == "plan"
    np.testing.assert_array_equal(mine, np.sort(keys))
    np.testing.assert_array_equal(np.asarray(out), np.sort(keys))


def test_scalar_outputs_and_host_float_math(backend):
    """Returned scalars, and host float math (no manifest form) computed the interpreter's way."""
    def f(X: em.f32["N"], s: em.f32, k: em.i32):  # noqa: F821
        n = X.shape[0]
        m = em.i32(em.floor(em.sqrt(em.f32(n)) * s))  # float math on the host
        Y = em.var(em.zeros((n,), em.f32))
        with em.loop(m) as j:
            Y.val = Y.val + X * em.f32(j)
        return Y.val, n * 2 + k, s * 3.0

    planned, interpreted = compile_with(f, True), compile_with(f, False)
    X = np.linspace(-1, 1, 50).astype(np.float32)
    got, want = outputs(planned(X, 1.7, 5)), outputs(interpreted(X, 1.7, 5))
    assert planned.stats["host"] == "plan", planned.stats["host_reason"]
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    m = int(np.floor(np.sqrt(np.float32(50)) * np.float32(1.7)))
    np.testing.assert_allclose(got[0], X * (m * (m - 1) / 2), rtol=1e-5)
    assert int(got[1]) == 105


def test_tape_uses_the_interpreter():
    """em.grad through em.loop keeps a tape: the interpreter counts its bytes (stats.tape_bytes)."""
    @em.compile
    def f(x0: em.f32["N", 2], steps: em.i32):  # noqa: F821
        x = em.var(x0)
        with em.loop(steps):
            x.val = x.val - 0.01 * x.val * em.sum(x.val * x.val, axis=1, keepdims=True)
        return em.grad(em.sum(x.val * x.val), x0)

    x0 = np.random.default_rng(3).standard_normal((16, 2)).astype(np.float32)
    g = np.asarray(f(x0, 5))
    assert f.stats["host"] == "interpreter"
    assert "tape" in f.stats["host_reason"]
    assert f.stats["tape_bytes"] > 0 and np.all(np.isfinite(g))


def test_host_break_uses_the_interpreter():
    """A host-level break has no plan step: the interpreter runs it, and stats say why."""
    def f(X: em.f32["N"], limit: em.i32):  # noqa: F821
        Y = em.var(X)
        with em.loop(10) as k:
            with em.if_(k >= limit):
                em.break_()
            Y.val = Y.val * 2.0
        return Y.val

    prog = compile_with(f, True)
    X = np.ones(8, np.float32)
    np.testing.assert_array_equal(np.asarray(prog(X, 3)), X * 8)
    assert prog.stats["host"] == "interpreter"
    assert "break" in prog.stats["host_reason"]


def test_size_errors_as_the_interpreter():
    """A size over the tensor limit, known from the arguments, is the interpreter's ShapeError."""
    def f(X: em.f32["N"]):  # noqa: F821
        n = X.shape[0]
        return em.zeros((n, n), em.f32) + X[None, :]

    msgs, hosts = [], []
    for plan in (True, False):
        prog = compile_with(f, plan)
        with pytest.raises(em.ShapeError) as e:
            prog(np.ones(50000, np.float32))
        msgs.append(str(e.value))
        hosts.append(prog.stats["host"])
    assert hosts == ["plan", "interpreter"], prog.stats["host_reason"]
    assert msgs[0] == msgs[1] and "2147483647" in msgs[0]


def test_allocation_in_a_branch_not_taken(backend):
    """A buffer sized by a scalar, allocated only in a branch: a negative size fails only when the
    branch runs, as in the interpreter."""
    def f(X: em.f32["N"], k: em.i32):  # noqa: F821
        Y = em.var(X * 1.0)
        with em.if_(k > 0):
            Z = em.zeros((k,), em.f32) + 2.0
            Y.val = Y.val + em.sum(Z)
        return Y.val

    planned, interpreted = compile_with(f, True), compile_with(f, False)
    X = np.arange(6, dtype=np.float32)
    for k in (3, -2):
        np.testing.assert_array_equal(np.asarray(planned(X, k)), np.asarray(interpreted(X, k)))
    np.testing.assert_array_equal(np.asarray(planned(X, 3)), X + 6)
    assert planned.stats["host"] == "plan", planned.stats["host_reason"]


def test_module_and_optimizer_arguments_run_the_plan(backend, rng):
    """A train step with Module and optimizer arguments runs its host plan: the arguments' dotted
    names ('model.fc.weight') get identifiers of their own, and the host's write of the step
    counter (a store step, runtime plans only) lands in the optimizer's tensor, as interpreted."""
    class Net(em.nn.Module):
        def __init__(self):
            self.fc = em.nn.Linear(6, 3, seed=5)

        def forward(self, x):
            return self.fc(x)

    def step(model: Net, opt: em.optim.Adam, x: em.f32["B", 6], y: em.i32["B"]):  # noqa: F821
        loss = em.nn.cross_entropy(model(x), y)
        opt.step(loss)
        return loss

    results = []
    for plan in (True, False):
        prog = em.compile(step)  # compiles at its first call (under this EMBER_HOST_PLAN)
        model = Net()
        opt = em.optim.Adam(model, lr=0.05)
        old = os.environ.get("EMBER_HOST_PLAN")
        os.environ["EMBER_HOST_PLAN"] = "1" if plan else "0"
        try:
            r = np.random.default_rng(7)
            x, y = r.standard_normal((8, 6)).astype(np.float32), r.integers(0, 3, 8).astype(np.int32)
            losses = [float(prog(model, opt, x, y)) for _ in range(3)]
        finally:
            if old is None:
                os.environ.pop("EMBER_HOST_PLAN", None)
            else:
                os.environ["EMBER_HOST_PLAN"] = old
        assert prog.stats["host"] == ("plan" if plan else "interpreter"), prog.stats["host_reason"]
        assert opt.step_count == 3
        results.append((losses, model.state_dict(), opt.state_dict()))
    (l1, m1, o1), (l2, m2, o2) = results
    assert l1 == l2 and l1[2] < l1[0]
    for k in m1:
        np.testing.assert_array_equal(m1[k], m2[k])
    for k in o1:
        np.testing.assert_array_equal(o1[k], o2[k])
