"""em.grad through control flow, on every backend, against float64 central differences of NumPy
references (tests/python/gradcheck.py):

- host level: em.loop with a runtime trip count (a damped pendulum stepped `steps` times: the
  gradient w.r.t. the initial state and the parameters; the same compiled gradient program run
  with other trip counts, 0 included), em.var updated in the loop, em.if_/em.else_ on scalar
  conditions (both branches through one program), em.break_/em.continue_ with a data-dependent
  exit;
- per element: em.if_ on tensor conditions, loops inside em.kernel bodies with em.break_ and
  data-dependent exits (every thread its own trip count), explicit em.kernel bodies;
- the peers' known wrong-gradient cases, written in Ember with the right answer: Warp's dynamic
  loop (docs, "Dynamic Loops": a product over a runtime trip count, where Warp gives [32, 8, 2]
  instead of [4, 4, 4]), nested dynamic loops whose inner trip count depends on the outer counter
  (Warp #1293, Taichi #3003) and nested bounded loops (Slang #13000: a dense layer as two nested
  loops, wrong input gradients).

Inputs with data-dependent branches or exits are drawn so that every comparison that decides one
is at least a margin away from flipping (checked by the references): central differences then
see the same branches and trip counts as the f32 program.
"""
import numpy as np
import pytest

import ember as em
from gradcheck import away, assert_close, check_grad, run, seed_of, tolerance

DT = 0.05


def _rng(name):
    return np.random.default_rng(seed_of(name))


# ---- host loops with a runtime trip count ---------------------------------------------------------
def _pendulum(p0, v0, k, c, steps):
    p, v = em.var(p0), em.var(v0)
    with em.loop(steps):
        a = -k * em.sin(p.val) - c * v.val
        v.val = v.val + DT * a
        p.val = p.val + DT * v.val
    return p.val, v.val


def _pendulum_ref(p0, v0, k, c, steps):
    p, v = p0.copy(), v0.copy()
    for _ in range(steps):
        a = -k * np.sin(p) - c * v
        v = v + DT * a
        p = p + DT * v
    return p, v


def test_host_loop_damped_pendulum_runtime_steps(backend):
    """N damped pendulums stepped `steps` times (a runtime argument): d(p, v)/d(p0, v0, k, c) with
    steps = 37, then the same compiled programs with steps = 1500 (a long tape), 1 and 0 (identity
    for p0, v0, zeros for k, c)."""
    r = _rng("pendulum")
    args = {"p0": away(r, (6,), -1.5, 1.5), "v0": away(r, (6,), -1, 1), "k": away(r, (6,), 2, 8), "c": 0.3,
            "steps": 37}
    runs = [dict(args, steps=1500), dict(args, steps=1), dict(args, steps=0)]
    check_grad(backend, _pendulum, _pendulum_ref, args, name="pendulum", runs=runs)


def _counter_var(x, y, steps):
    s = em.var(x * 0.5)
    acc = em.var(0.0)
    with em.loop(1, steps, 2) as t:       # t = 1, 3, 5, ... < steps
        s.val = s.val * em.tanh(x) + em.f32(t) * y * 0.1
        acc.val += em.sum(s.val * s.val) * em.f32(t)
    return s.val, acc.val


def _counter_var_ref(x, y, steps):
    s, acc = x * 0.5, 0.0
    for t in range(1, steps, 2):
        s = s * np.tanh(x) + t * y * 0.1
        acc = acc + np.sum(s * s) * t
    return s, acc


def test_host_loop_vars_with_counter_and_bounds(backend):
    """A tensor var and a scalar var updated in em.loop(1, steps, 2), reading the counter."""
    r = _rng("counter")
    args = {"x": away(r, (2, 3), -1.5, 1.5), "y": away(r, (2, 3), -1, 1), "steps": 12}
    check_grad(backend, _counter_var, _counter_var_ref, args, name="counter_var", runs=[dict(args, steps=2)])


def _nested_host(x, n):
    v = em.var(x)
    with em.loop(n) as i:
        with em.loop(i + 1):              # the inner trip count depends on the outer counter
            v.val = em.sin(v.val) * 1.1 + x * 0.1
    return v.val


def _nested_host_ref(x, n):
    v = x.copy()
    for i in range(n):
        for _ in range(i + 1):
            v = np.sin(v) * 1.1 + x * 0.1
    return v


def test_host_nested_loops_with_dependent_trip_count(backend):
    r = _rng("nested_host")
    check_grad(backend, _nested_host, _nested_host_ref, {"x": away(r, (5,), -2, 2), "n": 4}, name="nested_host")


def _taichi_3003(x):
    y = em.var(0.0)
    with em.loop(2):
        with em.loop(3):
            y.val += x
        with em.loop(3):
            y.val += x
    return y.val


def test_taichi_3003_nested_loops_accumulating(backend):
    """Taichi #3003 ("silent wrong result when for loops are nested in ti.Tape"): y += x in two
    inner loops of 3 inside an outer loop of 2: dy/dx = 12."""
    check_grad(backend, _taichi_3003, lambda x: 12.0 * x, {"x": 0.7}, name="taichi_3003")

    @em.compile
    def f(x: em.f32):
        return em.grad(_taichi_3003(x), x)
    (g,) = run(f, 0.7)
    assert float(g) == 12.0, f"dy/dx = {float(g)}, expected 12"


# ---- host em.if_ / em.else_ on scalars, break / continue ----------------------------------------
def _host_if(x, y, s):
    v = em.var(x)
    with em.if_(s > 0.0):
        v.val = em.sin(v.val) * y
    with em.else_():
        v.val = v.val * v.val * s
    with em.if_(em.sum(v.val) > 0.0):     # a condition computed from the data
        v.val = v.val * 2.0 + y
    return v.val


def _host_if_ref(x, y, s):
    v = np.sin(x) * y if s > 0 else x * x * s
    if np.sum(v) > 0:
        v = v * 2.0 + y
    return v


def test_host_if_else_scalar_conditions(backend):
    """One compiled program, both branches: s = 0.7 (then) and s = -0.7 (else); the data
    condition sum(v) > 0 is well away from 0 in every run (checked)."""
    r = _rng("host_if")
    x, y = away(r, (7,), -2, 2), away(r, (7,), 0.2, 1.5)
    runs = [{"x": x, "y": y, "s": s} for s in (0.7, -0.7)]
    for a in runs:
        v0 = np.sin(x) * y if a["s"] > 0 else x * x * a["s"]
        assert abs(np.sum(v0)) > 0.1, "the data condition is too close to flipping"
    check_grad(backend, _host_if, _host_if_ref, runs[0], name="host_if", runs=runs[1:])


def _host_loop_if(x, y, steps):
    v = em.var(x)
    with em.loop(steps) as t:
        with em.if_(t % 3 == 0):
            v.val = v.val * y
        with em.else_():
            v.val = em.sin(v.val) + x * 0.5
    return v.val


