"""The differential fuzzer (tests/fuzz, tools/fuzz) on a fixed set of seeds: every program through
the reference interpreter after every pass (both pipeline configurations, once per seed) and on
every backend this machine has, compared with its NumPy reference. Programs run in a worker
subprocess, so a crash or a hang fails the test with its seed instead of killing pytest.
Reproduce a failure with `tools/fuzz --seed SEED --backends NAME`, print it with
`tools/fuzz --show SEED`, shrink it with `tools/fuzz --minimize SEED --backends NAME`.

The gradient mode (tests/fuzz/grad.py, `tools/fuzz --grad ...`): GRAD_SEEDS through the interpreter
after every pass and on cpu, GRAD_GPU_SEEDS on one GPU backend; seeds that hit a known Ember bug
(GRAD_KNOWN_FAILING, tests/fuzz/FINDINGS.md) are expected to fail until it is fixed."""
import collections
import os
import sys

import numpy as np
import pytest

from conftest import _SELECTED, _unavailable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.fuzz import gen, grad, run  # noqa: E402

SEEDS = list(range(int(os.environ.get("EMBER_FUZZ_START", "0")),
                   int(os.environ.get("EMBER_FUZZ_START", "0")) + int(os.environ.get("EMBER_FUZZ_SEEDS", "300"))))
CHUNKS = 3
TIMEOUT = 120.0


def _chunk(k):
    return SEEDS[k::CHUNKS]


def _report(results):
    lines = []
    for s in sorted(results):
        for f in results[s]["fails"]:
            msg = f.get("msg", "")
            lines.append(f"seed {s}: {f['cls']} on {f['where']}: {msg[:200]}" + (f" ... {msg[-300:]}" if len(msg) > 200 else ""))
    return "\n".join(lines)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_fuzz_interpreter_after_every_pass(chunk):
    res = run.run_many(_chunk(chunk), [], jobs=1, timeout=TIMEOUT, stages=True)
    assert all(not r["fails"] for r in res.values()), "\n" + _report(res)


@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("backend_name", _SELECTED)
def test_fuzz_backend(backend_name, chunk):
    reason = _unavailable(backend_name)
    if reason:
        pytest.skip(f"backend {backend_name} unavailable: {reason}")
    res = run.run_many(_chunk(chunk), [backend_name], jobs=1, timeout=TIMEOUT, stages=False)
    assert all(not r["fails"] for r in res.values()), "\n" + _report(res)


def test_fuzz_seeds_cover_every_feature():
    """The CI seeds exercise the whole feature list (gen.ALL_FEATURES)."""
    cov = collections.Counter()
    for s in SEEDS + [200626]:  # 200626: the reference's copy of argument a1 was named a10, another argument
        p = gen.generate(s)
        if s in SEEDS:
            cov.update(p.features)
        for (text, shape), ref in zip(p.out_specs, p.ref_outs):  # the reference computes what Ember returns
            if all(isinstance(d, int) for d in shape):
                assert np.shape(ref) == tuple(shape), (s, text, np.shape(ref), shape)
    missing = [f for f in gen.ALL_FEATURES if cov[f] < 1]
    assert not missing, f"features never seen in {len(SEEDS)} seeds: {missing}"
    unknown = set(cov) - set(gen.ALL_FEATURES)
    assert not unknown, f"features missing from gen.ALL_FEATURES: {sorted(unknown)}"


def test_fuzz_generation_is_deterministic():
    for s in SEEDS[:20]:
        a, b = gen.generate(s), gen.generate(s)
        assert a.em_src == b.em_src and a.np_src == b.np_src
        for x, y in zip(a.args, b.args):
            assert repr(x[3]) == repr(y[3])


def test_fuzz_finds_a_planted_bug():
    """The comparison is not vacuous: a reference off by one ulp-scale error bound fails."""
    import numpy as np
    for s in SEEDS:
        p = gen.generate(s)
        k = next((k for k, dt in enumerate(p.outs) if dt == "f32" and p.ref_outs[k].size), None)
        if k is None:
            continue
        got = [o.astype(np.float32) if dt == "f32" else o for o, dt in zip(p.ref_outs, p.outs)]
        got = [g.astype({"i32": np.int32, "u32": np.uint32, "bool": np.bool_, "f32": np.float32}[dt])
               for g, dt in zip(got, p.outs)]
        got += [a.astype(np.float32) if spec[1] == "f32" else a.astype(run.NPDT[spec[1]])
                for (a, _), spec in zip(p.ref_args, [x for x in p.args if x[2]])]
        assert run.compare(got, p, 0) is None, s  # the reference itself (rounded to f32) passes
        bad = list(got)
        bad[k] = bad[k] + np.float32(1e-2) * (1 + np.abs(bad[k]))
        assert run.compare(bad, p, 0) is not None, s
        return
    pytest.fail("no program with an f32 output")


