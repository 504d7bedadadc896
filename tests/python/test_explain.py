"""prog.explain(): one line per pair of adjacent kernels that stayed apart and per host loop that
stays sequential, naming the dependence (or the shape, workgroup or cost reason) in the program's
own terms: tensor names, indices in the kernel's i, j, ..., source lines."""
import inspect

import numpy as np
import pytest

import ember as em


def line_of(fn, text):
    """The source line number of the first line of `fn` containing `text`."""
    src, first = inspect.getsourcelines(fn.fn)
    for k, line in enumerate(src):
        if text in line:
            return first + k
    raise AssertionError(f"{text!r} not in {fn}")


rng = np.random.default_rng(7)


@em.compile
def fused(x: em.f32["N"]):  # noqa: F821
    return em.exp(x) * 2.0 + 1.0


@em.compile
def blur(A: em.f32["N"]):  # noqa: F821
    n = A.shape[0]
    B = em.buffer((n,))
    with em.kernel(n) as i:
        s = em.var(0.0)
        with em.loop(4) as k:
            s.val = s.val + A[(i + k) % n]
        B[i] = s.val
    C = em.buffer((n,))
    with em.kernel(n) as i:
        C[i] = B[(i + 1) % n] - B[i]  # neighbour read
    return C


@em.compile
def reverse_then_update(A: em.f32["N"]):  # noqa: F821
    n = A.shape[0]
    C = em.buffer((n,))
    with em.kernel(n) as i:
        C[i] = A[n - 1 - i] * 2.0
    with em.kernel(n) as i:
        A[i] = C[i] + 1.0  # overwrites what the first kernel read elsewhere
    return C


@em.compile
def two_shapes(A: em.f32["N"], B: em.f32["M", 3]):  # noqa: F821
    return A * 2.0, B + 1.0  # two shapes


@em.compile
def grouped(A: em.f32["N"]):  # noqa: F821
    n = A.shape[0]
    B = em.buffer((n,))
    with em.kernel(n, group=8) as i:
        buf = em.group_buffer(8, em.f32)
        lo = em.local_index()
        buf[lo] = A[i]
        em.barrier()
        B[i] = buf[(lo + 1) % 8]
    return B * 2.0


@em.compile
def rnn(X: em.f32["T", "H"]):  # noqa: F821
    h = em.var(X[0] * 0.0)
    out = em.buffer(X.shape)
    with em.loop(X.shape[0]) as t:
        h.val = em.tanh(h.val + X[t])  # the recurrence
        out[t] = h.val
    return out


@em.compile
def rows(X: em.f32["T", "H"], W: em.f32["H", "H"]):  # noqa: F821
    Y = em.buffer(X.shape)
    with em.loop(X.shape[0]) as t:
        i, k = em.indices([X.shape[1], X.shape[1]])
        Y[t, i] = em.sum(W[i, k] * X[t, k], axis=1)
    return Y


def test_fully_fused_says_so(capsys):
    x = rng.standard_normal(37).astype(np.float32)
    np.testing.assert_allclose(fused(x).numpy(), np.exp(x) * 2 + 1, rtol=1e-6)
    assert fused.explain() == "all fused: 1 kernel, no adjacent kernels left apart and no host loop left sequential"
    assert capsys.readouterr().out == ""  # returns the text, prints nothing


def test_flow_dependence_across_threads():
    a = rng.standard_normal(29).astype(np.float32)
    b = sum(np.roll(a, -k) for k in range(4))
    np.testing.assert_allclose(blur(a).numpy(), np.roll(b, -1) - b, rtol=1e-5, atol=1e-5)
    assert blur.kernel_count == 2
    assert blur.explain() == (f"kernel 1 reads B[(i + 1) % N] written by kernel 0 at another thread "
                              f"(line {line_of(blur, '# neighbour read')})")


def test_anti_dependence_names_the_overwrite():
    a = rng.standard_normal(23).astype(np.float32)
    c = reverse_then_update(a.copy()).numpy()
    np.testing.assert_allclose(c, a[::-1] * 2, rtol=1e-6)
    assert reverse_then_update.explain() == (
        f"kernel 1 writes A[i] read by kernel 0 at another thread (line {line_of(reverse_then_update, '# overwrites')})")