def _host_loop_if_ref(x, y, steps):
    v = x.copy()
    for t in range(steps):
        v = v * y if t % 3 == 0 else np.sin(v) + x * 0.5
    return v


def test_host_if_else_inside_a_runtime_loop(backend):
    r = _rng("host_loop_if")
    args = {"x": away(r, (4,), -2, 2), "y": away(r, (4,), -1.2, 1.2), "steps": 8}
    check_grad(backend, _host_loop_if, _host_loop_if_ref, args, name="host_loop_if")


def _host_break(x, y, steps, limit):
    v = em.var(x)
    with em.loop(steps) as t:
        with em.if_(t % 4 == 1):
            em.continue_()
        v.val = v.val * 1.3 + y * em.f32(t) * 0.1
        with em.if_(em.sum(v.val * v.val) > limit):
            em.break_()
    return v.val


def _host_break_ref(x, y, steps, limit, margins=None):
    v = x.copy()
    for t in range(steps):
        if t % 4 == 1:
            continue
        v = v * 1.3 + y * t * 0.1
        q = np.sum(v * v)
        if margins is not None:
            margins.append(abs(q - limit) / limit)
        if q > limit:
            break
    return v


def test_host_break_continue_data_dependent_exit(backend):
    """A host loop that skips every 4th step (continue) and leaves when sum(v^2) passes a limit
    (break, after a data-dependent number of steps; every test of the condition is >= 2% away from
    the limit, checked); the same program with limits that leave at the first step and never."""
    r = _rng("host_break")
    x, y = away(r, (5,), 0.3, 1.0), away(r, (5,), 0.2, 1.0)
    args = {"x": x, "y": y, "steps": 50, "limit": 40.0}
    runs = [dict(args, limit=1.0), dict(args, limit=1e9)]   # leaves at the first step; never leaves
    for a in [args] + runs:
        margins = []
        _host_break_ref(x.astype(np.float64), y.astype(np.float64), 50, a["limit"], margins)
        assert min(margins) > 0.02, margins
    check_grad(backend, _host_break, lambda x, y, s, l: _host_break_ref(x, y, s, l), args, name="host_break",
               runs=runs)


# ---- per-element control flow ----------------------------------------------------------------
def _tensor_if(c, x, y):
    v = em.var(x)
    with em.if_(c > 0.0):
        v.val = em.sin(x) * y
        with em.if_(x > 0.5):             # nested, per element
            v.val = v.val * x
    with em.else_():
        v.val = x * x - y
    return v.val


def _tensor_if_ref(c, x, y):
    v = np.where(c > 0, np.sin(x) * y, x * x - y)
    return np.where((c > 0) & (x > 0.5), v * x, v)


def test_tensor_if_else_at_host_level(backend):
    r = _rng("tensor_if")
    args = {"c": away(r, (3, 4), -2, 2, lambda c: np.abs(c) < 0.1),
            "x": away(r, (3, 4), -2, 2, lambda x: np.abs(x - 0.5) < 0.05), "y": away(r, (3, 4), -2, 2)}
    check_grad(backend, _tensor_if, _tensor_if_ref, args, name="tensor_if")


def _kernel_if(x, y):
    out = em.zeros([x.shape[0]], em.f32)
    with em.kernel(x.shape[0]) as i:
        a = x[i]
        with em.if_(a > 0.0):
            out[i] = em.exp(a) * y[i]
        with em.else_():
            out[i] = a * a * y[i + 1]     # a neighbour (clamped at the end)
    return out


def _kernel_if_ref(x, y):
    yn = y[np.minimum(np.arange(len(y)) + 1, len(y) - 1)]
    return np.where(x > 0, np.exp(x) * y, x * x * yn)


def test_tensor_if_else_in_a_kernel(backend):
    r = _rng("kernel_if")
    args = {"x": away(r, (9,), -1.5, 1.5, lambda x: np.abs(x) < 0.1), "y": away(r, (9,), -2, 2)}
    check_grad(backend, _kernel_if, _kernel_if_ref, args, name="kernel_if")


def _explicit_kernel(x, y):
    n, m = x.shape
    out = em.zeros([n, m], em.f32)
    tmp = em.zeros([n], em.f32)
    with em.kernel((n, m)) as (i, j):
        a = x[i, j] * y[j]
        b = em.sin(x[i, j + 1]) + y[j - 1] * y[j - 1]
        out[i, j] = a * b
    rows = em.sum(out, axis=1)
    with em.kernel(n) as i:
        tmp[i] = rows[i] * x[i, 0]
    return out, tmp


def _explicit_kernel_ref(x, y):
    n, m = x.shape
    j = np.arange(m)
    a = x * y
    b = np.sin(x[:, np.minimum(j + 1, m - 1)]) + y[np.maximum(j - 1, 0)] ** 2
    out = a * b
    return out, np.sum(out, axis=1) * x[:, 0]


def test_explicit_kernel_bodies(backend):
    """A 2-D kernel with clamped neighbour loads and a second kernel reading its result."""
    r = _rng("explicit_kernel")
    args = {"x": away(r, (3, 4), -2, 2), "y": away(r, (4,), -2, 2)}
    check_grad(backend, _explicit_kernel, _explicit_kernel_ref, args, name="explicit_kernel")


def _escape(x, c, iters):
    n = x.shape[0]
    out = em.zeros([n], em.f32)
    cnt = em.zeros([n], em.f32)
    with em.kernel(n) as i:
        z = em.var(x[i])
        k = em.var(0.0)
        with em.loop(iters) as t:
            with em.if_((t + i) % 5 == 3):    # per-thread continue
                em.continue_()
            z.val = z.val * (1.0 + c[i]) + 0.1 * em.sin(z.val)
            k.val += 1.0
            with em.if_(z.val > 4.0):         # data-dependent exit
                em.break_()
        out[i] = z.val * z.val
        cnt[i] = k.val
    return out, cnt


def _escape_ref(x, c, iters, margins=None, counts=None):
    out, cnt = np.zeros(len(x)), np.zeros(len(x))
    for i in range(len(x)):
        z, k = x[i], 0
        for t in range(iters):
            if (t + i) % 5 == 3:
                continue
            z = z * (1.0 + c[i]) + 0.1 * np.sin(z)
            k += 1
            if margins is not None:
                margins.append(abs(z - 4.0))
            if z > 4.0:
                break
        out[i] = z * z
        cnt[i] = k
        if counts is not None:
            counts.append(k)
    return out, cnt


