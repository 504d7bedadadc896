"""Gradient mode of the differential fuzzer (tools/fuzz --grad).

For a generated program (gen.generate(seed, grad=True): the generator's differentiable subset) with
f32 outputs o_k and f32 arguments x_j (tensors and scalars):

  L = sum_k sum(w_k * o_k)      w_k fixed random weights in [0.5, 1.5) of o_k's shape (seeded),
                                over the f32 outputs whose reference values are all finite;
  the gradient program          the generated body, then L and em.grad(L, [x_1, x_2, ...]),
                                returned as (L, dL/dx_1, dL/dx_2, ...).

L is compared with the reference's (the forward bound of errs.py), each dL/dx_j with float64
central differences of the NumPy reference's L (the reference as a function of the arguments'
values before the program runs, as em.grad of an argument written in place means).

Central differences, element by element: h = STEP * max(1, |x_i|),
  d1 = (L(x + h e_i) - L(x - h e_i)) / 2h,   d2 = the same with h / 2,
  want = d2 + (d2 - d1) / 3 (Richardson: the h^2 error terms cancel).
An element is *at a kink* (skipped and counted, never compared) where d1 and d2 disagree by more
than KINK_FRAC of its tolerance, or where L is not finite or the reference raises at x +- h: a
kink of the derivative or a jump of L (a comparison, floor, cast, min/max, abs, clamp, a break)
within h of the input moves the two estimates apart (a kink at distance d < h changes them by
|slope jump| * d / 2h, a jump J by J / 2h). Kinks closer to an input than the *forward* error (f32
could take the other side of a min/max/abs/clamp) are kept out of the program by the generator
(errs.GRAD). Inputs that are not finite (the nan/inf part) are skipped too.

Cost: a program checks at most MAX_CHECKED elements one by one (4 reference runs each; fewer when
the reference is slow: TIME_BUDGET / (4 x one run), at least MIN_SHARE per argument); an
argument beyond its share is checked on a seeded sample (its first and last elements and random
ones) plus N_DIRS random directions over all its elements (directional derivatives, the same two
steps and kink test); a failing direction is localized by differencing every element.

Tolerances (GradProgram.tolerance), relative to the gradient's scale: scale_j = max |want| over
the compared elements of argument j, at least SCALE_FLOOR times the largest scale of any argument
(a tiny gradient next to large ones is rounded relative to the large terms it mixes with). With
rho = (forward error bound of L) / sum_k sum |w_k o_k| (errs.py's per-element bounds, weighted: how
ill-conditioned the program's own f32 evaluation is, cpu or GPU class) and the natural scale
N = sum_k sum |w_k o_k| / max(1, max |x|) of a gradient,
  tol_j = SAFETY * (max(RTOL[class], K_COND * rho[class]) * scale_j + K_ABS * u * N) + 4 * noise,
RTOL = 1e-4 (cpu, interpreter) / 1e-3 (GPU dialects) as tests/python/gradcheck.py calibrated them
(f32 gradients through ~10-30 ops, GPU native math); K_COND = 10 (a derivative evaluates the same
functions again and their derivatives, each as accurate as the forward op: a few times the forward
relative error); K_ABS = 16 ulps of N: a gradient that cancels to ~0 from terms of size N keeps
their rounding (sum_j w_j c_j = 0 exactly in float64 is ~1e-8 in f32); noise = 16 eps64 sum |w o| /
STEP (float64 rounding of the reference's L over the step). Derivatives that f32 cannot evaluate to
RTOL / 4 at all (tanh near saturation: 1 - tanh^2 from tanh's f32 result) are kept out of the
programs by the generator (errs.dcheck). L itself: SAFETY * (its forward bound + (n + 2) u sum |w o|).
"""
import inspect
import time

import numpy as np

from . import errs as E

STEP = 1e-5            # central-difference step, relative to max(1, |x|)
MAX_CHECKED = 256      # elements per program differenced one by one (4 reference runs each)
MIN_SHARE = 8          # at least this many elements of each argument
N_DIRS = 2             # random directions for an argument checked on a sample
MAX_LOCALIZE = 4096    # elements differenced to localize a failing direction
TIME_BUDGET = 15.0     # seconds of reference runs for the differences (a slow reference checks fewer)
RTOL = E.GRAD_RTOL     # class 0: cpu and the interpreter, 1: GPU dialects: (1e-4, 1e-3)
K_COND = 10.0
SCALE_FLOOR = 1e-3     # of the largest gradient scale among the arguments
K_ABS = 16.0           # ulps of the natural gradient scale: the absolute floor (cancellation)
KINK_FRAC = 0.1        # d1 and d2 further apart than this fraction of the tolerance: a kink
SAFETY = 2.0
EPS64 = 2.0 ** -52
LOOSE = 1e-3           # |d1 - d2| <= LOOSE * |d|: clean enough to set the scale


