"""Named regression tests: each is a program that once gave a wrong answer, an internal error or
a crash (reported in issue 10 or found by the differential fuzzer in tests/fuzz), minimized,
run on every backend against NumPy and through the interpreter after every pass. The docstring
says what was wrong and where."""
import numpy as np
import pytest

import ember as em


def check_stages(prog, args, want, lower_groups=True, tile_threads=True, atol=1e-5):
    """The interpreter agrees with `want` (a list of outputs) as traced and after every pass."""
    for cfg in ((lower_groups, tile_threads), (False, False)):
        for stage, outs in prog._interpret_stages(*args, lower_groups=cfg[0], tile_threads=cfg[1]):
            assert not stage.startswith("error"), f"{stage}: {outs}"
            for k, w in enumerate(want):
                np.testing.assert_allclose(outs[k], w, rtol=1e-5, atol=atol, err_msg=f"stage {stage}, output {k}")


def test_row_loop_with_a_reduction_over_a_small_axis(backend, rng):
    """A host loop over rows storing a reduction over the second axis of em.indices([4, 4]).
    Was: the sum's axis aligned with k (NumPy broadcasting of [4] against [4, 4]), so every
    column got the last row's value (vulkan, opengl: max error 0.75); and the CPU printer's
    load staging took the host loop's counter (a kernel parameter) for a loop of the kernel
    (`'p0k' was not declared`). Now a scatter value that would write different values to one
    element aligns with the axes its indices vary along (Tracer::align_scatter_value), and
    staging only considers loops inside the kernel (codegen/c_staging.cpp)."""
    @em.compile
    def f(x: em.f32[8, 4], w: em.f32[4, 4]):
        y = em.zeros([8, 4], em.f32)
        with em.loop(8) as t:
            i, k = em.indices([4, 4])
            y[t, i] = em.sum(w[i, k] * x[t, k], axis=1)
        return y
    x = rng.standard_normal((8, 4)).astype(np.float32)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(f(x, w).numpy(), want, rtol=1e-5, atol=1e-5)
    check_stages(f, (x, w), [want])


def test_rnn_scan_over_time_of_small_matmuls(backend, rng):
    """The larger shape of the same bug: a recurrence h = tanh(W h + x_t) over time, stored per
    step (was: CPU compile failure; GPU wrong values)."""
    T_, H = 6, 3

    @em.compile
    def rnn(x: em.f32[6, 3], W: em.f32[3, 3]):
        hs = em.zeros([T_, H], em.f32)
        h = em.var(em.zeros([H], em.f32))
        with em.loop(T_) as t:
            i, k = em.indices([H, H])
            h.val = em.tanh(em.sum(W[i, k] * h.val[k], axis=1) + x[t, em.indices([H])[0]])
            hs[t, em.indices([H])[0]] = h.val
        return hs
    x = rng.standard_normal((T_, H)).astype(np.float32)
    W = (0.5 * rng.standard_normal((H, H))).astype(np.float32)
    h = np.zeros(H)
    want = []
    for t in range(T_):
        h = np.tanh(W.astype(np.float64) @ h + x[t])
        want.append(h)
    want = np.array(want)
    np.testing.assert_allclose(rnn(x, W).numpy(), want, rtol=1e-4, atol=1e-4)
    check_stages(rnn, (x, W), [want], atol=1e-4)


def test_composed_clamped_gathers_keep_the_inner_clamp(backend, rng):
    """t = |c[I, J + 2]| then t[I, J - 2]: both gathers clamp, so every element is |c[i, 1]|.
    Was |c[i, j]| on every backend: the tracer's gather-of-a-gather rewrite (Tracer::substitute)
    and fuse_loads both put the outer load's raw indices into the inner expression, dropping
    the outer clamp. Now the tracer rewrites only in-range indices and fuse_loads clamps (or
    wraps) the load's indices as its mode says."""
    @em.compile
    def f(c: em.f32[4, 2]):
        I, J = em.indices([4, 2])
        t = em.abs(c[I, J + 2])
        return t[I, J - 2]
    c = rng.standard_normal((4, 2)).astype(np.float32)
    want = np.repeat(np.abs(c[:, 1:2]), 2, axis=1)
    np.testing.assert_array_equal(f(c).numpy(), want)
    check_stages(f, (c,), [want])