def test_kernel_loop_break_continue_per_thread_trip_counts(backend):
    """Each thread iterates z <- z (1 + c) + 0.1 sin z until z > 4 (break), skipping the steps
    where (t + i) % 5 == 3 (continue): every thread runs a different number of steps (checked),
    and every exit test is >= 0.02 from flipping. The step count (a float the loop counts) has a
    zero gradient."""
    r = _rng("escape")
    for _ in range(100):
        x, c = away(r, (10,), 0.5, 1.5), away(r, (10,), 0.05, 0.6)
        margins, counts = [], []
        _escape_ref(x.astype(np.float64), c.astype(np.float64), 60, margins, counts)
        if min(margins) > 0.02 and len(set(counts)) >= 6:
            break
    assert min(margins) > 0.02 and len(set(counts)) >= 6 and max(counts) < 60, (margins, counts)
    check_grad(backend, _escape, lambda x, c, it: _escape_ref(x, c, it), {"x": x, "c": c, "iters": 60}, name="escape")


def _data_trip_count(x, n):
    m = x.shape[0]
    out = em.zeros([m], em.f32)
    with em.kernel(m) as i:
        v = em.var(x[i])
        with em.loop(n[i]) as k:          # the trip count is an input element
            v.val = v.val * em.cos(v.val) + em.f32(k) * 0.1
        out[i] = v.val
    return out


def _data_trip_count_ref(x, n):
    out = x.copy()
    for i in range(len(x)):
        for k in range(n[i]):
            out[i] = out[i] * np.cos(out[i]) + k * 0.1
    return out


def test_kernel_loop_trip_count_from_data(backend):
    r = _rng("data_trip")
    args = {"x": away(r, (8,), -1.5, 1.5), "n": np.array([0, 1, 5, 2, 7, 3, 0, 4], np.int32)}
    check_grad(backend, _data_trip_count, _data_trip_count_ref, args, name="data_trip_count")


# ---- the peers' known wrong-gradient cases -----------------------------------------------------
def _warp_dynamic_loop(x, iters):
    t_, _ = x.shape
    out = em.zeros([t_], em.f32)
    with em.kernel(t_) as t:
        prod = em.var(1.0)
        with em.loop(iters) as i:         # a dynamic loop: the trip count is a runtime argument
            prod.val = prod.val * x[t, i]
        out[t] = prod.val
    return out


def _warp_dynamic_loop_ref(x, iters):
    return np.prod(x[:, :iters], axis=1)


def test_warp_dynamic_loop_product(backend):
    """Warp's documented dynamic-loop limitation (docs "Differentiability: Dynamic Loops"):
    prod *= x[i] over range(iters) with iters a runtime value; at x = 2, iters = 3 the gradient is
    [4, 4, 4] (Warp gives [32, 8, 2]: the adjoint reads the final prod instead of each
    iteration's). Here per thread, with random x and iters 3 and 5 through one program, and the
    literal case; the unused columns get zeros."""
    r = _rng("warp_dynamic")
    x = away(r, (4, 6), 0.5, 1.5, sign=True)
    check_grad(backend, _warp_dynamic_loop, _warp_dynamic_loop_ref, {"x": x, "iters": 3}, name="warp_dynamic_loop",
               runs=[{"x": x, "iters": 5}])

    @em.compile
    def f(x: em.f32[1, 3], iters: em.i32):
        return em.grad(em.sum(_warp_dynamic_loop(x, iters)), x)
    (g,) = run(f, np.full((1, 3), 2.0, np.float32), 3)
    np.testing.assert_array_equal(g, [[4.0, 4.0, 4.0]])


def test_warp_dynamic_loop_product_long(backend):
    """The same with 3000 iterations per thread (x near 1 keeps the product finite): whatever
    the reverse pass keeps per iteration must scale with the runtime trip count."""
    r = _rng("warp_dynamic_long")
    x = (1.0 + r.uniform(-1e-3, 1e-3, (2, 3000))).astype(np.float32)
    check_grad(backend, _warp_dynamic_loop, _warp_dynamic_loop_ref, {"x": x, "iters": 3000}, name="warp_dynamic_long")


def _warp_dynamic_loop_host(x, iters):
    prod = em.var(em.zeros([x.shape[0]], em.f32) + 1.0)
    with em.loop(iters) as i:
        prod.val = prod.val * x[:, i]
    return prod.val


def test_warp_dynamic_loop_product_at_host_level(backend):
    """The same product as a host loop over tensor steps."""
    r = _rng("warp_dynamic_host")
    x = away(r, (4, 6), 0.5, 1.5, sign=True)
    check_grad(backend, _warp_dynamic_loop_host, _warp_dynamic_loop_ref, {"x": x, "iters": 4},
               name="warp_dynamic_loop_host", runs=[{"x": x, "iters": 6}])


def _nested_dynamic(a, x, starts, nseg):
    t_ = x.shape[0]
    out = em.zeros([t_], em.f32)
    with em.kernel(t_) as t:
        q = em.var(x[t, 0])
        with em.loop(nseg) as j:
            with em.loop(starts[j], starts[j + 1]) as i:   # inner range from the outer counter
                q.val = q.val * em.cos(a[t, i]) + em.sin(a[t, i]) * 0.5
            with em.loop(j + 1) as i:                      # inner trip count = outer counter + 1
                q.val = q.val + x[t, i] * q.val * 0.2
        out[t] = q.val
    return out


def _nested_dynamic_ref(a, x, starts, nseg):
    out = np.zeros(x.shape[0])
    for t in range(x.shape[0]):
        q = x[t, 0]
        for j in range(nseg):
            for i in range(starts[j], starts[j + 1]):
                q = q * np.cos(a[t, i]) + np.sin(a[t, i]) * 0.5
            for i in range(j + 1):
                q = q + x[t, i] * q * 0.2
        out[t] = q
    return out


def test_nested_dynamic_loops_warp_1293_taichi_3003(backend):
    """Nested dynamic loops whose inner ranges come from the outer counter: a chain of joint
    rotations over segments starts[j]..starts[j+1] (Warp #1293: the gradient of the outer
    variable came out 2x), then a second inner loop of j + 1 trips accumulating into the same
    value (Taichi #3003)."""
    r = _rng("nested_dynamic")
    args = {"a": away(r, (3, 7), -1.5, 1.5), "x": away(r, (3, 4), -1, 1),
            "starts": np.array([0, 2, 3, 7, 7], np.int32), "nseg": 4}
    check_grad(backend, _nested_dynamic, _nested_dynamic_ref, args, name="nested_dynamic",
               runs=[dict(args, nseg=2)])


H1 = 6  # hidden width: > 4, so the loops over it are not unrolled (unroll_loops: <= 4 trips)


def _mlp(x, W1, b1, W2, b2):
    bsz = x.shape[0]
    out = em.zeros([bsz, 2], em.f32)
    h = em.zeros([bsz, H1], em.f32)
    with em.kernel(bsz) as s:
        with em.loop(H1) as j:            # nested bounded loops: a dense layer
            acc = em.var(b1[j])
            with em.loop(3) as i:
                acc.val += W1[j, i] * x[s, i]
            h[s, j] = em.tanh(acc.val)
        with em.loop(2) as j:
            acc2 = em.var(b2[j])
            with em.loop(H1) as i:
                acc2.val += W2[j, i] * h[s, i]
            out[s, j] = acc2.val
    return out