def test_batched_cpu_compile_fills_the_cache_for_each_program(rng):
    """The fuzzer's batch compile (run.prefetch_cpu, backends/cpu/cpu.h): programs compiled for cpu
    while deferring keep their kernels and run nothing; _cpu_compile_deferred compiles all of them
    at once, and each program compiled afterwards finds its kernels there (nothing compiled)."""
    import time
    import ember as em
    reason = _unavailable("cpu")
    if reason:
        pytest.skip(f"backend cpu unavailable: {reason}")
    em.init("cpu")
    c = 1.0 + (time.time_ns() % 1000003) / 1e7  # kernels no cache has seen

    def make(k):
        ns = {"em": em}
        exec(f"def f(x: em.f32['N']):\n    return em.sin(x) * {c!r} + {k}.5\n", ns)
        return em.compile(ns["f"])
    kept = [make(k) for k in range(3)]
    em._ember._cpu_set_deferred(True)
    try:
        for f in kept:
            f._compile()
    finally:
        em._ember._cpu_set_deferred(False)
    x = rng.uniform(-3, 3, 50).astype(np.float32)
    with pytest.raises(em.InternalError):
        kept[0](x)  # compiled while deferring: no kernels bound
    assert em._ember._cpu_compile_deferred() == 3
    assert em._ember._cpu_compile_deferred() == 0  # forgotten once compiled
    for k in range(3):
        f = make(k)
        got = f(x).numpy()
        np.testing.assert_allclose(got, np.sin(x.astype(np.float64)) * np.float32(c) + k + 0.5, rtol=1e-5, atol=1e-5)
        assert f.stats["compiled_kernels"] == 0 and f.stats["cache_hit"], f.stats


def test_isl_blocks_exercise_their_passes(monkeypatch):
    """gen_isl.py's blocks reach the transformations they are for (each program lowered for cpu
    with the backend deferring: the pipeline and code generation, no compiler run): reducible
    atomics are reduced (none left unless the final address is shared), injective atomic scatters
    become plain (a clamped shift keeps its atomic), host loops over kernels become an axis unless
    they carry a dependence, and a row consumer fuses with its producer only within its own row."""
    import re
    import ember as em
    reason = _unavailable("cpu")
    if reason:
        pytest.skip(f"backend cpu unavailable: {reason}")
    em.init("cpu")
    # The pipeline runs (its pass records are read): a lowered program from the program cache has
    # none (a second tools/test found every one of these programs there).
    monkeypatch.setenv("EMBER_PROGRAM_CACHE", "0")
    seen = collections.Counter()
    for seed in range(12):
        for kind in ("reduce_atomic", "inj_atomic", "par_hostloop", "row_fuse"):
            p = gen.generate_block(seed, kind)
            assert p is not None, (seed, kind)
            f = run.load(p)
            em._ember._cpu_set_deferred(True)
            try:
                f._compile()
            finally:
                em._ember._cpu_set_deferred(False)
                em._ember._cpu_compile_deferred(False)
            changed = {q["name"] for q in f.stats["passes"] if q["changed"]}
            atomics = len(run._ATOMIC_RE.findall(f.ir("final")))
            ft = set(p.features)
            where = f"seed {seed} {kind} {sorted(ft)}:\n{p.em_src}"
            if kind == "reduce_atomic":
                assert "reduce_atomics" in changed, where
                assert (atomics > 0) == ("reduce_atomic_shared_final" in ft), where
            elif kind == "inj_atomic":
                clamped = "inj_atomic_clamped_shift" in ft
                assert (atomics > 0) == clamped and ("reduce_atomics" in changed) != clamped, where
            elif kind == "par_hostloop":
                step = re.search(r"em\.loop\((-?\d+), (-?\d+), (-?\d+)\)", p.em_src)
                if "hostloop_carried" in ft:
                    assert "parallelize_host_loops" not in changed, where
                elif not (step and int(step.group(3)) < 0):  # a loop counting down stays (not handled yet)
                    assert "parallelize_host_loops" in changed, where
            else:
                own = ft & {"row_fuse_own", "row_fuse_min_identity"}
                assert f.kernel_count == (1 if own else 2), where
            seen.update(x for x in ft if x.startswith(("reduce_atomic_", "inj_atomic_", "hostloop_", "row_fuse_")))
    for x in ("inj_atomic_clamped_shift", "reduce_atomic_shared_final", "hostloop_carried", "hostloop_independent",
              "row_fuse_own", "row_fuse_mirror"):
        assert seen[x] > 0, (x, seen)