def test_wrapped_gather_of_a_computed_value(backend, rng):
    """The fuse_loads half of the same bug with mode="wrap": the recomputed producer must be
    evaluated at the wrapped coordinate."""
    @em.compile
    def f(c: em.f32[5, 3]):
        I, J = em.indices([5, 3])
        t = c * 2.0 + 1.0
        return em.gather(t, (I + 7, J - 4), mode="wrap")
    c = rng.standard_normal((5, 3)).astype(np.float32)
    i, j = np.indices((5, 3))
    want = (c * 2.0 + 1.0)[(i + 7) % 5, (j - 4) % 3]
    np.testing.assert_allclose(f(c).numpy(), want, rtol=1e-6)
    check_stages(f, (c,), [want])


def test_indexing_with_more_than_64_items():
    """x[(None,) * 70 + (slice(None),)] wrote past a 64-entry stack array in Tracer::resolve
    (AddressSanitizer: stack-buffer-overflow). Such values work inside a program; a result has
    at most NumPy's 32 dimensions (a ShapeError naming the count, not NumPy's ValueError)."""
    @em.compile
    def f(x: em.f32[3]):
        y = x[(None,) * 70 + (slice(None),)]
        return em.reshape(y * 2.0, (3,))
    x = np.arange(3, dtype=np.float32) + 1
    np.testing.assert_array_equal(f(x).numpy(), 2 * x)

    @em.compile
    def g(x: em.f32[3]):
        return x[(None,) * 70 + (slice(None),)]
    with pytest.raises(em.ShapeError, match="71 dimensions; a result has at most 32"):
        g(x)


def test_scatter_value_still_broadcasts_like_numpy_where_it_is_unambiguous(rng):
    """The scatter alignment rule changes nothing when NumPy broadcasting writes one value per
    element: A[i, j] = v[j] over a [4, 3] grid stores v along the rows."""
    @em.compile
    def f(v: em.f32[3]):
        A = em.zeros([4, 3], em.f32)
        i, j = em.indices([4, 3])
        A[i, j] = v
        return A
    v = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_array_equal(f(v).numpy(), np.broadcast_to(v, (4, 3)))


def test_where_on_a_scalar_bool_stored_into_a_strided_slice(backend, rng):
    """Fuzzer seed 6022 (minimized): a select whose condition is a scalar bool argument, in a
    2-D kernel. Was a segfault on cpu: the printer's periodic-neighbour matcher
    (KernelPrinter::edge_select) read operand 0 of a condition that has none."""
    @em.compile
    def f(a0: em.f32[1, 1], s1: em.bool, a2: em.f32[1, 1]):
        buf1 = em.zeros((3, 3), em.f32)
        buf1[1::2, 1:-1] = -a0 + em.where(s1, a2, 0.5)
        return buf1
    a0 = rng.standard_normal((1, 1)).astype(np.float32)
    a2 = rng.standard_normal((1, 1)).astype(np.float32)
    for s1 in (False, True):
        want = np.zeros((3, 3), np.float32)
        want[1::2, 1:-1] = -a0 + (a2 if s1 else 0.5)
        np.testing.assert_array_equal(f(a0, s1, a2).numpy(), want)


def test_prefix_sum_of_an_index_along_a_size_one_axis(backend, rng):
    """Fuzzer F5 (seeds 56, 335, 1033, 1343, minimized): em.prefix_sum of an em.indices value
    whose scanned axis has length 1. Was an InternalError on every backend (verifier after
    fuse_kernels: "memory access to a non-memory value after fusion"): the scan kernel gathers
    from the index value and, its shape being the index's, cse shares the kernel's own index
    with it; fuse_kernels (Materializer::replace_use) then recomputed the index in the consumer
    kernel for every use, including the gather's memory operand, leaving a load from a value.
    Now a gather from a value is always made a gather from its buffer; only elementwise uses
    of an index are recomputed."""
    @em.compile
    def f():
        i, j, k = em.indices((1, 1, 1))
        return em.prefix_sum(i, axis=0)
    want = np.zeros((1, 1, 1), np.int32)
    np.testing.assert_array_equal(f().numpy(), want)
    check_stages(f, (), [want])

    @em.compile
    def g(a: em.i32[4, 1]):
        i, j = em.indices((4, 1))
        return em.prefix_sum(i, axis=1) + a, em.prefix_sum(j, axis=1) - a
    a = rng.integers(-50, 50, (4, 1)).astype(np.int32)
    i, j = np.indices((4, 1))
    want = [np.cumsum(i, axis=1) + a, np.cumsum(j, axis=1) - a]
    for got, w in zip(g(a), want):
        np.testing.assert_array_equal(got.numpy(), w)
    check_stages(g, (a,), want)


