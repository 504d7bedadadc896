"""Statement blocks of the fuzzer's generator (gen.Gen mixes them in) aimed at the transformations
the dependence analysis drives (issue 14, core/analysis/dependence.h):

  reduce_atomic  an atomic add/min/max/and/or/xor into an address that ignores some kernel axes
                 (reduce_atomics: a reduction loop per remaining thread); also addresses whose final
                 update stays atomic (i // 2, i % 7) and two atomics on two memories;
  inj_atomic     an atomic whose address is injective (A[2i+1, j], a transpose, a shift, a flip, a
                 rotation: reduce_atomics makes it a plain load/op/store) and a clamped shift that is
                 not (two threads meet at the edge: it must stay atomic);
  par_hostloop   a host em.loop over kernels without a carried dependence (parallelize_host_loops:
                 the counter becomes a kernel axis; body buffers get a row per iteration) and with
                 one (a scan, an accumulation, a read of the previous row: it stays sequential);
  row_fuse       a kernel writing row i of A and a kernel reading A[row(i), col(k)] for every k
                 (fuse_kernels / merge_kernels: they fuse when row(i) is i, stay apart otherwise).

References are vectorized NumPy (ufunc.at for atomics); f32 sums carry an error bound (errs.py's
(n + 1) u sum |x| form), every integer result and every f32 min/max/exchange is exact.
"""

ATOMIC_UFUNC = {"add": "np.add", "min": "np.minimum", "max": "np.maximum", "and": "np.bitwise_and",
                "or": "np.bitwise_or", "xor": "np.bitwise_xor"}


def _npz(dt):
    return "np.float64" if dt == "f32" else "np.int64"