# ---- gradient mode ------------------------------------------------------------------------------
_GRAD_START = int(os.environ.get("EMBER_FUZZ_GRAD_START", "0"))
GRAD_SEEDS = list(range(_GRAD_START, _GRAD_START + int(os.environ.get("EMBER_FUZZ_GRAD_SEEDS", "80"))))
GRAD_GPU_SEEDS = GRAD_SEEDS[:40]
# Seeds from long runs whose bug needs the whole program to show (the shrunk programs no longer
# fail), run with GRAD_SEEDS: 1360198 share_reciprocals and a negated min (FINDINGS.md G14).
GRAD_REGRESSION_SEEDS = [1360198]
GRAD_JOBS = 2
# Seeds of GRAD_SEEDS that fail on a known Ember bug (FINDINGS.md "gradient mode"), by bug: run apart,
# expected to fail until the bug is fixed (e.g. {"G4 unroll_small_dims ...": [95]} until f466155).
GRAD_KNOWN_FAILING = {
}
_GRAD_XFAIL = sorted({s for v in GRAD_KNOWN_FAILING.values() for s in v})


def _grad_run(seeds, backends, stages):
    res = run.run_many([s for s in seeds if s not in _GRAD_XFAIL], backends, jobs=GRAD_JOBS, timeout=TIMEOUT,
                       stages=stages, grad=True)
    assert all(not r["fails"] for r in res.values()), "\n" + _report(res)
    return res


def test_fuzz_grad_cpu_and_interpreter_after_every_pass():
    res = _grad_run(GRAD_SEEDS + GRAD_REGRESSION_SEEDS, ["cpu"], True)
    st = collections.Counter()
    for r in res.values():
        st.update({k: v for k, v in r.get("grad", {}).items() if isinstance(v, int)})
    assert st["checked"] > 20 * len(res), st  # the gradients were compared, not skipped


def test_fuzz_grad_gpu():
    b = next((b for b in _SELECTED if b != "cpu" and not _unavailable(b)), None)
    if b is None:
        pytest.skip("no GPU backend available")
    _grad_run(GRAD_GPU_SEEDS, [b], False)


@pytest.mark.parametrize("seed", _GRAD_XFAIL or [None])
def test_fuzz_grad_known_bugs(seed):
    """The seeds of a known bug still fail (on cpu) until the bug is fixed: then move them back."""
    if seed is None:
        pytest.skip("no gradient-mode seed fails on a known bug (GRAD_KNOWN_FAILING is empty)")
    res = run.run_many([seed], ["cpu"], jobs=1, timeout=TIMEOUT, stages=False, grad=True)
    if res[seed]["fails"]:
        pytest.xfail(f"known bug: {_report(res)[:300]}")


GRAD_FEATURES = ["host_loop", "loop_runtime_count", "var", "host_if", "tensor_if", "gather_clamp", "gather_wrap",
                 "gather_subscript", "composed_gather", "scatter", "scatter_into_arg", "scatter_wrap", "reduce_sum",
                 "reduce_max",
                 "reduce_prod", "reduce_mean", "prefix_sum", "matmul", "kernel", "kernel_loop", "kernel_loop_runtime",
                 "break", "continue", "kernel_if", "atomic_add", "atomic_f32", "row_loop", "where", "abs", "clamp",
                 "min", "max", "floor", "frac"]


def test_fuzz_grad_seeds_cover_the_differentiable_features():
    cov = collections.Counter()
    ok = 0
    for s in GRAD_SEEDS:
        p = gen.generate(s, grad=True)
        ok += grad.GradProgram(p).ok
        cov.update(p.features)
    assert ok >= 0.95 * len(GRAD_SEEDS), f"{len(GRAD_SEEDS) - ok} of {len(GRAD_SEEDS)} seeds differentiate nothing"
    missing = [f for f in GRAD_FEATURES if cov[f] < 1]
    assert not missing, f"features never seen in {len(GRAD_SEEDS)} gradient-mode seeds: {missing}"
    assert not {"group", "bitcast_f32_u32"} & set(cov), "the gradient mode makes no workgroups or float bits"


def test_fuzz_grad_generation_is_deterministic():
    for s in GRAD_SEEDS[:10]:
        a, b = grad.GradProgram(gen.generate(s, grad=True)), grad.GradProgram(gen.generate(s, grad=True))
        assert a.em_src == b.em_src and a.prog.np_src == b.prog.np_src
        assert all(np.array_equal(x, y) for x, y in zip(a.weights, b.weights))


