"""Tape or checkpoint (issue 11 item 3): a host loop over the tape budget keeps every
ceil(sqrt(T))-th state and recomputes segments; the gradients equal the fully taped ones bit
for bit, the tape shrinks to ~2 sqrt(T) states, and prog.stats reports it."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ember as em

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _program():
    @em.compile
    def f(x0: em.f32["N", 2], v0: em.f32["N", 2], steps: em.i32):
        x = em.var(x0)
        v = em.var(v0)
        with em.loop(steps):
            v.val = v.val - 0.01 * x.val - 0.001 * v.val * em.sum(v.val * v.val, axis=1, keepdims=True)
            x.val = x.val + 0.01 * v.val
        return em.grad(em.sum(x.val * x.val), [x0, v0])
    return f


def _run(budget, steps, backend):
    os.environ["EMBER_TAPE_BUDGET_MB"] = str(budget)
    try:
        f = _program()
        rng = np.random.default_rng(3)
        x0 = rng.standard_normal((64, 2)).astype(np.float32)
        v0 = rng.standard_normal((64, 2)).astype(np.float32)
        gx, gv = f(x0, v0, steps)
        return np.asarray(gx), np.asarray(gv), f.stats["tape_bytes"]
    finally:
        del os.environ["EMBER_TAPE_BUDGET_MB"]


@pytest.mark.parametrize("steps", [1, 7, 100, 401])
def test_checkpointed_equals_full_tape(backend, steps):
    gx_full, gv_full, tape_full = _run(1000, steps, backend)
    gx_ck, gv_ck, tape_ck = _run(0, steps, backend)   # a zero budget: always checkpoint
    np.testing.assert_array_equal(gx_ck, gx_full)
    np.testing.assert_array_equal(gv_ck, gv_full)
    state = 2 * 64 * 2 * 4                            # two [64, 2] f32 vars
    # The segment tape (the states of one segment, replayed in reverse) keeps one of the two vars:
    # simplify's var forwarding gives the replay the other's value from the set that made it.
    segment = state // 2
    assert tape_full == steps * state + segment        # every state + a one-step segment tape
    k = int(np.ceil(np.sqrt(steps)))
    assert tape_ck == -(-steps // k) * state + k * segment  # checkpoints + one segment tape


def test_example_keeps_10000_steps_under_64_mib():
    """examples/checkpointed_sim.py: 10 000 steps of two [1024, 2] vars (156 MiB if every step
    were taped) with the default budget."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "checkpointed_sim.py"), "--n", "1024",
                          "--steps", "10000"], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", "")))
    assert out.returncode == 0, out.stderr
    ck, full = (float(m) for m in re.findall(r"tape\s+([0-9.]+) MiB", out.stdout))
    assert ck < 64 < full, out.stdout
    assert "gradients identical: True" in out.stdout