def test_different_shapes():
    a, b = rng.standard_normal(11).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    ya, yb = two_shapes(a, b)
    np.testing.assert_allclose(ya.numpy(), a * 2, rtol=1e-6)
    np.testing.assert_allclose(yb.numpy(), b + 1, rtol=1e-6)
    assert two_shapes.explain() == (f"kernel 1 stays apart from kernel 0: different shapes, [M, 3] and [N] "
                                    f"(line {line_of(two_shapes, '# two shapes')})")


def test_workgroups():
    a = rng.standard_normal(32).astype(np.float32)
    ref = np.roll(a.reshape(4, 8), -1, axis=1).reshape(-1) * 2
    np.testing.assert_allclose(grouped(a).numpy(), ref, rtol=1e-6)
    assert grouped.explain() == "kernel 1 stays apart from kernel 0: kernel 0 runs in workgroups (its barriers would span both)"


def test_host_loop_with_a_recurrence():
    x = rng.standard_normal((5, 6)).astype(np.float32)
    h, ref = np.zeros(6, np.float32), []
    for t in range(5):
        h = np.tanh(h + x[t])
        ref.append(h)
    np.testing.assert_allclose(rnn(x).numpy(), np.array(ref), rtol=1e-5, atol=1e-6)
    loop, rec = line_of(rnn, "with em.loop"), line_of(rnn, "# the recurrence")
    lines = rnn.explain().splitlines()
    assert f"host loop t (line {loop}) stays sequential: kernel 1 reads h[i] written by kernel 1 in an earlier " \
           f"iteration (line {rec})" in lines


def test_host_loop_without_dependence_names_none():
    x, w = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 6)).astype(np.float32)
    np.testing.assert_allclose(rows(x, w).numpy(), x @ w.T, rtol=1e-5, atol=1e-5)
    text = rows.explain()
    # Until host loops become kernel axes this loop stays sequential with no dependence to name;
    # after, the program is one kernel.
    assert text in (f"host loop t (line {line_of(rows, 'with em.loop')}) stays sequential, though no dependence "
                    "crosses its iterations (Ember does not make host loops kernel axes)",
                    "all fused: 1 kernel, no adjacent kernels left apart and no host loop left sequential")


def test_explain_after_program_cache_hit(tmp_path, monkeypatch):
    """A program loaded from the program cache (no pipeline run) is traced again to explain it."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))

    def src(a: em.f32["N"]):  # noqa: F821
        n = a.shape[0]
        c = em.buffer((n,))
        with em.kernel(n) as i:
            c[i] = a[n - 1 - i]
        with em.kernel(n) as i:
            a[i] = c[i]
        return c
    first = em.compile(src)
    first(np.ones(4, np.float32))
    again = em.compile(src)
    again(np.ones(4, np.float32))
    assert again.stats["program_cache_hit"]
    assert again.explain() == first.explain()
    assert again.explain().startswith("kernel 1 writes a[i] read by kernel 0 at another thread")


@pytest.mark.parametrize("prog", [blur, rnn])
def test_explain_is_cached(prog):
    assert prog.explain() is not None and prog.explain() == prog.explain()


def test_debug_time_shows_the_analysis(tmp_path):
    """EMBER_DEBUG=time ends each pipeline with its total and the dependence analysis's share."""
    import os
    import re
    import subprocess
    import sys
    code = ("import numpy as np, ember as em\n"
            "@em.compile\n"
            "def f(A: em.f32['N']):\n"
            "    n = A.shape[0]\n"
            "    C = em.buffer((n,))\n"
            "    with em.kernel(n) as i:\n"
            "        C[i] = A[n - 1 - i]\n"
            "    with em.kernel(n) as i:\n"
            "        A[i] = C[i] + 1.0\n"
            "    return C\n"
            "f(np.arange(8, dtype=np.float32))\n")
    from pathlib import Path
    env = dict(os.environ, EMBER_DEBUG="time", EMBER_CACHE_DIR=str(tmp_path),
               PYTHONPATH=str(Path(em.__file__).resolve().parents[1]))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    m = re.search(r"ember: pipeline ([0-9.]+) ms, of which dependence analysis ([0-9.]+) ms: (\d+) queries, "
                  r"(\d+) access pairs \((\d+) syntactic, (\d+) isl, (\d+) over the limit\)", p.stderr)
    assert m, p.stderr
    assert float(m[2]) <= float(m[1]) and int(m[3]) >= 1 and int(m[6]) >= 1  # the anti dependence needs isl