def _mlp_ref(x, W1, b1, W2, b2):
    return np.tanh(x @ W1.T + b1) @ W2.T + b2


def test_nested_bounded_loops_mlp_slang_13000(backend):
    """Slang #13000: bwd_diff through a dense layer written as two nested [MaxIters] loops gave
    wrong input gradients (right with [ForceUnroll]), so every upstream layer's weights got wrong
    gradients. A 3 -> 6 -> 2 MLP per sample in a kernel with nested constant-bound em.loops:
    gradients w.r.t. the input and both layers' weights and biases."""
    r = _rng("mlp")
    args = {"x": away(r, (4, 3), -1, 1), "W1": away(r, (H1, 3), -1, 1), "b1": away(r, (H1,), -0.5, 0.5),
            "W2": away(r, (2, H1), -1, 1), "b2": away(r, (2,), -0.5, 0.5)}
    check_grad(backend, _mlp, _mlp_ref, args, name="mlp_nested_loops")


def test_grad_of_a_kernel_result_wrt_an_intermediate_in_a_host_loop(backend):
    """em.grad w.r.t. a var (its value where it was made) through a host loop with a runtime trip
    count: the loop's Jacobian power applied to dy."""
    r = _rng("var_loop")
    x, w = away(r, (5,), -1, 1), away(r, (5,), 0.5, 1.5)

    @em.compile
    def f(x: em.f32[5], w: em.f32[5], steps: em.i32):
        v = em.var(x * 0.5)
        with em.loop(steps):
            v.val = em.sin(v.val) * 1.2 + x * 0.1
        return em.grad(em.sum(w * v.val), v)

    def L(u, steps=6):
        for _ in range(steps):
            u = np.sin(u) * 1.2 + x.astype(np.float64) * 0.1
        return np.sum(w * u)
    from gradcheck import central_diff
    (g,) = run(f, x, w, 6)
    assert_close(g, central_diff(L, [x.astype(np.float64) * 0.5], 0), tolerance(backend), "dL/dv")


# ---- more peers' cases: overwrites, continue/argmax, pre-loop values -------------------------------
def _warp_overwrite_intra(a):
    b = em.zeros([a.shape[0]], em.f32)
    with em.kernel(a.shape[0]) as t:
        b[t] = a[t] * a[t]
        a[t] = 1.0            # overwrites the input it read
    return b


def test_warp_intra_kernel_overwrite(backend):
    """Warp docs ("Array Overwrites", B: intra-kernel overwrite): b[t] = a[t]^2 then a[t] = 1 in the
    same kernel; d sum(b)/da = 2a = [2, 4, 6] for a = [1, 2, 3] (Warp gives [2, 2, 2]: its adjoint
    reads the overwritten a). x is a's value on entry."""
    check_grad(backend, _warp_overwrite_intra, lambda a: a * a, {"a": np.array([1.0, 2.0, 3.0], np.float32)},
               name="warp_overwrite_intra")
    r = _rng("warp_overwrite_intra")
    check_grad(backend, _warp_overwrite_intra, lambda a: a * a, {"a": away(r, (7,), -2, 2)},
               name="warp_overwrite_intra_random")


def _warp_overwrite_inter(a, c):
    b = a * a                 # kernel 1 reads a
    a[:] = c                  # kernel 2 overwrites a
    return b * 1.0, a * 0.5   # the loss reads b (a's old value) and the new a


def _warp_overwrite_inter_ref(a, c):
    return a * a, c * 0.5


def test_warp_inter_kernel_overwrite(backend):
    """Warp docs ("Array Overwrites", A: inter-kernel overwrite): b = a^2, then a is overwritten
    with c; d sum(b)/da = 2a (Warp gives -2c: the adjoint of the square reads the new a), and the
    gradient of the new a's use goes to c."""
    r = _rng("warp_overwrite_inter")
    args = {"a": np.array([1.0, 2.0, 3.0], np.float32), "c": np.array([-1.0, -2.0, -3.0], np.float32)}
    check_grad(backend, _warp_overwrite_inter, _warp_overwrite_inter_ref, args, name="warp_overwrite_inter")
    args = {"a": away(r, (6,), -2, 2), "c": away(r, (6,), -2, 2)}
    check_grad(backend, _warp_overwrite_inter, _warp_overwrite_inter_ref, args, name="warp_overwrite_inter_random")


def _argmax_continue(cm, x):
    n = x.shape[0]
    p_, q_ = cm.shape
    out = em.zeros([n], em.f32)
    with em.kernel(n) as t:
        m = em.var(-1e20)
        with em.loop(p_) as p:
            with em.loop(q_) as q:
                c = cm[p, q]
                with em.if_(c == 0.0):
                    em.continue_()
                v = x[t] * c * (em.f32(p) + em.f32(q) + 2.0)
                with em.if_(v > m):
                    m.val = v
        out[t] = m.val
    return out


def _argmax_continue_ref(cm, x):
    d = cm * (np.arange(cm.shape[0])[:, None] + np.arange(cm.shape[1])[None, :] + 2.0)
    live = cm != 0
    return np.array([np.max((xt * d)[live]) for xt in x])


def test_warp_1552_continue_in_an_argmax_loop(backend):
    """Warp #1552: the adjoint of `continue` in a dynamic loop computing a max gave every thread
    the gradient of the same (last) iteration. Threads with x > 0 and x < 0 select different
    (p, q); zeros in cm are skipped by continue. dout/dx = the winner's c * (p + q + 2), dout/dcm
    nonzero only at each thread's winner."""
    r = _rng("argmax_continue")
    for _ in range(100):
        cm = away(r, (4, 5), 0.3, 1.5, sign=True)
        cm[r.uniform(size=cm.shape) < 0.3] = 0.0
        x = away(r, (6,), 0.3, 1.5, sign=True)
        d = (cm * (np.arange(4)[:, None] + np.arange(5)[None, :] + 2.0))[cm != 0]
        if np.min(np.diff(np.sort(d))) > 0.05 and (x > 0).any() and (x < 0).any():  # no ties, both signs
            break
    check_grad(backend, _argmax_continue, _argmax_continue_ref, {"cm": cm, "x": x}, name="argmax_continue")


def _pre_loop(x, n):
    b = x * 2.0               # made before the loop, used after it
    acc = em.var(em.zeros([x.shape[0]], em.f32) + 5.0)
    with em.loop(n):
        acc.val += x
    return acc.val * b


def test_warp_1694_pre_loop_value_used_after_a_dynamic_loop(backend):
    """Warp #1694: the adjoint of a value made before a dynamic loop and used after it was
    silently zero (or read the accumulator's initializer): out = (5 + n x) * 2x, d/dx = 10 + 4 n x."""
    r = _rng("pre_loop")
    check_grad(backend, _pre_loop, lambda x, n: (5.0 + n * x) * 2 * x, {"x": away(r, (5,), -2, 2), "n": 3},
               name="pre_loop", runs=[{"x": away(r, (5,), -2, 2), "n": 0}])