def test_shared_reciprocal_of_a_scalar_argument(backend, rng):
    """Fuzzer F6 (seed 519, minimized): several divisions by one scalar argument. Was an
    InternalError under EMBER_VERIFY=1 (verifier after share_reciprocals: "operand 1.0f =
    constant f32 1.0f is not visible here"): share_reciprocals put 1 / s right after s, which
    is among the arguments at the top of the program, before the constants (and so before
    its own 1.0f). Now the reciprocal goes after both s and the constant."""
    @em.compile
    def f(a: em.f32[1, 3], b: em.f32[1, 3], s: em.f32):
        return a + b / s

    @em.compile
    def g(a: em.f32[4, 5], b: em.f32[4, 5], s: em.f32):
        return a / s - b / s
    s = np.float32(1.7)
    for prog, shape, ref in ((f, (1, 3), lambda a, b: a + b / s), (g, (4, 5), lambda a, b: a / s - b / s)):
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape).astype(np.float32)
        want = ref(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(prog(a, b, s).numpy(), want, rtol=1e-5, atol=1e-6)
        check_stages(prog, (a, b, s), [want])


def test_none_index_of_a_scalar_value_adds_an_axis(backend):
    """Fuzzer F3 (seeds 103, 655, 1035): (a + b)[None] kept shape () (NumPy: (1,)): the
    tracer's gather of a rank-0 value returned the value itself. Now a uniform value gathered
    over a shape is spread over it (Tracer::gather_at)."""
    @em.compile
    def f(a: em.f32, b: em.f32):
        return (a + b)[None], a[None, None]
    x, y = f(1.5, 2.0)
    assert x.shape == (1,) and y.shape == (1, 1)
    assert float(x.numpy()[0]) == 3.5 and float(y.numpy()[0, 0]) == 1.5


def test_broadcast_of_a_value_folded_to_a_scalar_keeps_its_shape(backend):
    """Fuzzer F4 (seed 836): with i the coordinate of a size-1 axis, s + i folds to s when
    gathered at i = 0, so em.broadcast_to(s + i, (1, 2)) had shape () and a reduction over its
    axis 1 was a ShapeError on a valid program."""
    @em.compile
    def f(s: em.i32):
        i, = em.indices((1,))
        b = em.broadcast_to(s + i, (1, 2))
        return b, em.max(b, axis=1)
    b, m = f(5)
    np.testing.assert_array_equal(b.numpy(), [[5, 5]])
    np.testing.assert_array_equal(m.numpy(), [5])


def test_var_assigned_under_an_if_of_another_shape_is_a_shape_error_at_its_line():
    """Fuzzer F7 (seed 241): a var of shape [N] assigned inside em.if_ of a [1] condition was
    accepted by the tracer and tripped an internal check of the interpreter; the pipeline found
    it only later. Now the assignment is a ShapeError naming both shapes and the user's line."""
    @em.compile
    def f(x: em.f32["N"], c: em.bool[1]):  # noqa: F821
        v = em.var(x)
        with em.if_(c):
            v.val = x * 2.0
        return v.val
    with pytest.raises(em.ShapeError, match=r"var of shape \[N\] inside an em.if_ of shape \[1\].*test_regressions"):
        f(np.ones(4, np.float32), np.ones(1, bool))


def test_scatter_of_its_own_target_reads_the_whole_value_first(backend, rng):
    """Fuzzer F2 (seeds 426, 1107) was the reference's mistake, not Ember's: NumPy's a[p] = a
    assigns element by element from the array it is changing; Ember reads the value first (the
    scatter kernel is not fused with the read), which is NumPy's a[p] = a.copy()."""
    @em.compile
    def f(P: em.i32[17], A: em.f32[17]):
        A[P] = A * 2.0
    P = rng.permutation(17).astype(np.int32)
    A = rng.standard_normal(17).astype(np.float32)
    want = A.copy()
    want[P] = (A * 2.0).copy()
    f(P, A)
    np.testing.assert_array_equal(A, want)


def test_break_under_a_per_element_condition_in_a_host_loop_is_a_compile_error(backend, rng):
    """Found while differentiating early exits: em.break_() under a tensor em.if_ inside a host
    loop (scalar bounds) was accepted and then ignored (every element ran all iterations: 2.74
    where NumPy's per-element loop gives 2.26). It is a CompileError naming the fix; the same
    program with a per-element loop (bounds of the element shape) runs as NumPy does."""
    def body(x, bounds):
        p = em.var(x * 1.0)
        with em.loop(0, bounds):
            p.val = p.val * 0.9 + em.sin(p.val) * 0.7
            with em.if_(p.val > 2.0):
                em.break_()
            p.val = p.val + 0.01
        return p.val

    @em.compile
    def host(x: em.f32["N"]):  # noqa: F821
        return body(x, 12)
    x = np.array([0.3, 1.5, 1.9, 0.8, 2.5], np.float32)
    with pytest.raises(em.CompileError, match=r"per-element condition of shape \[N\] inside a host loop.*test_regressions"):
        host(x)

    @em.compile
    def per_element(x: em.f32["N"]):  # noqa: F821
        i, = em.indices(x.shape)
        return body(x, i * 0 + 12)
    want = []
    for p in x.astype(np.float64):
        for _ in range(12):
            p = p * 0.9 + np.sin(p) * 0.7
            if p > 2.0:
                break
            p += 0.01
        want.append(p)
    np.testing.assert_allclose(per_element(x).numpy(), want, rtol=1e-5)


def test_atomic_that_does_not_depend_on_the_unrolled_lane_runs_once_per_lane(backend):
    """Gradient fuzzer (seed 100637): unroll_small_dims emitted a node that does not depend on
    the unrolled axis once for all lanes; for an atomic add that dropped every lane but one
    (a gradient of 1.3 instead of 2.6). Atomics are now always emitted per lane."""
    @em.compile
    def f(x: em.f32[3]):
        H = em.zeros([1], em.f32)
        with em.kernel([3, 2]) as (i, j):
            em.atomic_add(H[0], x[i])      # the same add from both lanes j of each row
        return H
    np.testing.assert_array_equal(f(np.array([1, 2, 3], np.float32)).numpy(), [12.0])


def test_a_read_keeps_its_value_when_the_memory_is_written_after_it(backend):
    """Gradient fuzzer (seed 102605): y = A[...]; A[...] = new; em.flip(y) re-read A at the
    flipped coordinates (the tracer's gather-of-gather rewrite), after the write: zeros instead
    of y. A load of memory written since is now gathered as a value."""
    @em.compile
    def f(x: em.f32[4]):
        A = em.zeros([4], em.f32)
        A[:] = x
        y = A * 1.0
        A[:] = x * 0.0
        return em.flip(y, 0), em.flip(A[:], 0)
    y, z = f(np.arange(1, 5, dtype=np.float32))
    np.testing.assert_array_equal(y.numpy(), [4, 3, 2, 1])
    np.testing.assert_array_equal(z.numpy(), [0, 0, 0, 0])


def test_read_then_zero_of_an_element_next_to_other_stores(backend):
    """Gradient fuzzer (seed 102571; cpu only): in a kernel doing g = A[i]; B[i] = b; A[i] = 0;
    out[i] = g * cos(x[i]) (the reverse of a store), GCC 12.2's -O3 loop distribution moved the
    zeroing store ahead of the load: out was 0. The cpu backend compiles without it."""
    @em.compile
    def f(w0: em.f32[2, 1], w1: em.f32[2, 1], a3: em.f32[2, 1]):
        A = em.zeros([2, 1], em.f32)
        B = em.zeros([2, 1], em.f32)
        with em.kernel([2, 1]) as (i, j):
            em.atomic_add(A[i, j], w0[i, j])
            em.atomic_add(B[i, em.clamp(i, 0, 0)], w1[i, j])
        out1 = em.zeros([2, 1], em.f32)
        out2 = em.zeros([2, 1], em.f32)
        with em.kernel([2, 1]) as (i, j):
            b = B[i, j]
            a = A[i, j]
            out1[i, j] = b
            A[i, j] = 0.0
            out2[i, j] = a * em.cos(a3[i, j])
        return out1, out2
    w = np.array([[1.0], [2.0]], np.float32)
    out1, out2 = f(w, w * 3, w * 0.1)
    np.testing.assert_array_equal(out1.numpy(), [[3.0], [6.0]])
    np.testing.assert_allclose(out2.numpy(), w * np.cos(w * 0.1), rtol=1e-6)


def test_gradient_of_a_max_of_quotients_keeps_its_mask(backend):
    """Gradient fuzzer (seed 104956): the gradient of em.max over a / d recomputes a / d and
    compares it with the max; share_reciprocals turned that division (and the adjoint's g / d)
    into products with 1 / d, which differ in the last bit: no element equalled the max and
    the gradient was 0. Quotients compared for equality keep their division."""
    @em.compile
    def f(a: em.f32[1, 1, 3], d: em.f32[1, 1, 3]):
        return em.grad(em.sum(em.max(a / d, axis=(0,))), a)
    a = np.array([[[0.7, -1.3, 2.9]]], np.float32)
    d = np.array([[[0.3, 0.7, 1.9]]], np.float32)
    np.testing.assert_allclose(f(a, d).numpy(), 1.0 / d, rtol=1e-6)


def test_broadcast_of_a_scalar_under_a_tensor_if(backend):
    """Gradient fuzzer F9 (forward): em.broadcast_to(scalar, (3,)) under a tensor em.if_ made a
    [1]-shaped intermediate inside the [3] scope: ShapeError. A scalar is spread to the shape
    directly."""
    @em.compile
    def f(x: em.f32[3], c: em.bool[3]):
        v = em.var(x * 2.0)
        with em.if_(c):
            v.val = em.broadcast_to(em.f32(1.5), (3,))
        return v.val
    np.testing.assert_array_equal(f(np.ones(3, np.float32), np.array([1, 0, 1], bool)).numpy(), [1.5, 2, 1.5])


def test_reciprocal_of_a_shared_quotient(backend):
    """Gradient fuzzer G10: share_reciprocals crashed when a denominator it had collected was
    itself a division it replaced first (the gradient of 1 / (a / b) divides by a / b twice)."""
    @em.compile
    def f(a: em.f32[3], b: em.f32[3]):
        q = a / b
        return em.grad(em.sum(1.0 / q + 2.0 / q), [a, b])
    a = np.array([0.5, 1.5, -2.0], np.float32)
    b = np.array([1.25, -0.75, 3.0], np.float32)
    ga, gb = f(a, b)
    np.testing.assert_allclose(ga.numpy(), -3.0 * b / (a * a), rtol=1e-5)
    np.testing.assert_allclose(gb.numpy(), 3.0 / a, rtol=1e-5)


def test_u32_wraparound_in_the_host_plan(backend, rng):
    """A program with no kernels: `em.u32(a) % m` for a negative i32 `a`. Was: 4294967291 for
    u32(-5) % 7 on every backend (the interpreter was right): the host plan's expressions compute in
    64-bit signed integers and took the cast as keeping the value, so the remainder saw -5. Now a
    u32 value that can leave [0, 2^32) (a cast from i32, a difference, a negation) is wrapped with
    floormod(x, 2^32) and a u32 cast to i32 is sign-wrapped (export/plan_expr.cpp). Found by the
    fuzzer (seed 203137 of tests/fuzz/gen_isl.py's generator). Sums and products wrap too: seed
    1002151 compared (2^32 - 2) + 48 with a u32 and saw 2^32 + 46."""
    @em.compile
    def g(a: em.i32, m: em.u32, b: em.u32):
        return (em.u32(a) % m, (b - m) // em.u32(3), em.i32(b - m) // 3, em.u32(a) > m, -b % m,
                (b + m) > em.u32(100), (b * m) % em.u32(1000003), ~m * b + m > b)

    def u(x):
        return x % 2**32

    cases = [(-5, 7, 2), (5, 7, 20), (-2**31, 3, 0), (7, 1000000007, 4000000000), (3, 48, 2**32 - 2)]
    cases += [(int(rng.integers(-2**31, 2**31)), int(rng.integers(1, 2**32)), int(rng.integers(0, 2**32)))
              for _ in range(4)]
    for a, m, b in cases:
        got = [int(x.numpy()) for x in g(a, m, b)]
        want = [u(a) % m, u(b - m) // 3, ((u(b - m) ^ 2**31) - 2**31) // 3, int(u(a) > m), u(-b) % m,
                int(u(b + m) > 100), u(b * m) % 1000003, int(u(u(~m) * b + m) > b)]
        assert got == want, (a, m, b)


def test_a_sum_of_negative_zeros_is_negative_zero_everywhere(backend):
    """F10 (tests/fuzz/FINDINGS.md; seed 1424872): GPU drivers fold `0.0 + x` into x, so a sum
    started from +0.0 gave -0.0 for one term of -0.0 on the GPUs and +0.0 on the cpu. f32 sums now
    start from -0.0 (core/ir/eval.h, reduce_start): every backend gives the IEEE sum of the terms,
    -0.0 exactly when every term is -0.0, for sums, matmuls (one-term and longer) and means. An
    empty sum is +0.0 over a constant extent of 0 and -0.0 over a symbolic one (the start is not
    chosen at run time: that would be float math on the host)."""
    @em.compile
    def f(a: em.f32[1, 4], b: em.f32[3, 2], c: em.f32[2, 1], e: em.f32["N", 2]):  # noqa: F821
        return (em.bitcast(em.sum(a, axis=0), em.u32), em.bitcast(em.sum(b, axis=0), em.u32),
                em.bitcast(b @ c, em.u32), em.bitcast(em.mean(b, axis=1), em.u32),
                em.bitcast(em.sum(e, axis=0), em.u32), em.bitcast(em.sum(b[:, 0:0], axis=1), em.u32))

    a = np.array([[-0.0, 0.0, -1.0, 2.0]], np.float32)
    b = np.array([[-0.0, -0.0], [-0.0, 0.0], [-0.0, -0.0]], np.float32)
    c = np.array([[1.0], [-2.0]], np.float32)
    got = [x.numpy() for x in f(a, b, c, np.zeros((0, 2), np.float32))]
    neg, pos = 0x80000000, 0
    assert got[0].tolist() == [neg, pos, 0xBF800000, 0x40000000]
    assert got[1].tolist() == [neg, pos]                       # a column of -0.0s; one with a +0.0
    assert got[2].tolist() == [[pos], [neg], [pos]]            # rows: -0 + +0, -0 + -0, -0 + +0
    assert got[3].tolist() == [neg, pos, neg]
    assert got[4].tolist() == [neg, neg]                       # no terms, a symbolic extent: -0.0
    assert got[5].tolist() == [pos, pos, pos]                  # no terms, the constant extent 0: +0.0


def test_forwarded_var_reads_keep_the_cleanup_at_its_fixed_point(backend, monkeypatch):
    """Fuzzer, seed 5200856 (minimized), found on the branch that added simplify's var forwarding,
    before it was merged: an InternalError under EMBER_VERIFY=1 ("simplify changed the program
    after the cleanup reached its fixed point"). The forwarding then walked back at most 32 nodes
    from a read to the var's last set; the random draws' hash made the distance 36 until cse merged
    twins, and only a full simplify, not the one cse leaves to simplify again, saw the shorter
    walk. Forwarding is now one sweep over the program with no distance limit."""
    monkeypatch.setenv("EMBER_VERIFY", "1")

    @em.compile
    def f(a0: em.f32[3, 3, 1], a1: em.f32[3, 3, 1], a2: em.f32[3, 3, 1]):
        v4 = em.random.rand((3, 3, 1), 0) + a0 + (a1 + a2)
        return em.sum(v4, axis=(1, 0))

    @em.compile
    def draws(a0: em.f32[3, 3, 1]):
        return em.random.rand((3, 3, 1), 0) + 0.0 * a0

    a = np.ones((3, 3, 1), np.float32)
    want = np.sum(draws(a).numpy().astype(np.float64) + 3.0, axis=(1, 0))
    np.testing.assert_allclose(f(a, a, a).numpy(), want, rtol=1e-5)
