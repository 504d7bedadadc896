"""Race programs (issue 39): one store per program whose value may vary along an axis of the
store's threads that none of its indices varies along, on an index grid (em.indices) or in an
em.kernel, at host level or inside a host loop, with the value unreduced, reduced (NumPy
broadcasting, keepdims, or the documented alignment of a lower-rank value), guarded by an
`em.if_(k == c)` or accumulated in a var.

Whether a program races is decided by its NumPy reference, not by Ember's analysis: the checked
reference calls `E.race_probe(target, value, ran)` on the per-thread target element and value of
the store (after the documented alignment), and the program races when two threads that run the
store write different values into one element. A racing program must be refused with an
ember.ShapeError on every backend (check_races); any other program must run and match the
reference as every fuzzer program does. `tools/fuzz --races` runs them.
"""
from . import errs as E
from .gen import V, Gen, _program

RACE_FEATURES = ["race_grid", "race_kernel", "race_hostloop", "race_unreduced", "race_row", "race_reduced_bcast",
                 "race_keepdims", "race_lower_rank", "race_issue_rnn", "race_pinned", "race_var_loop",
                 "race_var_sum", "race_racy", "race_free"]


def _g(g, arr, i, k, M, K):
    """arr[i, k] on the grid (clamped as Ember's default gather)."""
    return g.op("{0}[{1}, {2}]", f"{{0}}[clip({{1}}, {M}), clip({{2}}, {K})]",
                f"E.mapn(lambda q: q[clip({{1}}, {M}), clip({{2}}, {K})], {{e0}})", "f32", (M, K), arr, i, k)