def _is_arr(v):
    return isinstance(v, np.ndarray)


class GradProgram:
    """The gradient program of a generated program, with its reference gradients (lazily)."""

    def __init__(self, prog):
        self.prog = prog
        self.seed = prog.seed
        self.used = [k for k, dt in enumerate(prog.outs)
                     if dt == "f32" and np.all(np.isfinite(np.asarray(prog.ref_outs[k], float)))]
        self.wrt = [j for j, a in enumerate(prog.args) if a[1] == "f32"]
        self.names = [prog.args[j][0] for j in self.wrt]
        rng = np.random.default_rng([prog.seed, 7919])
        self.weights = []
        for k in self.used:
            shp = np.shape(prog.ref_outs[k])
            w = rng.uniform(0.5, 1.5, shp).astype(np.float32)
            self.weights.append(w if shp else float(w))
        self.ok = bool(self.used) and bool(self.wrt)
        self.why_not = "" if self.ok else ("no finite f32 output" if not self.used else "no f32 argument")
        self.em_src = self._source() if self.ok else None
        self._ref = None
        self._want = None

    # ---- the program ------------------------------------------------------------------------
    def _source(self):
        p = self.prog
        lines = p.em_src.rstrip("\n").split("\n")
        assert lines[-1].startswith("    return ("), lines[-1]
        d = next(i for i, t in enumerate(lines) if t.startswith("def f("))
        params = []
        terms = []
        for n, (k, w) in enumerate(zip(self.used, self.weights)):
            em_txt, sshape = p.out_specs[k]
            shp = np.shape(p.ref_outs[k])
            if len(sshape) != len(shp):
                sshape = shp
            dims = ", ".join(repr(s) if isinstance(s, str) else str(int(c)) for s, c in zip(sshape, shp))
            params.append(f"w{n}__: em.f32[{dims}]" if shp else f"w{n}__: em.f32")
            terms.append(f"em.sum(w{n}__ * {em_txt})")
        head = lines[d]
        assert head.endswith("):")
        inner = head[len("def f("):-2]
        lines[d] = "def f(" + ", ".join(([inner] if inner else []) + params) + "):"
        lines[-1] = "    L__ = " + " + ".join(terms)
        lines.append(f"    return (L__,) + tuple(em.grad(L__, [{', '.join(self.names)}]))")
        return "\n".join(lines) + "\n"

    def inputs(self):
        """The gradient program's arguments: the program's (fresh copies) and the weights."""
        return self.prog.inputs() + [w.copy() if _is_arr(w) else w for w in self.weights]

    # ---- the reference ------------------------------------------------------------------------
    def ref(self):
        if self._ref is None:
            ns = {"E": E}
            exec(compile(self.prog.np_src, f"<fuzz-ref {self.seed}>", "exec"), ns)
            self._ref = ns["ref"]
        return self._ref

    def vals64(self):
        out = []
        for nm, dt, ann, data in self.prog.args:
            if dt == "f32":
                out.append(np.asarray(data, np.float64) if ann else float(np.float32(data)))
            else:
                out.append(data.copy() if _is_arr(data) else data)
        return out

    def L(self, vals):
        """The reference's L at argument values `vals` (float64), None if it raises."""
        ref = self.ref()
        try:
            with np.errstate(all="ignore"):
                outs, _ = ref(*[v.copy() if _is_arr(v) else v for v in vals])
                return float(sum(np.sum(np.asarray(w, np.float64) * np.asarray(outs[k], np.float64))
                                 for k, w in zip(self.used, self.weights)))
        except Exception:  # errs.Reject (an unsafe index left its range), an overflow...
            return None

    def magnitude(self):
        """sum_k sum |w_k o_k| (the reference's), and the forward error bound of L per class."""
        mag, err, n = 0.0, np.zeros(2), 0
        for k, w in zip(self.used, self.weights):
            o = np.asarray(self.prog.ref_outs[k], np.float64)
            e = np.asarray(self.prog.ref_errs[k], np.float64).reshape((2,) + o.shape)
            w = np.asarray(w, np.float64)
            mag += float(np.sum(np.abs(w * o)))
            err += np.array([float(np.sum(w * e[c])) for c in range(2)])
            n += o.size
        return mag, err, n

    def _diff(self, vals, j, idx, h):
        """(L(x + h e_idx) - L(x - h e_idx)) / 2h for argument j (idx () for a scalar)."""
        x = vals[j]
        r = []
        for s in (1.0, -1.0):
            v = list(vals)
            if _is_arr(x):
                y = x.copy()
                y[idx] += s * h
                v[j] = y
            else:
                v[j] = x + s * h
            r.append(self.L(v))
        if r[0] is None or r[1] is None or not np.isfinite(r[0]) or not np.isfinite(r[1]):
            return np.nan
        return (r[0] - r[1]) / (2 * h)

    def _dir(self, vals, j, u, t):
        x = vals[j]
        r = []
        for s in (1.0, -1.0):
            v = list(vals)
            v[j] = x + s * t * STEP * u
            r.append(self.L(v))
        if r[0] is None or r[1] is None or not np.isfinite(r[0]) or not np.isfinite(r[1]):
            return np.nan
        return (r[0] - r[1]) / (2 * t * STEP)

    def _element(self, vals, j, idx):
        x = vals[j][idx] if _is_arr(vals[j]) else vals[j]
        h = STEP * max(1.0, abs(float(x)))
        return self._diff(vals, j, idx, h), self._diff(vals, j, idx, h / 2)

    def reference(self):
        """Central differences (computed once): per argument d1, d2 (NaN where not computed),
        the compared-element mask, tolerance inputs and statistics."""
        if self._want is not None:
            return self._want
        vals = self.vals64()
        t0 = time.time()
        self.L0 = self.L(vals)
        self.t_ref = time.time() - t0
        budget = max(1, int(TIME_BUDGET / (4 * max(self.t_ref, 1e-5))))
        self.mag, self.ferr, self.nout = self.magnitude()
        xmax = max([float(np.max(np.abs(v), initial=0.0, where=np.isfinite(v))) for v in
                    (np.asarray(vals[j], np.float64) for j in self.wrt)] + [1.0])
        self.natural = self.mag / xmax  # the natural scale of dL/dx: sum |w o| over the largest |x|
        self.noise = 16 * EPS64 * max(self.mag, abs(self.L0 or 0.0)) / STEP
        sizes = [int(np.size(vals[j])) for j in self.wrt]
        total = sum(sizes)
        rng = np.random.default_rng([self.seed, 104729])
        stats = {"elements": total, "checked": 0, "kinks": 0, "sampled_out": 0, "nonfinite": 0, "dirs": 0,
                 "dir_kinks": 0}
        per = []
        for j, n in zip(self.wrt, sizes):
            x = np.asarray(vals[j], np.float64)
            finite = np.isfinite(x).reshape(-1)
            cap = min(MAX_CHECKED, budget)
            if total <= cap:
                pick = np.arange(n)
            else:
                q = min(n, max(MIN_SHARE, int(cap * n / total)))
                rest = rng.permutation(np.arange(1, n - 1))[:max(0, q - 2)] if n > 2 else np.arange(0)
                pick = np.unique(np.concatenate([[0, n - 1], rest]).astype(int)) if n > 1 else np.arange(n)
            d1 = np.full(n, np.nan)
            d2 = np.full(n, np.nan)
            for i in pick:
                if not finite[i]:
                    continue
                idx = np.unravel_index(int(i), x.shape) if x.ndim else ()
                d1[i], d2[i] = self._element(vals, j, idx)
            sampled = np.zeros(n, bool)
            sampled[pick] = True
            stats["nonfinite"] += int(np.sum(~finite))
            stats["sampled_out"] += int(np.sum(~sampled & finite))
            dirs = []
            if len(pick) < n:
                for _ in range(N_DIRS):
                    u = np.where(np.isfinite(x), rng.choice([-1.0, 1.0], x.shape) * np.maximum(1.0, np.abs(x)), 0.0)
                    dirs.append((u, self._dir(vals, j, u, 1.0), self._dir(vals, j, u, 0.5)))
            per.append({"x": x, "d1": d1, "d2": d2, "sampled": sampled, "finite": finite, "dirs": dirs})
        # scales: from the cleanly differentiable elements
        scales = []
        for a in per:
            d1, d2 = a["d1"], a["d2"]
            with np.errstate(invalid="ignore"):
                clean = np.isfinite(d1) & np.isfinite(d2) & (np.abs(d1 - d2) <= LOOSE * np.abs(d2) + self.noise)
            scales.append(float(np.max(np.abs(d2[clean]))) if clean.any() else 0.0)
        gscale = max(scales) if scales else 0.0
        for a, s in zip(per, scales):
            a["scale"] = max(s, SCALE_FLOOR * gscale)
            t0 = self.tolerance(a["scale"], 0)
            d1, d2 = a["d1"], a["d2"]
            with np.errstate(invalid="ignore"):
                a["cmp"] = np.isfinite(d1) & np.isfinite(d2) & (np.abs(d1 - d2) <= KINK_FRAC * t0)
            a["kink"] = a["sampled"] & a["finite"] & ~a["cmp"]
            a["want"] = np.where(a["cmp"], d2 + (d2 - d1) / 3.0, np.nan)
            stats["checked"] += int(a["cmp"].sum())
            stats["kinks"] += int(a["kink"].sum())
            dd = []
            for u, e1, e2 in a["dirs"]:
                un = float(np.sqrt(np.sum(u * u)))
                ok = np.isfinite(e1) and np.isfinite(e2) and abs(e1 - e2) <= KINK_FRAC * t0 * un
                stats["dirs"] += 1
                stats["dir_kinks"] += 0 if ok else 1
                if ok:
                    dd.append((u, e2 + (e2 - e1) / 3.0, un))
            a["dirs_ok"] = dd
        self.per = per
        self.stats = stats
        self._want = per
        return per

    def rho(self, cls):
        return float(self.ferr[cls]) / max(self.mag, 1e-300)

    def tolerance(self, scale, cls):
        return SAFETY * (max(RTOL[cls], K_COND * self.rho(cls)) * scale + K_ABS * E.U * self.natural) \
            + 4 * self.noise + 1e-30

    def localize(self, k):
        """Differences every element of argument k (after a failing direction)."""
        a = self.per[k]
        if a.get("localized"):
            return
        vals = self.vals64()
        j = self.wrt[k]
        x = a["x"]
        n = x.size
        cap = min(MAX_LOCALIZE, max(MIN_SHARE, int(TIME_BUDGET / (4 * max(self.t_ref, 1e-5)))))
        for i in range(min(n, cap)):
            if a["sampled"][i] or not a["finite"][i]:
                continue
            idx = np.unravel_index(i, x.shape) if x.ndim else ()
            a["d1"][i], a["d2"][i] = self._element(vals, j, idx)
            a["sampled"][i] = True
        t0 = self.tolerance(a["scale"], 0)
        d1, d2 = a["d1"], a["d2"]
        with np.errstate(invalid="ignore"):
            a["cmp"] = np.isfinite(d1) & np.isfinite(d2) & (np.abs(d1 - d2) <= KINK_FRAC * t0)
        a["want"] = np.where(a["cmp"], d2 + (d2 - d1) / 3.0, np.nan)
        a["localized"] = True

    # ---- the comparison -----------------------------------------------------------------------
    def compare(self, got, cls):
        """None, or the first result that differs: got = [L, dL/dx_1, ...] of the gradient program
        (cls 0: cpu and interpreter tolerances, 1: GPU)."""
        per = self.reference()
        if len(got) < 1 + len(self.wrt):
            return {"what": "count", "site": "grad", "msg": f"{len(got)} results, expected {1 + len(self.wrt)}"}
        Lg = np.asarray(got[0])
        if Lg.shape != () or Lg.dtype != np.float32:
            return {"what": "L", "site": "L", "msg": f"L: shape {Lg.shape} dtype {Lg.dtype}, expected a f32 scalar"}
        tolL = SAFETY * (float(self.ferr[cls]) + (self.nout + 2) * E.U * self.mag) + 1e-30
        if self.L0 is not None and not abs(float(Lg) - self.L0) <= tolL:
            return {"what": "L", "site": "L", "index": [], "got": _num(Lg), "want": self.L0, "tol": tolL, "nbad": 1,
                    "msg": f"L: got {_num(Lg)}, expected {self.L0!r} (tolerance {tolL:.3g}; the forward part of the "
                           "gradient program)"}
        for k, (name, a) in enumerate(zip(self.names, per)):
            g = np.asarray(got[1 + k])
            x = a["x"]
            what = f"dL/d{name}"
            if g.shape != x.shape:
                return {"what": what, "site": "grad", "msg": f"{what}: shape {g.shape}, expected {x.shape}"}
            if g.dtype != np.float32:
                return {"what": what, "site": "grad", "msg": f"{what}: dtype {g.dtype}, expected float32"}
            m = self._compare_arg(k, name, a, g.astype(np.float64).reshape(-1), cls)
            if m is None and a["dirs_ok"]:
                tol = self.tolerance(a["scale"], cls)
                for u, dw, un in a["dirs_ok"]:
                    dg = float(np.sum(g.astype(np.float64) * u))
                    if not abs(dg - dw) <= tol * un:
                        self.localize(k)
                        m = self._compare_arg(k, name, a, g.astype(np.float64).reshape(-1), cls)
                        if m is None:
                            m = {"what": what, "site": "grad", "index": [], "got": dg, "want": dw, "tol": tol * un,
                                 "nbad": 1, "msg": f"{what} along a random direction: got {dg!r}, expected {dw!r} "
                                                    f"(tolerance {tol * un:.3g}; no single element differs)"}
                        break
            if m:
                return m
        return None

    def _compare_arg(self, k, name, a, g, cls):
        tol = self.tolerance(a["scale"], cls)
        want = a["want"]
        cmpm = a["cmp"]
        with np.errstate(invalid="ignore"):
            err = np.abs(g - want)
            bad = cmpm & ~(err <= tol)
            bad |= a["finite"] & ~np.isfinite(g)  # a non-finite gradient at a finite input
        if not bad.any():
            return None
        score = np.where(bad, np.nan_to_num(err / tol, nan=np.inf), -1.0)
        i = int(np.argmax(score))
        x = a["x"]
        idx = [int(t) for t in np.unravel_index(i, x.shape)] if x.ndim else []
        w = want[i]
        nk = int(a["kink"].sum())
        return {"what": f"dL/d{name}", "site": "grad", "index": idx, "got": _num(g[i]), "want": _num(w), "tol": tol,
                "nbad": int(bad.sum()), "max_err": _num(np.nanmax(np.where(bad, err, 0.0))),
                "msg": f"dL/d{name} [{', '.join(map(str, idx))}]: got {_num(g[i])}, expected "
                       f"{_num(w) if np.isfinite(w) else 'a finite value (at a kink)'} (tolerance {tol:.3g}; "
                       f"{int(bad.sum())} of {int(cmpm.sum())} compared elements differ"
                       f"{f', {nk} at kinks skipped' if nk else ''})"}


