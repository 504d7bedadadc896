"""em.schedule: interchange, tile, parallelize and fuse, each checked by the isl dependence analysis
(core/analysis/schedule_legality.h, core/passes/apply_schedule.h). Legal requests give NumPy's
results on every backend with the loop structure asked for; illegal ones are CompileErrors naming
the dependence; a schedule is part of the compile caches' keys."""
import re

import numpy as np
import pytest

import ember as em

S = em.schedule


def rand(rng, *shape):
    return rng.uniform(0.5, 1.5, shape).astype(np.float32)


@em.compile
def colscan(x: em.f32["N", "M"]):  # noqa: F821
    """Running sums down each column: B[r, c] = B[r - 1, c] + x[r, c] (distance (1, 0))."""
    n, m = x.shape
    B = em.zeros(x.shape)
    with em.kernel(1) as _:
        with em.loop(n) as r:
            with em.loop(m) as c:
                B[r, c] = em.where(r > 0, B[r - 1, c], 0.0) + x[r, c]
    return B


@em.compile
def wavefront(x: em.f32["N", "M"]):  # noqa: F821
    """A[r, c] = A[r - 1, c + 1] + x[r, c]: distance (1, -1), so r and c must not swap."""
    n, m = x.shape
    A = em.zeros(x.shape)
    with em.kernel(1) as _:
        with em.loop(1, n) as r:
            with em.loop(m - 1) as c:
                A[r, c] = A[r - 1, c + 1] + x[r, c]
    return A


def wavefront_numpy(x):
    A = np.zeros_like(x)
    for r in range(1, x.shape[0]):
        A[r, :-1] = A[r - 1, 1:] + x[r, :-1]
    return A


@em.compile
def rowsums(x: em.f32["N", "M"]):  # noqa: F821
    """One thread loops over the rows, each row summed into out[r] (rows independent)."""
    n, m = x.shape
    out = em.zeros((n,))
    with em.kernel(1) as _:
        with em.loop(n) as r:
            with em.loop(m) as c:
                out[r] = out[r] + x[r, c]
    return out


@em.compile
def prefix(x: em.f32["N"]):  # noqa: F821
    """acc[r] = acc[r - 1] + x[r]: each iteration reads the one before."""
    acc = em.zeros(x.shape)
    with em.kernel(1) as _:
        with em.loop(x.shape[0]) as r:
            acc[r] = em.where(r > 0, acc[r - 1], 0.0) + x[r]
    return acc


@em.compile
def two_kernels(x: em.f32["N", "M"]):  # noqa: F821
    """Kernel p sums rows into B, kernel q reads B at its own element: fusable."""
    n, m = x.shape
    B, C = em.zeros((n,)), em.zeros((n,))
    with em.kernel(n) as p:
        with em.loop(m) as c:
            B[p] = B[p] + x[p, c]
    with em.kernel(n) as q:
        C[q] = B[q] * 2.0 + 1.0
    return C


@em.compile
def reverse_then_update(a: em.f32["N"]):  # noqa: F821
    """Kernel q overwrites a[i], which kernel p reads at another thread (a[n - 1 - i])."""
    n = a.shape[0]
    c = em.buffer((n,))
    with em.kernel(n) as p:
        c[p] = a[n - 1 - p]
    with em.kernel(n) as q:
        a[q] = c[q] * 2.0
    return c


def loop_bounds(ir):
    """The (begin, end, step) operand texts of the loops in an IR text, in order."""
    return re.findall(r"= loop i32\[[^\]]*\] \(([^)]*)\)", ir)


def test_interchange_legal(rng, backend):
    x = rand(rng, 5, 7)
    sched = colscan.schedule(S.interchange("r", "c"))
    np.testing.assert_allclose(sched(x).numpy(), np.cumsum(x, axis=0), rtol=1e-5)
    before = loop_bounds(colscan.ir("apply_schedule"))
    after = loop_bounds(sched.ir("apply_schedule"))
    assert before[0].startswith("0, N") and before[1].startswith("0, M")
    assert after[0].startswith("0, M") and after[1].startswith("0, N")  # c is outside now


def test_interchange_either_order_and_illegal_wavefront(rng):
    x = rand(rng, 6, 6)
    np.testing.assert_allclose(wavefront(x).numpy(), wavefront_numpy(x), rtol=1e-5)
    for req in (S.interchange("r", "c"), S.interchange("c", "r")):
        with pytest.raises(em.CompileError) as e:
            wavefront.schedule(req)(x)
        msg = str(e.value)
        assert "would break a dependence" in msg
        assert "A[r - 1, c + 1]" in msg and "written by kernel 0" in msg
        assert f"(line {wavefront.fn.__code__.co_firstlineno + 8})" in msg  # the load's line