# ---- loops that write memory, overwrite buffers, or differentiate inside ---------------------------
def _trajectory(x, v0, steps):
    n = x.shape[0]
    traj = em.zeros([n, 8], em.f32)
    with em.kernel(n) as i:
        p = em.var(x[i])
        v = em.var(v0[i])
        with em.loop(steps) as k:
            v.val = v.val - DT * 4.0 * em.sin(p.val)
            p.val = p.val + DT * v.val
            traj[i, k] = p.val * p.val         # a store in every iteration
    return traj


def _trajectory_ref(x, v0, steps):
    traj = np.zeros((len(x), 8))
    p, v = x.copy(), v0.copy()
    for k in range(steps):
        v = v - DT * 4.0 * np.sin(p)
        p = p + DT * v
        traj[:, k] = p * p
    return traj


def test_kernel_loop_storing_every_iteration(backend):
    """A per-thread loop storing its state into traj[i, k] at every step (a recorded
    trajectory): every stored value's gradient flows back through the loop."""
    r = _rng("trajectory")
    args = {"x": away(r, (5,), -1.5, 1.5), "v0": away(r, (5,), -1, 1), "steps": 8}
    check_grad(backend, _trajectory, _trajectory_ref, args, name="trajectory", runs=[dict(args, steps=3)])


def _smooth(x, steps):
    n = x.shape[0]
    u = em.zeros([n], em.f32)
    u[:] = x
    tmp = em.zeros([n], em.f32)
    with em.loop(steps):
        with em.kernel(n) as i:
            tmp[i] = 0.25 * em.gather(u, i - 1, mode="wrap") + 0.5 * u[i] * em.cos(u[i]) \
                + 0.25 * em.gather(u, i + 1, mode="wrap")
        with em.kernel(n) as i:
            u[i] = tmp[i]             # the same buffers are overwritten every step
    return u


def _smooth_ref(x, steps):
    u = x.copy()
    for _ in range(steps):
        u = 0.25 * np.roll(u, 1) + 0.5 * u * np.cos(u) + 0.25 * np.roll(u, -1)
    return u


def test_host_loop_overwriting_buffers_every_step(backend):
    """A nonlinear smoothing step ping-ponged between two buffers in a host loop of `steps`
    (runtime) iterations: each step's values must be kept (or recomputed) for the reverse pass,
    as Warp's docs require of the user (one array per step)."""
    r = _rng("smooth")
    args = {"x": away(r, (7,), -1.5, 1.5), "steps": 6}
    check_grad(backend, _smooth, _smooth_ref, args, name="smooth", runs=[dict(args, steps=1)])


def _descend(p0, A, b, steps):
    p = em.var(p0)
    with em.loop(steps):
        r = A @ p.val - b
        loss = em.sum(r * r) + em.sum(em.sin(p.val))
        p.val = p.val - 0.05 * em.grad(loss, p)   # em.grad inside the loop (w.r.t. p at the body's start)
    return p.val


def _descend_ref(p0, A, b, steps):
    p = p0.copy()
    for _ in range(steps):
        r = A @ p - b
        p = p - 0.05 * (2 * A.T @ r + np.cos(p))
    return p


def test_gradient_descent_in_a_loop_and_its_meta_gradient(backend):
    """Gradient descent inside the program (em.grad in the loop body), and em.grad of the result
    w.r.t. the start point, the matrix and the target: second derivatives through a runtime loop."""
    r = _rng("descend")
    args = {"p0": away(r, (3,), -1, 1), "A": away(r, (4, 3), -0.7, 0.7), "b": away(r, (4,), -1, 1), "steps": 5}
    check_grad(backend, _descend, _descend_ref, args, name="descend")


def test_jvp_and_hvp_through_a_runtime_loop(backend):
    """Forward mode and a Hessian-vector product through the pendulum loop, against directional
    central differences of the reference (and of its central-difference gradient for H v)."""
    r = _rng("jvp_loop")
    p0, v0, k, dp = away(r, (4,), -1, 1), away(r, (4,), -1, 1), away(r, (4,), 2, 6), away(r, (4,), -1, 1)
    w = away(r, (4,), 0.5, 1.5)

    @em.compile
    def f(p0: em.f32[4], v0: em.f32[4], k: em.f32[4], dp: em.f32[4], w: em.f32[4], steps: em.i32):
        p, v = _pendulum(p0, v0, k, 0.2, steps)
        L = em.sum(w * p * p)
        g = em.grad(L, p0)
        return em.jvp(p, p0, dp), g, em.grad(g, p0, dp)

    jv, g, hv = run(f, p0, v0, k, dp, w, 9)
    p064, v064, k64, dp64 = (a.astype(np.float64) for a in (p0, v0, k, dp))
    c = float(np.float32(0.2))

    def P(p0):
        return _pendulum_ref(p0, v064, k64, c, 9)[0]

    def G(p0):
        from gradcheck import central_diff
        return central_diff(lambda q: np.sum(w * P(q) ** 2), [p0], 0, step=1e-4)
    h = 1e-5
    rt = tolerance(backend)
    assert_close(jv, (P(p064 + h * dp64) - P(p064 - h * dp64)) / (2 * h), rt, "jvp through the loop")
    assert_close(g, G(p064), rt, "grad through the loop")
    h2 = 1e-3  # G is itself a central difference (error ~1e-8): a larger outer step keeps H v to ~1e-6
    assert_close(hv, (G(p064 + h2 * dp64) - G(p064 - h2 * dp64)) / (2 * h2), 10 * rt, "H v through the loop")


def _countdown(x, n):
    v = em.var(x)
    with em.loop(n, 0, -1) as k:      # k = n, n - 1, ..., 1
        v.val = em.sin(v.val) * em.f32(k) * 0.3 + x
    return v.val


def _countdown_ref(x, n):
    v = x.copy()
    for k in range(n, 0, -1):
        v = np.sin(v) * k * 0.3 + x
    return v


def test_host_loop_with_a_negative_step(backend):
    r = _rng("countdown")
    check_grad(backend, _countdown, _countdown_ref, {"x": away(r, (4,), -1, 1), "n": 5}, name="countdown")


# ---- harder per-thread and grid-level control flow ----------------------------------------------
def _inner_break(x, y):
    n = x.shape[0]
    out = em.zeros([n], em.f32)
    with em.kernel(n) as i:
        acc = em.var(x[i])
        with em.loop(4) as j:
            with em.loop(12) as k:
                acc.val = acc.val * 1.15 + y[(i + j + k) % 5] * 0.1
                with em.if_(acc.val > 2.0 + em.f32(j)):   # leaves the inner loop only
                    em.break_()
            acc.val = acc.val * 0.6
        out[i] = acc.val
    return out