def _handmade(em_body, np_body, args, seed=0):
    """A gradient-mode Program of one f32 output `o` from a hand-written body (for the checker's tests)."""
    params = ", ".join(f"{n}: {ann or 'em.f32'}" for n, ann, _ in args)
    em_src = f"import ember as em\n\n\n@em.compile\ndef f({params}):\n    {em_body}\n    return (o, )\n"
    np_src = gen.NP_PRELUDE + f"\n\ndef ref({', '.join(n for n, _, _ in args)}):\n    {np_body}\n    return [o], []\n"
    ns = {"E": gen.E}
    exec(np_src, ns)
    data = [d for _, _, d in args]
    out = np.asarray(ns["ref"](*[np.asarray(d, np.float64) if isinstance(d, np.ndarray) else d for d in data])[0][0],
                     np.float64)
    return gen.Program(seed, em_src, np_src, [(n, "f32", ann, d) for n, ann, d in args], ["f32"], [out],
                       [np.zeros((2,) + out.shape)], [], [], [], out_specs=[("o", out.shape)], grad=True)


def test_fuzz_grad_central_differences_skip_kinks():
    """An input within the step of a kink (|x| at 0) or of a jump (floor) is skipped and counted,
    the others are compared; the comparison passes the exact gradient and fails a wrong one."""
    x = np.array([0.75, 2e-6, -1.5, 0.6, 3.0 - 1e-6], np.float32)
    p = _handmade("o = em.abs(x) * 2.0 + em.floor(x) * x", "o = np.abs(x) * 2.0 + np.floor(x) * x",
                  [("x", "em.f32[5]", x)])
    gp = grad.GradProgram(p)
    a = gp.reference()[0]
    assert gp.stats["kinks"] == 2 and list(np.flatnonzero(a["kink"])) == [1, 4], gp.stats
    w = np.asarray(gp.weights[0], np.float64)
    exact = w * (2.0 * np.sign(x) + np.floor(x))
    L = float(np.sum(w * np.asarray(p.ref_outs[0])))
    good = [np.float32(L), exact.astype(np.float32)]
    assert gp.compare(good, 0) is None
    bad = [np.float32(L), (exact * np.array([1, 1, 1, 1.01, 1])).astype(np.float32)]
    m = gp.compare(bad, 0)
    assert m and m["index"] == [3] and m["site"] == "grad", m
    kink_only = [np.float32(L), (exact * np.array([1, 3, 1, 1, 3])).astype(np.float32)]  # skipped elements
    assert gp.compare(kink_only, 0) is None
    nan_at_kink = [np.float32(L), (exact * np.array([1, np.nan, 1, 1, 1])).astype(np.float32)]
    assert gp.compare(nan_at_kink, 0) is not None  # still finite where the input is


def test_fuzz_grad_finds_a_planted_bug():
    """The reference's own gradients (rounded to f32) pass; one element off by 1% of the scale fails;
    on a sampled argument, an element outside the sample that is off is caught by a direction."""
    for s in GRAD_SEEDS:
        gp = grad.GradProgram(gen.generate(s, grad=True))
        if not gp.ok:
            continue
        per = gp.reference()
        k = next((k for k, a in enumerate(per) if a["cmp"].sum() >= 2 and a["scale"] > 0), None)
        if k is None:
            continue
        got = [np.float32(gp.L0)] + [np.where(a["cmp"], a["want"], 0).astype(np.float32).reshape(a["x"].shape)
                                     for a in per]
        if any((~a["cmp"] & a["finite"]).any() for a in per):
            continue  # a program whose every gradient element is compared
        assert gp.compare(got, 0) is None, s
        bad = [g.copy() for g in got]
        i = int(np.flatnonzero(per[k]["cmp"])[-1])
        bad[1 + k].reshape(-1)[i] += np.float32(0.01 * per[k]["scale"])
        m = gp.compare(bad, 0)
        assert m is not None and m["index"] == [int(t) for t in np.unravel_index(i, per[k]["x"].shape)], (s, m)
        break
    else:
        pytest.fail("no program to plant a bug in")
    x = np.linspace(-1.0, 1.0, 600).astype(np.float32)
    p = _handmade("o = x * x", "o = x * x", [("x", "em.f32[600]", x)])
    gp = grad.GradProgram(p)
    a = gp.reference()[0]
    assert gp.stats["sampled_out"] > 0 and gp.stats["dirs"] == grad.N_DIRS
    exact = (2.0 * np.asarray(gp.weights[0], np.float64) * x).astype(np.float32)
    L = np.float32(np.sum(np.asarray(gp.weights[0], np.float64) * x.astype(np.float64) ** 2))
    assert gp.compare([L, exact], 0) is None
    j = int(np.flatnonzero(~a["sampled"])[0])
    off = exact.copy()
    off[j] += 0.5
    m = gp.compare([L, off], 0)
    assert m and m["index"] == [j], m