def race_block(g):
    """Appends one race store to Gen `g`; returns nothing (the reference's probe decides)."""
    c = g.c
    where = c.choice(["grid", "kernel"])
    loop = c.choice([False, True])
    if where == "grid":
        form = c.choice(["unreduced", "row", "reduced_bcast", "keepdims", "lower_rank", "issue_rnn"])
    else:
        form = c.choice(["unreduced", "row", "pinned", "var_loop", "var_sum"])
    if form == "issue_rnn":
        loop = True
    M = c.choice([1, 2, 3, 5])
    K = M if form in ("reduced_bcast", "issue_rnn") else c.choice([1, 2, 3, 4])
    T = c.choice([1, 2, 3]) if loop else 1
    g.feat("race_" + where, "race_" + form, *(["race_hostloop"] if loop else []))
    A = g.new_arg("f32", (M, K), lo=-1, hi=1)
    B = g.new_arg("f32", (M, K), lo=-1, hi=1)
    X = g.new_arg("f32", (T, K), lo=-1, hi=1)
    y = g.name("y")
    g.line(f"{y} = em.zeros([{T}, {M}])", f"{y} = np.zeros(({T}, {M}))", f"e{y} = np.zeros((2, {T}, {M}))")
    t = None
    if loop:
        g.line(f"with em.loop({T}) as t{y}:", f"for t{y} in range({T}):", None)
        g.ind += 1
        g.npind += 1
        t = V(f"t{y}", f"t{y}", "0.0", "i32", ())
    tt = t if t is not None else V("0", "np.int64(0)", "0.0", "i32", ())
    # the grid: i, k of shape [M, K]
    nm = g.name("g")
    if where == "grid":
        g.line(f"{nm}_i, {nm}_k = em.indices([{M}, {K}])", f"{nm}_i, {nm}_k = np.indices(({M}, {K}))", None)
    else:
        g.line(f"with em.kernel([{M}, {K}]) as ({nm}_i, {nm}_k):", f"{nm}_i, {nm}_k = np.indices(({M}, {K}))", None)
        g.ind += 1
    i = V(f"{nm}_i", f"{nm}_i", "0.0", "i32", (M, K))
    k = V(f"{nm}_k", f"{nm}_k", "0.0", "i32", (M, K))
    zero = V("0", "np.zeros(1, np.int64)[0]", "0.0", "i32", ())
    ran = "None"
    target_i = i  # the store's index along y's second axis
    if form == "unreduced":
        val = g.op("{0} * 2.0 + {1}", "{0} * 2.0 + {1}", "E.add({o}, {0} * 2.0, 2.0 * {e0}, {1}, {e1})", "f32", (M, K),
                   _g(g, A, i, k, M, K), _g(g, B, i, zero, M, K))
    elif form == "row":
        val = g.op("{0} * 2.0 + {1}", "{0} * 2.0 + {1}", "E.add({o}, {0} * 2.0, 2.0 * {e0}, {1}, {e1})", "f32", (M, K),
                   _g(g, A, i, zero, M, K), _g(g, B, i, zero, M, K))
    elif form in ("reduced_bcast", "keepdims", "lower_rank", "issue_rnn"):
        xg = g.op("{0}[{1}, {2}]", f"{{0}}[clip({{1}}, {T}), clip({{2}}, {K})]",
                  f"E.mapn(lambda q: q[clip({{1}}, {T}), clip({{2}}, {K})], {{e0}})", "f32", (M, K), X, tt, k)
        p = g.op("{0} * {1}", "{0} * {1}", "E.mul({o}, {0}, {e0}, {1}, {e1})", "f32", (M, K), _g(g, A, i, k, M, K), xg)
        kd = form == "keepdims"
        s = g.op(f"em.sum({{0}}, axis=1{', keepdims=True' if kd else ''})",
                 f"zsum({{0}}, axis=1{', keepdims=True' if kd else ''})",
                 f"E.rsum({{o}}, {{0}}, {{e0}}, (1,), {kd})", "f32", (M, 1) if kd else (M,), p)
        if form == "lower_rank":
            # the documented alignment: a [M] value stored at y[t, i] matches its axis with i's
            g.line(None, f"{s.np}_al = np.broadcast_to({s.np}[:, None], ({M}, {K}))",
                   f"e{s.np}_al = E.bc(np.asarray({s.e})[:, :, None], ({M}, {K}))")
            val = V(s.em, f"{s.np}_al", f"e{s.np}_al", "f32", (M, K))
        elif form == "issue_rnn":
            prev = g.op("em.where({0} > 0, {1}[{0} - 1, {2}], 0.0)",
                        f"np.where({{0}} > 0, {{1}}[clip({{0}} - 1, {T}), clip({{2}}, {M})], 0.0)",
                        f"np.where({{0}} > 0, E.mapn(lambda q: q[clip({{0}} - 1, {T}), clip({{2}}, {M})], e{y}), 0.0)",
                        "f32", (M, K), t, V(y, y, "e" + y, "f32", (T, M)), i, pool=False)
            a = g.op("{0} + {1}", "{0} + {1}", "E.add({o}, {0}, {e0}, {1}, {e1})", "f32", (M, K), s, prev)
            val = g.op("em.tanh({0})", "np.tanh({0})", "E.math1('tanh', np.tanh, {o}, {0}, {e0})", "f32", (M, K), a)
        else:
            val = g.op("{0} + {1}", "{0} + {1}", "E.add({o}, {0}, {e0}, {1}, {e1})", "f32", (M, K), s,
                       _g(g, B, i, zero, M, K))
    elif form == "pinned":
        pin = c.choice([0, K - 1])
        val = _g(g, A, i, k, M, K)
        g.line(f"with em.if_({k.em} == {pin}):", None, None)
        g.ind += 1
        ran = f"({k.np} == {pin})"
    else:  # var_loop: a per-thread sum over j (uniform along k); var_sum: a var that adds A[i, k]
        acc = g.name("acc")
        g.line(f"{acc} = em.var(em.f32(0.0))", None, None)
        if form == "var_loop":
            g.line(f"with em.loop({K}) as {acc}_j:", None, None)
            g.line(f"    {acc}.val = {acc}.val + {A.em}[{i.em}, {acc}_j]", None, None)
            g.line(None, f"{acc} = np.broadcast_to(zsum({A.np}, axis=1)[:, None], ({M}, {K}))",
                   f"e{acc} = E.bc(E.rsum(zsum({A.np}, axis=1), {A.np}, e{A.np}, (1,), False)[:, :, None], ({M}, {K}))")
        else:
            g.line(f"{acc}.val = {acc}.val + {A.em}[{i.em}, {k.em}] * 0.5", None, None)
            g.line(None, f"{acc} = {A.np} * 0.5", f"e{acc} = E.mul({A.np} * 0.5, {A.np}, e{A.np}, 0.5, 0.0)")
        val = V(f"{acc}.val", acc, "e" + acc, "f32", (M, K))
    # the store y[t, i] = val, and the probe of what each thread writes
    sel = "" if ran == "None" else f"[{ran}]"
    g.line(f"{y}[{tt.em}, {target_i.em}] = {val.em}",
           f"{y}[{tt.np}, {i.np}{sel}] = np.broadcast_to({val.np}, ({M}, {K})){sel}",
           f"E.race_probe({i.np}, {val.np}, {ran}); e{y}[:, {tt.np}, {i.np}{sel}] = E.bc({val.e}, ({M}, {K}))[:, {sel[1:-1] or ':'}]")
    if where == "kernel":
        g.ind -= 1
    if form == "pinned":
        g.ind -= 1
    if loop:
        g.ind -= 1
        g.npind -= 1
    g.output(V(y, y, "e" + y, "f32", (T, M)))


def generate_race(seed, choices=None):
    """The race program of `seed`: a Program with `expect_race` (True: the reference found two
    threads writing different values into one element; Ember must refuse it)."""
    g = Gen(seed, choices, (), False)
    result = None
    for _ in range(6):
        snap = g.snapshot()
        E.RACES.clear()
        try:
            race_block(g)
            result = g.check()
            break
        except E.Reject:
            g.restore(snap)
    if result is None:
        raise RuntimeError(f"race seed {seed}: every try was rejected")
    racy = any(E.RACES)
    g.feat("race_racy" if racy else "race_free")
    prog = _program(g, seed, result, (), False)
    prog.expect_race = racy
    return prog