def _inner_break_ref(x, y, margins=None):
    out = np.zeros(len(x))
    for i in range(len(x)):
        acc = x[i]
        for j in range(4):
            for k in range(12):
                acc = acc * 1.15 + y[(i + j + k) % 5] * 0.1
                if margins is not None:
                    margins.append(abs(acc - (2.0 + j)))
                if acc > 2.0 + j:
                    break
            acc = acc * 0.6
        out[i] = acc
    return out


def test_kernel_nested_loops_with_an_inner_break(backend):
    """em.break_ leaves the inner loop only; the outer loop goes on. Every thread exits its inner
    loops at different k (margins >= 0.01, checked)."""
    r = _rng("inner_break")
    for _ in range(200):
        x, y = away(r, (6,), 0.2, 1.5), away(r, (5,), 0.1, 1.0)
        m = []
        _inner_break_ref(x.astype(np.float64), y.astype(np.float64), m)
        if min(m) > 0.01:
            break
    assert min(m) > 0.01
    check_grad(backend, _inner_break, lambda x, y: _inner_break_ref(x, y), {"x": x, "y": y}, name="inner_break")


def _host_loop_tensor_if(x, y, steps):
    v = em.var(x)
    with em.loop(steps):
        with em.if_(v.val > 1.0):          # a per-element branch inside a runtime host loop
            v.val = v.val * 0.5 + y * 0.1
        with em.else_():
            v.val = v.val * 1.4 + y * y * 0.2
    return v.val


def _host_loop_tensor_if_ref(x, y, steps, margins=None):
    v = x.copy()
    for _ in range(steps):
        if margins is not None:
            margins.append(np.min(np.abs(v - 1.0)))
        v = np.where(v > 1.0, v * 0.5 + y * 0.1, v * 1.4 + y * y * 0.2)
    return v


def test_host_loop_with_a_tensor_if(backend):
    r = _rng("host_loop_tensor_if")
    for _ in range(200):
        x, y = away(r, (6,), 0.2, 2.0), away(r, (6,), -1, 1)
        m = []
        _host_loop_tensor_if_ref(x.astype(np.float64), y.astype(np.float64), 7, m)
        if min(m) > 0.01:
            break
    assert min(m) > 0.01
    check_grad(backend, _host_loop_tensor_if, lambda x, y, s: _host_loop_tensor_if_ref(x, y, s),
               {"x": x, "y": y, "steps": 7}, name="host_loop_tensor_if")


def _grid_sync(x, steps):
    n = x.shape[0]
    a = em.zeros([n], em.f32)
    b = em.zeros([n], em.f32)
    a[:] = x
    with em.kernel(n) as i:
        with em.loop(steps) as k:           # reads neighbours written in the previous iteration:
            with em.if_(k % 2 == 0):        # run grid-synchronously (hoisted around the dispatch)
                b[i] = _stencil3(a, i)
            with em.else_():
                a[i] = _stencil3(b, i)
    return a, b


def _stencil3(u, i):
    return 0.3 * em.gather(u, i - 1, mode="wrap") + 0.4 * em.sin(u[i]) + 0.3 * em.gather(u, i + 1, mode="wrap")


def _grid_sync_ref(x, steps):
    a, b = x.copy(), np.zeros(len(x))
    f = lambda u: 0.3 * np.roll(u, 1) + 0.4 * np.sin(u) + 0.3 * np.roll(u, -1)  # noqa: E731
    for k in range(steps):
        if k % 2 == 0:
            b = f(a)
        else:
            a = f(b)
    return a, b


def test_grid_synchronous_kernel_loop(backend):
    """A loop inside a kernel whose iterations read what other threads wrote in the previous
    one (ping-pong stencil, as the bitonic sort's stages): Ember runs it grid-synchronously.
    Its reverse is not supported yet (a clear CompileError naming the construct); forward mode
    goes through it."""
    r = _rng("grid_sync")
    x = away(r, (9,), -1.5, 1.5)

    @em.compile
    def g(x: em.f32[9], steps: em.i32):
        a, b = _grid_sync(x, steps)
        return em.grad(em.sum(a) + em.sum(b * b), x)
    with pytest.raises(em.CompileError, match="per-thread loop that writes memory"):
        run(g, x, 5)

    @em.compile
    def j(x: em.f32[9], d: em.f32[9], steps: em.i32):
        a, b = _grid_sync(x, steps)
        return em.jvp(em.sum(a) + em.sum(b * b), x, d)
    d = away(r, (9,), -1, 1)
    (got,) = run(j, x, d, 5)
    x64, d64, h = x.astype(np.float64), d.astype(np.float64), 1e-6
    def L(z):
        a, b = _grid_sync_ref(z, 5)
        return np.sum(a) + np.sum(b * b)
    want = (L(x64 + h * d64) - L(x64 - h * d64)) / (2 * h)
    assert_close(got, want, tolerance(backend), "jvp through a grid-synchronous loop")


GS = 8