def test_parallelize_legal(rng, backend):
    x = rand(rng, 33, 9)
    sched = rowsums.schedule(S.parallelize("r"))
    np.testing.assert_allclose(sched(x).numpy(), x.sum(axis=1), rtol=1e-5)
    assert "kernel #0[1, N]" in sched.ir("apply_schedule")
    assert "kernel #0[1]" in rowsums.ir("apply_schedule")
    assert len(loop_bounds(sched.ir("apply_schedule"))) == 1  # only c is left a loop


def test_parallelize_illegal():
    x = np.arange(1, 9, dtype=np.float32)
    np.testing.assert_allclose(prefix(x).numpy(), np.cumsum(x))
    with pytest.raises(em.CompileError, match=r"reads acc\[r - 1\] written by kernel 0 in an earlier iteration of r"):
        prefix.schedule(S.parallelize("r"))(x)


def test_tile_legal(rng, backend):
    x = rand(rng, 6, 37)
    sched = rowsums.schedule(S.tile("c", 8))
    np.testing.assert_allclose(sched(x).numpy(), x.sum(axis=1), rtol=1e-5)
    bounds = loop_bounds(sched.ir("apply_schedule"))
    assert len(bounds) == 3 and bounds[1].endswith(", 8")  # r, c_tile stepping by 8, c


def test_tile_then_interchange_blocks(rng, backend):
    # r{c_tile{c}} -> c_tile{r{c}}: checked (out[r] has distance 0 on r), then applied.
    x = rand(rng, 5, 20)
    sched = rowsums.schedule(S.tile("c", 4), S.interchange("r", "c_tile"))
    np.testing.assert_allclose(sched(x).numpy(), x.sum(axis=1), rtol=1e-5)
    bounds = loop_bounds(sched.ir("apply_schedule"))
    assert bounds[0].endswith(", 4") and bounds[1].startswith("0, N")


def test_fuse_legal(rng, backend):
    x = rand(rng, 40, 6)
    sched = two_kernels.schedule(S.fuse("p", "q"))
    np.testing.assert_allclose(sched(x).numpy(), x.sum(axis=1) * 2 + 1, rtol=1e-5)
    assert sched.ir("apply_schedule").count("kernel #") == 1
    assert two_kernels.ir("parallelize_host_loops").count("kernel #") == 2
    by_number = two_kernels.schedule(S.fuse(0, 1))
    np.testing.assert_allclose(by_number(x).numpy(), x.sum(axis=1) * 2 + 1, rtol=1e-5)
    assert by_number.kernel_count == 1


def test_fuse_illegal(rng):
    a = rand(rng, 16)
    c = reverse_then_update(a.copy()).numpy()
    np.testing.assert_allclose(c, a[::-1], rtol=1e-6)
    assert reverse_then_update.kernel_count == 2
    with pytest.raises(em.CompileError, match=r"kernel 1 writes a\[i\] read by kernel 0 at another thread \(line"):
        reverse_then_update.schedule(S.fuse("p", "q"))(a.copy())


def test_bad_requests(rng):
    x = rand(rng, 4, 4)
    with pytest.raises(em.CompileError, match="no loop inside a kernel is named 'zz'.*r \\(line"):
        rowsums.schedule(S.interchange("r", "zz"))(x)
    with pytest.raises(em.CompileError, match="not directly inside"):
        colscan.schedule(S.tile("c", 2), S.interchange("r", "c"))(x)
    with pytest.raises(em.CompileError, match="there is no kernel 5"):
        rowsums.schedule(S.fuse(0, 5))(x)
    with pytest.raises(em.TypeError):
        S.tile("c", 1)
    with pytest.raises(em.TypeError):
        rowsums.schedule("interchange r c")


def test_schedule_is_in_the_cache_key(rng, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))  # a cache that has seen only this test
    x = rand(rng, 12, 5)
    prog = em.compile(rowsums.fn)
    prog(x)
    plain = prog.stats
    sched = prog.schedule(S.parallelize("r"))
    np.testing.assert_allclose(sched(x).numpy(), x.sum(axis=1), rtol=1e-5)
    st = sched.stats
    assert not st["program_cache_hit"] and st["passes"]  # recompiled: the pipeline ran
    if plain["traced_digest"]:  # the program cache is on
        assert st["traced_digest"] != plain["traced_digest"]
        assert st["program_cache_key"] != plain["program_cache_key"]
    assert "kernel #0[1, N]" in sched.ir() and "kernel #0[1, N]" not in prog.ir()
    again = em.compile(rowsums.fn).schedule(S.parallelize("r"))  # the same schedule: the same entry
    np.testing.assert_allclose(again(x).numpy(), x.sum(axis=1), rtol=1e-5)
    if plain["traced_digest"]:
        assert again.stats["program_cache_key"] == st["program_cache_key"] and again.stats["program_cache_hit"]