def _num(x):
    x = np.asarray(x).item()
    return x if not isinstance(x, float) or np.isfinite(x) else str(x)


# ---- the self-contained script ------------------------------------------------------------------
SHIM = ["smooth", "nz", "inrange", "wrapdt", "group_reverse"]


def e_shim():
    """The errs.py functions an unchecked reference calls, as a class E for a standalone script."""
    out = ["class Reject(Exception):", "    pass", "", "", "class E:"]
    for nm in SHIM:
        src = inspect.getsource(getattr(E, nm)).split("\n")
        out.append("    @staticmethod")
        out += ["    " + t if t else t for t in src if t is not None]
    return "\n".join(out).rstrip() + "\n"


def _arr(a):
    t = np.array2string(np.asarray(a).astype(float) if a.dtype == np.float32 else np.asarray(a), separator=", ",
                        threshold=10 ** 9, max_line_width=110, floatmode="unique")
    t = t.replace("nan", "np.nan").replace("inf", "np.inf")
    dt = {np.float32: "np.float32", np.int32: "np.int32", np.uint32: "np.uint32", np.bool_: "np.bool_"}[a.dtype.type]
    return f"np.array({t}, dtype={dt})"


def script(gp, why=""):
    """The gradient program as a self-contained script: the @em.compile function returning L and
    its gradients, the inputs and weights, the NumPy reference, and the central-difference check
    (this module's rule, with the fuzzer's tolerances per argument printed as TOL)."""
    p = gp.prog
    per = gp.reference()
    L = ["#!/usr/bin/env python3",
         f'"""Ember gradient fuzz program (tools/fuzz --grad), seed {p.seed}.{(" " + why) if why else ""}',
         f"features: {', '.join(p.features)}",
         "Run: PYTHONPATH=build/python /usr/bin/python3 THIS_FILE [backend]  (cpu, vulkan, vulkan-hlsl, opengl)\"\"\"",
         "import sys", ""]
    L.append(gp.em_src.rstrip())
    L += ["", "", p.np_src.replace("import numpy as np\n", "import numpy as np  # noqa: E402\n").rstrip(), "", ""]
    L.append(e_shim().rstrip())
    L += ["", "", "def inputs():", "    return ["]
    for nm, dt, ann, data in p.args:
        L.append(f"        {_arr(data) if ann else repr(np.asarray(data).item())},  # {nm}")
    L += ["    ]", "", ""]
    L.append("WEIGHTS = [")
    for w in gp.weights:
        L.append(f"    {_arr(w) if _is_arr(w) else repr(w)},")
    L.append("]")
    L.append(f"USED = {gp.used!r}  # the outputs of ref() in L, in the order of WEIGHTS")
    L.append(f"WRT = {gp.wrt!r}  # the differentiated arguments")
    tols = [(gp.tolerance(a["scale"], 0), gp.tolerance(a["scale"], 1)) for a in per]
    L.append(f"TOL = {tols!r}  # per gradient: (cpu/interpreter, GPU), absolute")
    L.append(f"TOL_L = {tuple(SAFETY * (float(gp.ferr[c]) + (gp.nout + 2) * E.U * gp.mag) for c in range(2))!r}")
    L.append(f"STEP, KINK_FRAC = {STEP!r}, {KINK_FRAC!r}")
    L += ["", "", '''def L_ref(vals):
    outs, _ = ref(*[v.copy() if isinstance(v, np.ndarray) else v for v in vals])
    return float(sum(np.sum(np.asarray(w, np.float64) * np.asarray(outs[k], np.float64))
                     for k, w in zip(USED, WEIGHTS)))


def central(vals, j):
    """(want, compared): Richardson-extrapolated central differences of L_ref for argument j, and
    the elements not at a kink (the estimates with steps h and h/2 agree within KINK_FRAC * TOL)."""
    x = vals[j]
    xa = np.asarray(x, np.float64)
    want = np.full(xa.shape, np.nan)
    for idx in np.ndindex(xa.shape):
        if not np.isfinite(xa[idx]):
            continue
        d = []
        for h in (STEP * max(1.0, abs(xa[idx])), STEP * max(1.0, abs(xa[idx])) / 2):
            r = []
            for s in (1, -1):
                v = list(vals)
                y = xa.copy()
                y[idx] += s * h
                v[j] = y if isinstance(x, np.ndarray) else float(y)
                try:
                    with np.errstate(all="ignore"):
                        r.append(L_ref(v))
                except Exception:
                    r.append(np.nan)
            d.append((r[0] - r[1]) / (2 * h))
        if np.isfinite(d[0]) and np.isfinite(d[1]) and abs(d[0] - d[1]) <= KINK_FRAC * TOL[WRT.index(j)][0]:
            want[idx] = d[1] + (d[1] - d[0]) / 3
    return want


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    c = 0 if backend == "cpu" else 1
    em.init(backend)
    args = inputs()
    vals = [np.asarray(a, np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32 else
            (float(a) if isinstance(a, float) else a) for a in args]
    got = [np.asarray(t.numpy()) for t in f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args], *WEIGHTS)]
    ok = True
    L0 = L_ref(vals)
    print(f"L: got {float(got[0])!r}, expected {L0!r}")
    if not abs(float(got[0]) - L0) <= TOL_L[c]:
        ok = False
        print("L: MISMATCH")
    for k, j in enumerate(WRT):
        want = central(vals, j)
        g = got[1 + k].astype(np.float64)
        err = np.abs(g - want)
        bad = np.isfinite(want) & ~(err <= TOL[k][c])
        print(f"dL/d{k} (argument {j}): {int(np.isfinite(want).sum())} of {want.size} elements compared")
        if bad.any():
            ok = False
            i = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), want.shape)
            print(f"  MISMATCH at {i}: got {g[i]!r}, expected {want[i]!r} (tolerance {TOL[k][c]:.3g}; "
                  f"{int(bad.sum())} elements differ)")
    print("OK" if ok else "FAILED", backend)
    sys.exit(0 if ok else 1)''', ""]
    return "\n".join(L)
