"""The differential fuzzer (tests/fuzz, tools/fuzz) on a fixed set of seeds: every program through
the reference interpreter after every pass (both pipeline configurations, once per seed) and on
every backend this machine has, compared with its NumPy reference. Programs run in a worker
subprocess, so a crash or a hang fails the test with its seed instead of killing pytest.
Reproduce a failure with `tools/fuzz --seed SEED --backends NAME`, print it with
`tools/fuzz --show SEED`, shrink it with `tools/fuzz --minimize SEED --backends NAME`."""
import collections
import os
import sys

import pytest

from conftest import _SELECTED, _unavailable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.fuzz import gen, run  # noqa: E402

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
    for s in SEEDS:
        cov.update(gen.generate(s).features)
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