def test_compile_argument_and_unscheduled_unchanged(rng):
    x = rand(rng, 8, 3)

    def f(x: em.f32["N", "M"]):  # noqa: F821
        n, m = x.shape
        out = em.zeros((n,))
        with em.kernel(1) as _:
            with em.loop(n) as rr:
                with em.loop(m) as cc:
                    out[rr] = out[rr] + x[rr, cc] * x[rr, cc]
        return out
    g = em.compile(f, schedule=[S.parallelize("rr")])
    np.testing.assert_allclose(g(x).numpy(), (x * x).sum(axis=1), rtol=1e-5)
    assert "kernel #0[1, N]" in g.ir("apply_schedule")
    plain = em.compile(f)
    plain(x)
    assert not any(p["name"] == "apply_schedule" and p["changed"] for p in plain.stats["passes"])


def test_spectral_interp_interchange(rng, backend):
    import importlib.util
    import pathlib
    import sys
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "spectral_interp.py"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # the examples' _ember_path
    spec = importlib.util.spec_from_file_location("spectral_interp_example", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    A, u = ex.make_inputs(3, 5, seed=7)
    ref = ex.interp_numpy(A, u)
    for prog in (ex.interp, ex.interp_interchanged):
        np.testing.assert_allclose(prog(A, u).numpy(), ref, rtol=1e-4, atol=1e-5, err_msg=prog.name)
    # The contracted loop l1 is outermost in the first nest: the innermost loop runs along n.
    assert len(loop_bounds(ex.interp_interchanged.ir("apply_schedule"))) == 9
    assert ex.interp_interchanged.ir("apply_schedule") != ex.interp.ir("apply_schedule")


@em.compile
def cols(x: em.f32["N", "M"]):  # noqa: F821
    """A thread per row r loops over the columns c (independent)."""
    out = em.zeros(x.shape)
    with em.kernel(x.shape[0]) as r:
        with em.loop(x.shape[1]) as c:
            out[r, c] = x[r, c] * 2.0 + em.cast(c, em.f32)
    return out


@em.compile
def row_scan(x: em.f32["N", "M"]):  # noqa: F821
    """A thread per row r scans along c: iteration c reads what c - 1 wrote."""
    out = em.zeros(x.shape)
    with em.kernel(x.shape[0]) as r:
        with em.loop(x.shape[1]) as c:
            out[r, c] = em.where(c > 0, out[r, c - 1], 0.0) + x[r, c]
    return out


def test_interchange_kernel_axis_with_loop(rng, backend):
    x = rand(rng, 7, 19)
    sched = cols.schedule(S.interchange("r", "c"))
    np.testing.assert_allclose(sched(x).numpy(), x * 2 + np.arange(19, dtype=np.float32), rtol=1e-6)
    assert "kernel #0[N]" in cols.ir("apply_schedule")
    ir = sched.ir("apply_schedule")
    assert "kernel #0[M]" in ir and loop_bounds(ir)[0].startswith("0, N")  # threads over c, a loop over r


def test_interchange_kernel_axis_with_carrying_loop_is_illegal(rng):
    x = rand(rng, 4, 6)
    np.testing.assert_allclose(row_scan(x).numpy(), np.cumsum(x, axis=1), rtol=1e-5)
    with pytest.raises(em.CompileError, match=r"reads out\[i, c - 1\] written by kernel 0 in an earlier iteration of c"):
        row_scan.schedule(S.interchange("c", "r"))(x)


def test_interpreter_agrees_before_and_after_apply_schedule(rng):
    """The reference interpreter gives NumPy's results as traced and after every pass of each
    scheduled program, apply_schedule included (the pass's before/after check)."""
    x = rand(rng, 6, 13)
    cases = [(colscan.schedule(S.interchange("r", "c")), np.cumsum(x, axis=0)),
             (rowsums.schedule(S.parallelize("r")), x.sum(axis=1)),
             (rowsums.schedule(S.tile("c", 4)), x.sum(axis=1)),
             (two_kernels.schedule(S.fuse("p", "q")), x.sum(axis=1) * 2 + 1)]
    for prog, want in cases:
        stages = prog._interpret_stages(x)
        assert any(stage == "apply_schedule" for stage, _ in stages), [s for s, _ in stages]
        for stage, outs in stages:
            assert not stage.startswith("error"), f"{stage}: {outs}"
            np.testing.assert_allclose(outs[0], want, rtol=1e-5, err_msg=f"stage {stage}")