def _block_softsum(x):
    n = x.shape[0]
    out = em.zeros([n // GS], em.f32)
    with em.kernel(n, group=GS) as i:
        buf = em.group_buffer(GS, em.f32)
        lo = em.local_index()
        buf[lo] = em.sin(x[i]) * x[i]
        em.barrier()
        with em.loop(3) as k:               # s = 4, 2, 1: a tree reduction in shared memory
            s = (GS // 2) >> k
            with em.if_(lo < s):
                buf[lo] = buf[lo] + buf[lo + s] * buf[lo + s]
            em.barrier()
        with em.if_(lo == 0):
            out[em.group_index()] = buf[0]
    return out


def _block_softsum_ref(x):
    b = (np.sin(x) * x).reshape(-1, GS).copy()
    for s in (4, 2, 1):
        b[:, :s] = b[:, :s] + b[:, s:2 * s] ** 2
    return b[:, 0]


def test_workgroup_shared_memory_reduction(backend):
    """An explicit kernel with workgroups: a (nonlinear) tree reduction in an em.group_buffer
    with em.barrier between the levels. Reverse mode through workgroup kernels is not supported
    (a clear CompileError); forward mode is (test_jvp_through_a_workgroup_kernel)."""
    r = _rng("block_softsum")

    @em.compile
    def g(x: em.f32[24]):
        return em.grad(em.sum(_block_softsum(x)), x)
    with pytest.raises(em.CompileError, match="workgroups"):
        run(g, away(r, (24,), -1, 1))


def _newton_cbrt(a):
    n = a.shape[0]
    out = em.zeros([n], em.f32)
    with em.kernel(n) as i:
        z = em.var(a[i] * 0.5 + 0.5)
        with em.loop(8):
            f = z.val * z.val * z.val - a[i]
            z.val = z.val - f / em.grad(f, z)        # em.grad of a per-thread scalar, in a kernel loop
        out[i] = z.val
    return out


def test_grad_inside_a_kernel_newton_iteration(backend):
    """em.grad of a per-thread scalar inside a kernel's loop (f'(z) for Newton's method on
    z^3 = a), then em.grad of the whole iteration w.r.t. a: 1 / (3 a^(2/3)) once converged."""
    r = _rng("newton")
    check_grad(backend, _newton_cbrt, np.cbrt, {"a": away(r, (6,), 0.5, 3.0)}, name="newton_cbrt")


def test_jvp_through_kernel_loops(backend):
    """Forward mode through the MLP's nested kernel loops and stores, and through the escape loop
    with break/continue, against directional central differences."""
    r = _rng("jvp_kernel")
    x, W1, b1 = away(r, (4, 3), -1, 1), away(r, (H1, 3), -1, 1), away(r, (H1,), -0.5, 0.5)
    W2, b2, dW = away(r, (2, H1), -1, 1), away(r, (2,), -0.5, 0.5), away(r, (H1, 3), -1, 1)

    @em.compile
    def f(x: em.f32[4, 3], W1: em.f32[H1, 3], b1: em.f32[H1], W2: em.f32[2, H1], b2: em.f32[2], dW: em.f32[H1, 3]):
        return em.jvp(_mlp(x, W1, b1, W2, b2), W1, dW)

    (j,) = run(f, x, W1, b1, W2, b2, dW)
    a64 = [v.astype(np.float64) for v in (x, W1, b1, W2, b2, dW)]
    h = 1e-6
    x64, W164, dW64 = a64[0], a64[1], a64[5]
    want = (_mlp_ref(x64, W164 + h * dW64, *a64[2:5]) - _mlp_ref(x64, W164 - h * dW64, *a64[2:5])) / (2 * h)
    assert_close(j, want, tolerance(backend), "jvp of the MLP w.r.t. W1")


def test_grad_wrt_a_var_inside_a_loop_body_is_its_value_at_the_body_start(backend):
    """In a loop body that first updates p (p <- 2p), em.grad(sum(p^2), p) is w.r.t. p's value
    where the body began: d (2 p0)^2 / d p0 = 8 p0 = 4 p (not 2 p, the gradient w.r.t. the
    current value)."""
    r = _rng("var_body")
    x = away(r, (4,), -1, 1)

    @em.compile
    def f(x: em.f32[4], steps: em.i32):
        p = em.var(x)
        g = em.var(em.zeros([4], em.f32))
        with em.loop(steps):
            p.val = p.val * 2.0
            g.val = em.grad(em.sum(p.val * p.val), p)
        return g.val, p.val

    g, p = run(f, x, 3)
    rt = tolerance(backend)
    assert_close(p, x * 8.0, rt, "p")
    assert_close(g, 4.0 * p.astype(np.float64), rt, "gradient w.r.t. p at the start of the body")


def test_second_order_through_kernel_loops(backend):
    """The MLP's input gradient dL/dx (em.grad through the nested kernel loops) differentiated
    again w.r.t. W1 along v (a gradient penalty): central differences of v . dL/dx(W1), with
    dL/dx = ((1 - h^2) * (w W2)) W1 in NumPy. Reverse over reverse through kernel loops that
    store is not supported (a clear CompileError); the same mixed derivative is forward over
    reverse: d(v . dL/dx)/dW1 = jvp(dL/dW1, x, v)."""
    r = _rng("second_order_mlp")
    x, W1, b1 = away(r, (4, 3), -1, 1), away(r, (H1, 3), -1, 1), away(r, (H1,), -0.5, 0.5)
    W2, b2 = away(r, (2, H1), -1, 1), away(r, (2,), -0.5, 0.5)
    w, v = away(r, (4, 2), 0.5, 1.5), away(r, (4, 3), -1, 1)

    @em.compile
    def f(x: em.f32[4, 3], W1: em.f32[H1, 3], b1: em.f32[H1], W2: em.f32[2, H1], b2: em.f32[2], w: em.f32[4, 2],
          v: em.f32[4, 3]):
        L = em.sum(w * _mlp(x, W1, b1, W2, b2))
        return em.grad(L, x), em.jvp(em.grad(L, W1), x, v)

    gx, gW = run(f, x, W1, b1, W2, b2, w, v)

    @em.compile
    def rr(x: em.f32[4, 3], W1: em.f32[H1, 3], b1: em.f32[H1], W2: em.f32[2, H1], b2: em.f32[2], w: em.f32[4, 2],
           v: em.f32[4, 3]):
        gx = em.grad(em.sum(w * _mlp(x, W1, b1, W2, b2)), x)
        return em.grad(gx, W1, v)
    with pytest.raises(em.CompileError, match="per-thread loop that writes memory"):
        run(rr, x, W1, b1, W2, b2, w, v)
    x64, b164, W264 = x.astype(np.float64), b1.astype(np.float64), W2.astype(np.float64)

    def dLdx(W1):
        h = np.tanh(x64 @ W1.T + b164)
        return ((1 - h * h) * (w @ W264)) @ W1
    from gradcheck import central_diff
    rt = tolerance(backend)
    assert_close(gx, dLdx(W1.astype(np.float64)), rt, "dL/dx")
    assert_close(gW, central_diff(lambda W: np.sum(v * dLdx(W)), [W1.astype(np.float64)], 0), rt, "d(v . dL/dx)/dW1")


# ---- combinations -------------------------------------------------------------------------------
def _host_around_kernel(s0, k, steps):
    n = s0.shape[0]
    s = em.zeros([n], em.f32)
    s[:] = s0
    with em.loop(steps):                      # host loop
        with em.kernel(n) as i:
            z = em.var(s[i])
            with em.loop(3):                  # per-thread substeps
                z.val = z.val + 0.1 * em.sin(k[i] * z.val)
            s[i] = z.val                      # the state buffer is overwritten every host step
    return s


def _host_around_kernel_ref(s0, k, steps):
    s = s0.copy()
    for _ in range(steps):
        for _ in range(3):
            s = s + 0.1 * np.sin(k * s)
    return s


def test_host_loop_around_kernel_loops(backend):
    r = _rng("host_around_kernel")
    args = {"s0": away(r, (6,), -2, 2), "k": away(r, (6,), 0.5, 2), "steps": 4}
    check_grad(backend, _host_around_kernel, _host_around_kernel_ref, args, name="host_around_kernel",
               runs=[dict(args, steps=1)])


def _tensor_if_loop(x, y):
    v = em.var(x)
    with em.if_(x > 0.0):                     # a per-element if holding a loop: a per-element loop
        with em.loop(4) as k:
            v.val = v.val * em.cos(v.val) + y * em.f32(k) * 0.1
    with em.else_():
        v.val = v.val * y
    return v.val


def _tensor_if_loop_ref(x, y):
    v = x.copy()
    for k in range(4):
        v = v * np.cos(v) + y * k * 0.1
    return np.where(x > 0, v, x * y)


def test_tensor_if_holding_a_loop(backend):
    r = _rng("tensor_if_loop")
    args = {"x": away(r, (3, 4), -2, 2, lambda x: np.abs(x) < 0.1), "y": away(r, (3, 4), -1, 1)}
    check_grad(backend, _tensor_if_loop, _tensor_if_loop_ref, args, name="tensor_if_loop")


def _atomic_loop(x, idx):
    n = x.shape[0]
    H = em.zeros([5], em.f32)
    with em.kernel(n) as i:
        a = em.var(x[i])
        with em.loop(3) as k:
            a.val = a.val * em.sin(a.val) + 0.5
            em.atomic_add(H[(idx[i] + k) % 5], a.val * em.f32(k + 1))   # atomics in a per-thread loop
    return H * H


def _atomic_loop_ref(x, idx):
    H = np.zeros(5)
    a = x.copy()
    for k in range(3):
        a = a * np.sin(a) + 0.5
        np.add.at(H, (idx + k) % 5, a * (k + 1))
    return H * H


def test_atomic_add_in_a_per_thread_loop(backend):
    r = _rng("atomic_loop")
    args = {"x": away(r, (7,), -2, 2), "idx": np.array([0, 3, 1, 3, 4, 0, 2], np.int32)}
    check_grad(backend, _atomic_loop, _atomic_loop_ref, args, name="atomic_loop")


def _float_count(x, s):
    v = em.var(x)
    with em.loop(em.i32(s * 10.0)) as t:      # the trip count comes from a float argument
        v.val = em.sin(v.val) * s + em.f32(t) * 0.05
    return v.val


def _float_count_ref(x, s):
    v = x.copy()
    for t in range(int(np.float32(s) * np.float32(10.0))):
        v = np.sin(v) * s + t * 0.05
    return v


def test_trip_count_computed_from_a_float(backend):
    """steps = i32(10 s): the gradient w.r.t. s follows the float path only (the count is
    piecewise constant; s = 0.63 is away from its jumps)."""
    r = _rng("float_count")
    check_grad(backend, _float_count, _float_count_ref, {"x": away(r, (4,), -1, 1), "s": 0.63}, name="float_count",
               runs=[{"x": away(r, (4,), -1, 1), "s": 0.27}])


def test_jvp_through_a_workgroup_kernel(backend):
    """Forward mode through the shared-memory tree reduction (em.group_buffer, em.barrier), against
    directional central differences."""
    r = _rng("jvp_block")
    x, d = away(r, (24,), -1, 1), away(r, (24,), -1, 1)

    @em.compile
    def f(x: em.f32[24], d: em.f32[24]):
        return em.jvp(_block_softsum(x), x, d)

    (j,) = run(f, x, d)
    x64, d64, h = x.astype(np.float64), d.astype(np.float64), 1e-6
    want = (_block_softsum_ref(x64 + h * d64) - _block_softsum_ref(x64 - h * d64)) / (2 * h)
    assert_close(j, want, tolerance(backend), "jvp through a workgroup kernel")


def _own_element(x, k, steps):
    n = x.shape[0]
    A = em.zeros([n], em.f32)
    A[:] = x
    with em.kernel(n) as i:
        with em.loop(steps):                # A[i] = f(A[i]) in a per-thread loop: each thread
            A[i] = A[i] * em.cos(A[i]) * k + 0.1   # reads and writes only its own element
            with em.if_(A[i] > 0.5):
                A[i] = A[i] * 0.5
    return A


def _own_element_ref(x, k, steps):
    A = x.copy()
    for _ in range(steps):
        A = A * np.cos(A) * k + 0.1
        A = np.where(A > 0.5, A * 0.5, A)
    return A


def test_in_place_update_of_own_element_in_a_kernel_loop(backend):
    """A per-thread loop that reads and writes memory only at the thread's own element: the
    element is carried as a var through the reverse (tape per thread), with a runtime trip count."""
    r = _rng("own_element")
    for _ in range(100):
        x = away(r, (7,), -1, 1)
        m = []
        A = x.astype(np.float64)
        for _ in range(5):
            A = A * np.cos(A) * 1.3 + 0.1
            m.append(np.min(np.abs(A - 0.5)))
            A = np.where(A > 0.5, A * 0.5, A)
        if min(m) > 0.02:
            break
    check_grad(backend, _own_element, _own_element_ref, {"x": x, "k": 1.3, "steps": 5}, name="own_element",
               runs=[{"x": x, "k": 1.3, "steps": 2}])


def test_overwrite_with_a_constant_under_an_if_ends_the_gradient(backend):
    """Gradient fuzzer G3: v.val = (something independent of x) under em.if_ left v's old
    gradient alive where the branch ran (the if held no differentiable node, so it was not
    reversed): the overwrite now counts."""
    @em.compile
    def f(x: em.f32[3], c: em.bool[3], k: em.i32[3]):
        v = em.var(x * 2.0)
        with em.if_(c):
            v.val = em.f32(k)
        return em.grad(em.sum(v.val), x)

    @em.compile
    def g(x: em.f32, c: em.bool):
        v = em.var(x * 2.0)
        with em.if_(c):
            v.val = em.f32(1.5)
        return em.grad(v.val, x)
    (gf,) = run(f, np.ones(3, np.float32), np.array([1, 0, 1], bool), np.arange(3, dtype=np.int32))
    np.testing.assert_array_equal(gf, [0, 2, 0])
    assert float(run(g, np.float32(1), True)[0]) == 0.0
    assert float(run(g, np.float32(1), False)[0]) == 2.0


def test_scatter_with_repeated_targets_splits_the_gradient(backend):
    """Gradient fuzzer G2: y[P] = v with P repeating a target (or a broadcast write) lands one
    value per target; every writer used to receive the target's whole gradient. It is split
    evenly between the writers (exact when they write the same value)."""
    @em.compile
    def f(x: em.f32[3], P: em.i32[4]):
        y = em.zeros([3])
        y[P] = em.broadcast_to(x[0] * 2.0, (4,))
        return em.grad(em.sum(y), x)

    @em.compile
    def g(a: em.f32[1, 2], b: em.f32[2]):
        y = em.zeros([1, 1])
        i, k = em.indices([1, 2])
        y[0, i] = em.sum(a[i, k] * b[k], axis=1)
        return em.grad(em.sum(y), [a, b])
    (gf,) = run(f, np.ones(3, np.float32), np.array([0, 2, 2, 1], np.int32))
    np.testing.assert_array_equal(gf, [6, 0, 0])
    ga, gb = run(g, np.array([[1.0, 2.0]], np.float32), np.array([3.0, 4.0], np.float32))
    np.testing.assert_allclose(ga, [[3, 4]])
    np.testing.assert_allclose(gb, [1, 2])