class IslBlocks:
    """Mixin of gen.Gen: the blocks above (each records its features)."""

    def _atomic_ops(self, dt):
        ops = {"f32": ["add", "min", "max"], "i32": ["add", "min", "max", "and", "or", "xor"],
               "u32": ["add", "min", "max", "and", "or", "xor"]}[dt]
        if self.grad and dt == "f32":
            ops = ["add"]  # GRAD_KNOWN_BUGS["atomic_minmax_f32"]
        return ops

    def _atomic_target(self, dt, shape, into_arg):
        """A zeroed buffer or an argument of `shape` to update atomically: (name, Ember-side name)."""
        if into_arg:
            H = self.new_arg(dt, shape, kind="grid" if dt == "f32" else "data")
            self.line(None, f"{H.np}_init = {H.np}.copy()", None)
            return H.em
        hn = self.name("H")
        self.line(f"{hn} = em.zeros({shape}, em.{dt})", f"{hn} = np.zeros({shape}, {_npz(dt)}); {hn}_init = {hn}.copy()",
                  None)
        return hn

    def _atomic_ref(self, hn, dt, name, addr_np, val_np, shape):
        """The reference update of `hn` (ufunc.at) and its error (f32 add: u (n + 2) per element
        times the sum of |contributions| and |initial value|; everything else exact)."""
        if name == "exchange":
            self.line(None, f"{hn}[{addr_np}] = {val_np}", None)
        else:
            self.line(None, f"{ATOMIC_UFUNC[name]}.at({hn}, ({addr_np}), {val_np})", None)
        if dt == "u32" and name == "add":
            self.line(None, f"{hn} = {hn} % 2 ** 32", None)
        if dt == "f32" and name == "add":
            self.line(None, None, f"a{hn} = np.zeros({shape}); c{hn} = np.zeros({shape}); "
                                  f"np.add.at(a{hn}, ({addr_np}), np.abs({val_np})); "
                                  f"np.add.at(c{hn}, ({addr_np}), np.ones(np.shape({val_np}))); "
                                  f"t{hn} = E.U * (c{hn} + 2) * (a{hn} + np.abs({hn}_init)); e{hn} = np.stack([t{hn}, t{hn}])")
        else:
            self.line(None, None, f"e{hn} = E.z({hn})")
        self.output(self._v(hn, dt, shape))

    def _v(self, nm, dt, shape):
        from .gen import V
        return V(nm, nm, "e" + nm, dt, shape)

    # ---- atomics whose address ignores kernel axes ------------------------------------------
    def b_reduce_atomic(self):
        c = self.c
        dt = c.weighted([(3, "f32"), (3, "i32"), (1, "u32")])
        big = c.choice([64, 70, 100, 128])
        small = c.choice([2, 3, 5, 8, 16])
        form = c.choice(["rows", "rows", "cols", "3d"])
        if form == "rows":        # S[f(i)] over [big, small]: j ignored
            K, kept = (big, small), (0,)
        elif form == "cols":      # S[f(j)] over [small, big]: i ignored
            K, kept = (small, big), (1,)
        else:                     # S[f(i), k] over [big, small, 2]: j ignored
            K, kept = (big, small, 2), (0, 2)
        ax = ["i", "j", "k"][:len(K)]
        D = K[kept[0]]
        a = ax[kept[0]]
        addr = c.choice(["id", "id", "stride", "flip", "half", "mod"])
        em_a, np_a, n_a = {"id": (a, f"I{a}", D), "stride": (f"2 * {a} + 1", f"2 * I{a} + 1", 2 * D + 1),
                           "flip": (f"{D - 1} - {a}", f"{D - 1} - I{a}", D), "half": (f"{a} // 2", f"I{a} // 2", (D + 1) // 2),
                           "mod": (f"{a} % 7", f"I{a} % 7", 7)}[addr]
        shape = (n_a,) if len(kept) == 1 else (n_a, K[kept[1]])
        em_addr = em_a if len(kept) == 1 else f"{em_a}, {ax[kept[1]]}"
        np_addr = np_a if len(kept) == 1 else f"{np_a}, I{ax[kept[1]]}"
        self.feat("reduce_atomic", f"reduce_atomic_{dt}", f"reduce_atomic_{form}")
        if addr in ("half", "mod"):
            self.feat("reduce_atomic_shared_final")  # the final update stays atomic
        n_at = 2 if c.coin(0.3) else 1
        ix = ", ".join(ax)
        self.line(None, f"{', '.join('I' + x for x in ax)} = np.indices({K})", None)
        todo = []
        for _ in range(n_at):
            name = c.choice(self._atomic_ops(dt))
            bits = dt == "u32" and name in ("and", "or", "xor")
            X = self.new_arg(dt, K, kind="bits" if bits else "data")
            hn = self._atomic_target(dt, shape, c.coin(0.3))
            if dt == "f32":
                v_em, v_np = c.choice([(f"{X.em}[{ix}]", X.np), (f"{X.em}[{ix}] * 2.0", f"{X.np} * 2.0"),
                                       (f"-{X.em}[{ix}]", f"-{X.np}")])
            elif dt == "i32":
                v_em, v_np = c.choice([(f"{X.em}[{ix}]", X.np), (f"{X.em}[{ix}] * 2 - j", f"{X.np} * 2 - Ij")])
            else:
                v_em, v_np = f"{X.em}[{ix}]", X.np
            todo.append((name, hn, v_em, v_np))
        with self.block(f"with em.kernel({K}) as ({ix}):", None, scope="kernel"):
            for name, hn, v_em, _ in todo:
                self.line(f"em.atomic_{name}({hn}[{em_addr}], {v_em})", None, None)
        for name, hn, _, v_np in todo:
            self._atomic_ref(hn, dt, name, np_addr, v_np, shape)

    # ---- atomics at injective addresses -----------------------------------------------------
    def b_inj_atomic(self):
        c = self.c
        dt = c.weighted([(3, "f32"), (3, "i32"), (1, "u32")])
        d0 = c.choice([3, 5, 17, 33, 64])
        d1 = c.choice([1, 2, 4, 8])
        form = c.choice(["stride", "transpose", "shift", "flip", "rotate", "clamped_shift"])
        name = c.choice(self._atomic_ops(dt) + ([] if form == "clamped_shift" or self.grad else ["exchange"]))
        self.feat("inj_atomic", f"inj_atomic_{form}", f"inj_atomic_{dt}")
        s = c.choice([1, 2])
        T, em_addr, np_addr = {
            "stride": ((2 * d0 + 1, d1), "2 * i + 1, j", "2 * Ii + 1, Ij"),
            "transpose": ((d1, d0), "j, i", "Ij, Ii"),
            "shift": ((d0 + s, d1), f"i + {s}, j", f"Ii + {s}, Ij"),
            "flip": ((d0, d1), f"{d0 - 1} - i, j", f"{d0 - 1} - Ii, Ij"),
            "rotate": ((d0, d1), f"(i + {s}) % {d0}, j", f"(Ii + {s}) % {d0}, Ij"),
            "clamped_shift": ((d0, d1), f"i + {s}, j", f"np.minimum(Ii + {s}, {d0 - 1}), Ij"),
        }[form]
        bits = dt == "u32" and name in ("and", "or", "xor")
        X = self.new_arg(dt, (d0, d1), kind="bits" if bits else "data")
        hn = self._atomic_target(dt, T, c.coin(0.7))
        self.line(None, f"Ii, Ij = np.indices({(d0, d1)})", None)
        if dt == "f32":
            v_em, v_np = c.choice([("{0}[i, j]", "{0}"), ("{0}[i, j] * 2.0", "{0} * 2.0")])
        else:
            v_em, v_np = c.choice([("{0}[i, j]", "{0}"), ("{0}[i, j] * 3 + i", "{0} * 3 + Ii")]) if dt == "i32" \
                else ("{0}[i, j]", "{0}")
        with self.block(f"with em.kernel(({d0}, {d1})) as (i, j):", None, scope="kernel"):
            self.line(f"em.atomic_{name}({hn}[{em_addr}], {v_em.format(X.em)})", None, None)
        self._atomic_ref(hn, dt, name, np_addr, v_np.format(X.np), T)

    # ---- host loops over kernels ------------------------------------------------------------
    def b_par_hostloop(self):
        c = self.c
        L = c.choice([2, 3, 4, 5, 8])
        H = c.choice([3, 8, 17, 64])
        form = c.choice(["rows", "rows", "body_buffer", "step", "scan", "accumulate", "prev_row"])
        carried = form in ("scan", "accumulate", "prev_row")
        self.feat("host_loop", "hostloop_kernels", "hostloop_carried" if carried else "hostloop_independent",
                  f"hostloop_{form}")
        X = self.new_arg("f32", (L, H), lo=-1, hi=1)
        W = self.new_arg("f32", (H,), lo=-1, hi=1)
        y = self.name("Y")
        t = f"t{y}"
        if form == "rows":
            self.line(f"{y} = em.zeros(({L}, {H}))", f"{y} = np.zeros(({L}, {H})); e{y} = np.zeros((2, {L}, {H}))")
            with self.block(f"with em.loop({L}) as {t}:", f"for {t} in range({L}):"):
                with self.block(f"with em.kernel({H}) as i:", None, scope="kernel"):
                    self.line(f"{y}[{t}, i] = {X.em}[{t}, i] * 2.0 + {W.em}[i] * em.f32({t})", None)
                self.line(None, f"r = {X.np}[{t}] * 2.0 + {W.np} * {t}; {y}[{t}] = r",
                          f"e{y}[:, {t}] = E.kc(2, 2, 1) * E.U * (np.abs({X.np}[{t}] * 2.0) + 2 * np.abs({W.np} * {t}))")
            return self.output(self._v(y, "f32", (L, H)))
        if form == "step":
            a, b, st = c.choice([(1, L, 2), (L - 1, -1, -1), (0, L, 3)])
            self.line(f"{y} = em.zeros(({L}, {H}))", f"{y} = np.zeros(({L}, {H})); e{y} = np.zeros((2, {L}, {H}))")
            with self.block(f"with em.loop({a}, {b}, {st}) as {t}:", f"for {t} in range({a}, {b}, {st}):"):
                with self.block(f"with em.kernel({H}) as i:", None, scope="kernel"):
                    self.line(f"{y}[{t}, i] = {X.em}[{t}, i] - {W.em}[i] * 0.5", None)
                self.line(None, f"{y}[{t}] = {X.np}[{t}] - {W.np} * 0.5",
                          f"e{y}[:, {t}] = E.kc(1, 1, 1) * E.U * np.abs({y}[{t}])")
            return self.output(self._v(y, "f32", (L, H)))
        if form == "body_buffer":  # kernel 2 reads tmp at other threads: both get an [L, H] axis
            self.line(f"{y} = em.zeros(({L}, {H}))", f"{y} = np.zeros(({L}, {H})); e{y} = np.zeros((2, {L}, {H}))")
            with self.block(f"with em.loop({L}) as {t}:", f"for {t} in range({L}):"):
                self.line(f"tmp = em.zeros(({H},))", None)
                with self.block(f"with em.kernel({H}) as i:", None, scope="kernel"):
                    self.line(f"tmp[i] = {X.em}[{t}, i] * 4.0", None)
                with self.block(f"with em.kernel({H}) as i:", None, scope="kernel"):
                    self.line(f"{y}[{t}, i] = tmp[{H - 1} - i] - tmp[(i + 1) % {H}] * {W.em}[i]", None)
                self.line(None, f"tmp = {X.np}[{t}] * 4.0; p = np.roll(tmp, -1) * {W.np}; {y}[{t}] = tmp[::-1] - p",
                          f"e{y}[:, {t}] = E.kc(2, 2, 1) * E.U * (np.abs(tmp[::-1]) + 2 * np.abs(p))")
            return self.output(self._v(y, "f32", (L, H)))
        if form == "scan":  # y[t + 1] = 0.5 y[t] + x[t]: iteration t + 1 reads t's row
            self.line(f"{y} = em.zeros(({L + 1}, {H}))",
                      f"{y} = np.zeros(({L + 1}, {H})); {y}[0] = {W.np}; e{y} = np.zeros((2, {L + 1}, {H}))")
            with self.block(f"with em.kernel({H}) as i:", None, scope="kernel"):
                self.line(f"{y}[0, i] = {W.em}[i]", None)
            with self.block(f"with em.loop({L}) as {t}:", f"for {t} in range({L}):"):
                with self.block(f"with em.kernel({H}) as i:", None, scope="kernel"):
                    self.line(f"{y}[{t} + 1, i] = {y}[{t}, i] * 0.5 + {X.em}[{t}, i]", None)
                self.line(None, f"{y}[{t} + 1] = {y}[{t}] * 0.5 + {X.np}[{t}]",
                          f"e{y}[:, {t} + 1] = e{y}[:, {t}] * 0.5 + E.kc(1, 1, 1) * E.U * np.abs({y}[{t} + 1])")
            return self.output(self._v(y, "f32", (L + 1, H)))
        if form == "accumulate":  # acc[i] += x[t, i]^2 every iteration
            self.line(f"{y} = em.zeros(({H},))", f"{y} = np.zeros({H}); a{y} = np.zeros({H})")
            with self.block(f"with em.loop({L}) as {t}:", f"for {t} in range({L}):"):
                with self.block(f"with em.kernel({H}) as i:", None, scope="kernel"):
                    self.line(f"{y}[i] = {y}[i] + {X.em}[{t}, i] * {X.em}[{t}, i]", None)
                self.line(None, f"{y} = {y} + {X.np}[{t}] ** 2; a{y} = a{y} + {X.np}[{t}] ** 2")
            self.line(None, None, f"e{y} = E.kc(1, 1, 1) * E.U * ({L} + 2) * a{y}")
            return self.output(self._v(y, "f32", (H,)))
        # prev_row: Y[t, i] = X[t, i] + Y[t - 1, i] (clamped at t = 0: Y[0] reads its own zero row)
        self.line(f"{y} = em.zeros(({L}, {H}))", f"{y} = np.zeros(({L}, {H})); e{y} = np.zeros((2, {L}, {H}))")
        with self.block(f"with em.loop({L}) as {t}:", f"for {t} in range({L}):"):
            with self.block(f"with em.kernel({H}) as i:", None, scope="kernel"):
                self.line(f"{y}[{t}, i] = {X.em}[{t}, i] + {y}[{t} - 1, i]", None)
            self.line(None, f"{y}[{t}] = {X.np}[{t}] + {y}[max({t} - 1, 0)]",
                      f"e{y}[:, {t}] = e{y}[:, max({t} - 1, 0)] + E.kc(1, 1, 1) * E.U * np.abs({y}[{t}])")
        self.output(self._v(y, "f32", (L, H)))

    # ---- a row producer and a consumer of any element of the row ----------------------------
    def b_row_fuse(self):
        c = self.c
        n = c.choice([5, 17, 37, 64])
        M = c.choice([3, 4, 8, 12])
        row = c.choice(["own", "own", "own", "min_identity", "next", "mirror"])
        col = c.choice(["own", "reversed", "rotated"])
        s = c.choice([1, 2, 5])
        self.feat("row_fuse", f"row_fuse_{row}", f"row_fuse_cols_{col}")
        X = self.new_arg("f32", (n, M), lo=-1, hi=1)
        A, Y = self.name("A"), self.name("Y")
        em_row, np_row = {"own": ("i", "Ir"), "min_identity": (f"em.min(i, {n - 1})", "Ir"),
                          "next": ("i + 1", f"np.minimum(Ir + 1, {n - 1})"), "mirror": (f"{n - 1} - i", f"{n - 1} - Ir")}[row]
        em_col, np_col = {"own": ("k", "Ic"), "reversed": (f"{M - 1} - k", f"{M - 1} - Ic"),
                          "rotated": (f"(k + {s}) % {M}", f"(Ic + {s}) % {M}")}[col]
        self.line(f"{A} = em.zeros(({n}, {M}))", None)
        self.line(f"{Y} = em.zeros(({n},))", None)
        with self.block(f"with em.kernel({n}) as i:", None, scope="kernel"):
            with self.block(f"with em.loop({M}) as j:", None):
                self.line(f"{A}[i, j] = {X.em}[i, j] * 2.0 + 1.0", None)
        with self.block(f"with em.kernel({n}) as i:", None, scope="kernel"):
            self.line("acc = em.var(0.0)", None)
            with self.block(f"with em.loop({M}) as k:", None):
                self.line(f"acc.val += {A}[{em_row}, {em_col}] * em.f32(k + 1)", None)
            self.line(f"{Y}[i] = acc", None)
        self.line(None, f"Ir, Ic = np.indices(({n}, {M})); {A} = {X.np} * 2.0 + 1.0; "
                        f"p = {A}[{np_row}, {np_col}] * (Ic + 1.0); {Y} = p.sum(axis=1)",
                  f"t = E.U * {M + 4} * np.abs(p).sum(axis=1); e{Y} = np.stack([t, 2 * t])")
        self.output(self._v(Y, "f32", (n,)))
