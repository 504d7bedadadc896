"""hoist_invariants (core/passes/hoist_invariants.h): values a kernel's loop body computes from
values outside the loop move before the loop. A gathered matmul's row index (a load of the batch
indices and its clamping) leaves the k loop; a load in a loop that may run zero times stays in it
(never speculated), though its pure index math moves; results equal NumPy either way."""
import re

import numpy as np

import ember as em


def kernel_lines(prog, first_line_has):
    """The lines of the first kernel in prog's final IR whose header contains `first_line_has`."""
    lines = prog.ir("final").splitlines()
    start = next(i for i, l in enumerate(lines) if re.match(r"\s*kernel #", l) and first_line_has in l)
    depth, out = 0, []
    for l in lines[start:]:
        out.append(l)
        depth += l.count("{") - l.count("}")
        if depth == 0:
            return out
    return out


def loop_body(lines):
    """(lines before the first loop, lines of its body)."""
    at = next(i for i, l in enumerate(lines) if " loop " in l)
    depth, body = 0, []
    for l in lines[at:]:
        depth += l.count("{") - l.count("}")
        if depth == 0:
            break
        body.append(l)
    return lines[:at], body[1:]


def test_gathered_rows_index_leaves_the_k_loop(rng):
    @em.compile
    def f(X: em.f32["S", 16], idx: em.i32["B"], W: em.f32["N", 16]):  # noqa: F821
        return em.nn.relu(X[idx] @ W.T)

    X = rng.standard_normal((40, 16)).astype(np.float32)
    idx = rng.integers(0, 40, 24).astype(np.int32)
    W = rng.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(f(X, idx, W)), np.maximum(X[idx] @ W.T, 0), rtol=1e-5, atol=1e-5)
    before, body = loop_body(kernel_lines(f, "mem("))
    assert any("load i32" in l for l in before), "\n".join(before)
    assert not any("load i32" in l for l in body), "\n".join(body)
    assert sum("load f32" in l for l in body) == 2  # X[row, k] and W[col, k] only


def test_load_in_a_loop_that_may_not_run_stays(rng):
    @em.compile
    def g(A: em.f32["N"], T: em.f32["M"], n: em.i32):  # noqa: F821
        out = em.zeros(A.shape, em.f32)
        with em.kernel(A.shape[0]) as i:
            acc = em.var(0.0)
            with em.loop(n) as k:
                acc.val = acc.val + T[(i * 3 + 1) % T.shape[0]] * em.f32(k)
            out[i] = acc.val + A[i]
        return out

    A = rng.standard_normal(10).astype(np.float32)
    T = rng.standard_normal(7).astype(np.float32)
    for n in (0, 1, 5):
        want = A + T[(np.arange(10) * 3 + 1) % 7] * (n * (n - 1) / 2)
        np.testing.assert_allclose(np.asarray(g(A, T, n)), want, rtol=1e-5, atol=1e-6)
    before, body = loop_body(kernel_lines(g, "mem("))
    assert any("load f32" in l for l in body), "\n".join(body)  # T[...] not speculated
    assert not any(" mod " in l or " mul i32" in l for l in body), "\n".join(body)  # its index math moved
