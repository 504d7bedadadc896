"""Seeded random program generator for Ember's differential fuzzer.

One program = a list of statements, each emitted three ways from the same choice:
  * Ember source (the body of an `@em.compile` function with annotated arguments),
  * a NumPy float64 reference (f32 values as float64, i32/u32 as int64, bool as bool),
  * the same reference with an error bound per value (errs.py), which also rejects parts whose
    discontinuous ops (floor, comparisons, casts, argmax...) are too close to a jump.
The generator executes the checked reference after each part; a part that raises errs.Reject is
dropped and generated again. Every random decision goes through a Chooser, whose recorded
choices the minimizer shrinks (replaying a shorter/smaller choice list regenerates a simpler
program: choice 0 is always the simplest option). Input data come from numpy generators seeded
with (seed, k) for the k-th argument, so the same seed gives the same program on every machine
(with this generator: adding block kinds renumbers the programs of every seed). gen_isl.py adds
the blocks aimed at the dependence analysis' transformations.
"""
import contextlib
import os
import random

import numpy as np

from . import errs as E
from .gen_isl import IslBlocks

# Known Ember bugs that would otherwise fail a large share of programs. True: the generator avoids
# the program shape that triggers the bug (so the CI seeds pass and other bugs stay visible);
# set an entry to False once the bug is fixed (FINDINGS.md names each). Issue 10's (a) row loop
# and (b) composed clamped gathers are fixed in eb9a9d7, so the generator makes them (False).
KNOWN_BUGS = {
    "row_loop": False,                  # (a) y[t, i] = em.sum(w[i, k] * x[t, k], axis=1) in a host loop
    "composed_gather": False,           # (b) t = f(c[I, J + 2]); t[I, J - 2] dropped the inner clamp
    "scatter_reads_target": False,      # F2: not an Ember bug: NumPy's a[p] = a does not copy its value
                                        #     (the reference now copies it, as Ember's semantics do)
    "scalar_index_none": False,         # F3: s[None] on a scalar value keeps shape [] (NumPy: (1,))
    "scalar_broadcast_ones": False,     # F1 (fixed): em.broadcast_to(scalar, [3, 1]) or em.where(False, x, 0.5) segfaults
                                        #     the cpu codegen (KernelPrinter::edge_select, c_printer.cpp:208)
}

# Every feature the generator records (test_fuzz checks that the CI seeds cover them all).
ALL_FEATURES = [
    "T", "abs", "acos", "add", "argmax", "argmin", "asin", "atan", "atan2", "atomic", "atomic_add", "atomic_and",
    "atomic_exchange", "atomic_f32", "atomic_gather_clamp", "atomic_gather_wrap", "atomic_i32", "atomic_max",
    "atomic_min", "atomic_or", "atomic_u32", "atomic_xor", "barrier", "bitcast_f32_u32", "bitcast_u32_f32",
    "bool_logic", "bool_not", "break", "broadcast", "broadcast_to", "cast_bool_f32", "cast_bool_i32",
    "cast_bool_u32", "cast_f32_i32", "cast_f32_u32", "cast_i32_f32", "cast_i32_u32", "cast_u32_f32", "cast_u32_i32",
    "ceil", "clamp", "cmpsel", "compare", "composed_gather", "concat", "continue", "cos", "cosh", "dag_reuse",
    "div", "dot", "elementwise", "exp", "exp2", "flip", "floor", "floordiv", "fma", "frac", "gather",
    "gather_clamp", "gather_subscript", "gather_unsafe", "gather_wrap", "group", "group_buffer", "group_index",
    "group_reverse", "group_scan", "group_sum", "host_else", "host_if", "host_loop", "index_int", "index_negative",
    "index_none", "indices", "int_%", "int_&", "int_*", "int_+", "int_-", "int_//", "int_<<", "int_>>", "int_^",
    "int_abs", "int_max", "int_min", "int_neg", "int_sign", "int_|", "int_~", "isinf", "isnan", "kernel",
    "kernel_buffer", "kernel_else", "kernel_if", "kernel_load", "kernel_load_wrap", "kernel_loop",
    "kernel_loop_runtime", "kernel_loop_step", "kernel_var", "kernel_zeros", "lerp", "literal", "local_index",
    "log", "log2", "loop_runtime_count", "loop_step", "matmul", "max", "min", "mod", "mul", "nan_inf_inputs", "neg",
    "pow", "prefix_sum", "promote_i32_f32", "random", "reduce", "reduce_all", "reduce_any", "reduce_axis",
    "reduce_keepdims", "reduce_max", "reduce_mean", "reduce_min", "reduce_multi_axis", "reduce_norm", "reduce_prod",
    "reduce_sum", "repeat", "reshape", "round", "row_loop", "row_loop_issue_form", "row_loop_matvec",
    "row_loop_rnn", "row_loop_rnn2", "row_loop_rowsum", "rsqrt", "scalar_arg", "scatter", "scatter_flip",
    "scatter_indices", "scatter_into_arg", "scatter_perm", "scatter_slice", "scatter_then_use", "scatter_wrap",
    "sign", "sin", "sinh", "slice", "slice_negative", "slice_step", "smoothstep", "sqrt", "squeeze", "stack",
    "step", "sub", "symbolic_dim", "tan", "tanh", "tensor_else", "tensor_if", "transpose", "trunc", "unsqueeze",
    "var", "where",
    # gen_isl.py's blocks (the dependence analysis' transformations)
    "reduce_atomic", "reduce_atomic_f32", "reduce_atomic_i32", "reduce_atomic_u32", "reduce_atomic_rows",
    "reduce_atomic_cols", "reduce_atomic_3d", "reduce_atomic_shared_final", "inj_atomic", "inj_atomic_f32",
    "inj_atomic_i32", "inj_atomic_u32", "inj_atomic_stride", "inj_atomic_transpose", "inj_atomic_shift",
    "inj_atomic_flip", "inj_atomic_rotate", "inj_atomic_clamped_shift", "hostloop_kernels", "hostloop_independent",
    "hostloop_carried", "hostloop_rows", "hostloop_step", "hostloop_body_buffer", "hostloop_scan",
    "hostloop_accumulate", "hostloop_prev_row", "row_fuse", "row_fuse_own", "row_fuse_min_identity",
    "row_fuse_next", "row_fuse_mirror", "row_fuse_cols_own", "row_fuse_cols_reversed", "row_fuse_cols_rotated",
]

# Gradient mode (generate(..., grad=True), tests/fuzz/grad.py): Ember bugs the gradient fuzzer found,
# kept away from as KNOWN_BUGS does (tests/fuzz/FINDINGS.md names each).
GRAD_KNOWN_BUGS = {
    "atomic_minmax_f32": True,          # G1: em.grad through f32 em.atomic_min/max: silently zero, now a
                                        #     CompileError (unsupported): keep this True while it is
    "scatter_duplicate_targets": False,  # G2 (fixed in d9d3a18): a scatter whose indices repeat a target (the
                                         #     row loop's issue form y[t, i] = v, i of shape [M, K]) gave every
                                         #     write the target's cotangent (K times the gradient)
    "if_value_without_gradient": False,  # G3 (fixed in d9d3a18): v.val = y under em.if_ with y independent of
                                         #     every x kept the gradient of v's old value where the branch ran
}

FEATURES = []
GEN_ERRORS = [0]

# |x| + 0.5 (the positive operand of log, sqrt, division...): its error, with abs's kink checked in
# gradient mode (errs.absk)
ABS_HALF_ERR = "E.add({o}, {0}, E.absk(np.abs({0}), {0}, {e0}), 0.5, 0.0)"


def feature(*names):
    for n in names:
        if n not in FEATURES:
            FEATURES.append(n)


FLOAT_LITS = ["0.5", "1.5", "2.0", "-1.25", "0.75", "3.0", "0.25", "-0.5"]
INT_LITS = ["1", "2", "3", "5", "-1", "7", "-3"]
DIMS = [(1, 4), (3, 4), (4, 4), (2, 3), (17, 1), (5, 1), (8, 1), (100, 1)]  # (dim, weight)


class Chooser:
    """Random decisions, recorded so the minimizer can replay and shrink them (0 = simplest)."""

    def __init__(self, seed, prefix=None):
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.rec = []

    def int(self, lo, hi):
        if hi <= lo:
            return lo
        if self.prefix is not None:
            i = len(self.rec)
            r = self.prefix[i] if i < len(self.prefix) else 0
            r = max(0, min(r, hi - lo))
        else:
            r = self.rng.randint(0, hi - lo)
        self.rec.append(r)
        return lo + r

    def choice(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def coin(self, p):
        """True with probability p; the shrunk choice 0 gives False."""
        return self.int(0, 999) >= 1000 - int(p * 1000)

    def weighted(self, items):
        total = sum(w for w, _ in items)
        r = self.int(0, total - 1)
        for w, x in items:
            if r < w:
                return x
            r -= w
        return items[-1][1]


class V:
    """A generated value: its text in the Ember source, in the NumPy reference and of its error."""
    __slots__ = ("em", "np", "e", "dt", "shape")

    def __init__(self, em, np_, e, dt, shape):
        self.em, self.np, self.e, self.dt, self.shape = em, np_, e, dt, tuple(shape)


class Program:
    """A generated program: sources, inputs, reference results and error bounds."""

    def __init__(self, seed, em_src, np_src, args, outs, ref_outs, ref_errs, ref_args, features, choices,
                 gpu_ok=True, out_specs=(), grad=False):
        self.seed = seed
        self.em_src = em_src          # the module text defining `f` (the @em.compile function)
        self.np_src = np_src          # the module text defining `ref`
        self.args = args              # [(name, dtype, annotation text, data)]
        self.outs = outs              # [(dtype)] of the outputs
        self.ref_outs = ref_outs      # reference outputs (float64/int64/bool arrays)
        self.ref_errs = ref_errs      # error bounds, (2,) + shape each
        self.ref_args = ref_args      # tensor arguments after the run (None for scalars)
        self.features = features
        self.choices = choices
        self.gpu_ok = gpu_ok
        self.out_specs = list(out_specs)  # [(Ember text, shape with symbolic names)] of the outputs
        self.grad = grad              # made for the gradient mode (generate(grad=True))

    def inputs(self):
        """Fresh copies of the input data (programs may write their arguments)."""
        return [a[3].copy() if isinstance(a[3], np.ndarray) else a[3] for a in self.args]


NP_PRELUDE = '''import numpy as np


def clip(k, n):
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool):  # np.clip of a scalar costs ~20 us
        v = k if k > 0 else 0
        return type(k)(v if v < n - 1 else n - 1)
    return np.clip(k, 0, n - 1)


def fclip(x, lo, hi):
    """np.clip(x, lo, hi), faster on a float scalar (NaN stays NaN: max and min keep their first
    argument when a comparison is false)."""
    if isinstance(x, (float, np.floating)):
        return type(x)(min(max(x, lo), hi))
    return np.clip(x, lo, hi)


def zsum(x, axis=None, keepdims=False):
    """np.sum, except that a non-empty float sum whose terms are all -0.0 is -0.0: Ember's f32
    sums start from -0.0 (core/ir/eval.h, reduce_start)."""
    x = np.asarray(x)
    s = np.sum(x, axis=axis, keepdims=keepdims)
    if x.dtype.kind != "f" or x.size == 0:
        return s
    neg = np.all((x == 0) & np.signbit(x), axis=axis, keepdims=keepdims)
    return np.where(neg, -0.0, s)


def zmean(x, axis=None, keepdims=False):
    x = np.asarray(x, np.float64)
    n = x.size // max(np.size(np.sum(x, axis=axis, keepdims=keepdims)), 1)
    return zsum(x, axis, keepdims) / n


def zmatmul(a, b, fn=np.matmul):
    """fn (np.matmul or np.dot) with zsum's sign rule: -0.0 where every product is -0.0, counted
    with matmuls of indicators (a product is -0.0 when a factor is 0 and the signs differ)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    r = fn(a, b)
    k = a.shape[-1]
    if k == 0:
        return r
    za, zb = (a == 0).astype(float), (b == 0).astype(float)
    sa, sb = np.signbit(a).astype(float), np.signbit(b).astype(float)
    # (za | zb) & (sa ^ sb), expanded into products of one factor's and the other's indicators
    n = (fn(za * sa, 1 - sb) + fn(za * (1 - sa), sb) + fn(sa * (1 - za), zb * (1 - sb))
         + fn((1 - sa) * (1 - za), zb * sb))
    finite = np.isfinite(fn(np.abs(a), np.abs(b)))
    return np.where((n == k) & finite & (r == 0), -0.0, r)


def bits_f2u(x):
    return np.asarray(np.asarray(x, np.float64).astype(np.float32).view(np.uint32), np.int64)


def bits_u2f(x):
    return np.asarray(np.asarray(x, np.int64).astype(np.uint32).view(np.float32), np.float64)


def xxh(x, y):
    """xxHash32 of two u32 words (int64 arrays), as em.random.hash."""
    u = np.uint64
    M = u(0xFFFFFFFF)
    P2, P3, P4, P5 = u(2246822519), u(3266489917), u(668265263), u(374761393)
    x = np.asarray(x).astype(np.uint64) & M
    y = np.asarray(y).astype(np.uint64) & M
    h = (y + P5 + x * P3) & M
    h = ((((h << u(17)) | (h >> u(15))) & M) * P4) & M
    h = (h + y * P3) & M
    h = ((((h << u(17)) | (h >> u(15))) & M) * P4) & M
    h = ((h ^ (h >> u(15))) * P2) & M
    h = ((h ^ (h >> u(13))) * P3) & M
    return (h ^ (h >> u(16))).astype(np.int64)


def rand(shape, seed):
    key = xxh(seed & 0xFFFFFFFF, 0x243F6A88)
    flat = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return (xxh(flat, key) >> 8).astype(np.float64) * (1.0 / (1 << 24))
'''


def _cs(shape):
    return "(" + "".join(f"{d}, " for d in shape).rstrip(" ")[:-1] + ("," if len(shape) == 1 else "") + ")" \
        if shape else "()"


class Gen(IslBlocks):
    MAX_ELEMS = 1600

    def __init__(self, seed, choices=None, drop_outputs=(), grad=False):
        self.seed = seed
        self.grad = grad      # gradient mode: only the differentiable subset (see generate)
        self.c = Chooser(seed, choices)
        self.drop_outputs = set(drop_outputs)
        self.lines = []       # (em indent, em, np indent, np, err)
        self.npind = 1
        self.args = []        # (name, dtype, annotation, data)
        self.outs = []        # V
        self.sym = {}         # symbolic dim name -> value
        self.symsrc = {}      # symbolic dim name -> Ember text of it
        self.ind = 1
        self.n = 0
        self.nargs = 0
        self.features = set()
        self.pools = [[]]     # visible values per scope
        self.scope = "host"   # host | kernel
        self.kidx = []        # kernel / loop index values usable in kernel code
        self.gpu_ok = True
        self.env = None

    # ---- bookkeeping -----------------------------------------------------------------------
    def feat(self, *names):
        for n in names:
            feature(n)
            self.features.add(n)

    def name(self, p="v"):
        self.n += 1
        return f"{p}{self.n}"

    def line(self, em=None, np_=None, err=None):
        self.lines.append((self.ind, em, self.npind, np_, err))

    @contextlib.contextmanager
    def block(self, em, np_, err=None, scope=None):
        self.line(em, np_, err)
        d_np = 1 if np_ is not None else 0
        d_em = 1 if em is not None else 0
        self.ind += d_em
        self.npind += d_np
        self.pools.append([])
        old = self.scope
        if scope:
            self.scope = scope
        try:
            yield
        finally:
            self.ind -= d_em
            self.npind -= d_np
            self.pools.pop()
            self.scope = old

    def cshape(self, shape):
        return tuple(self.sym.get(d, d) for d in shape)

    def size(self, shape):
        return int(np.prod(self.cshape(shape))) if shape else 1

    def dims_em(self, shape):
        for d in shape:
            if isinstance(d, str) and d not in self.symsrc:
                self.new_arg("f32", (d,))  # an argument that binds the symbolic dim
        parts = [self.symsrc[d] if isinstance(d, str) else str(d) for d in shape]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def is_sym(self, shape):
        return any(isinstance(d, str) for d in shape)

    def pool_add(self, v):
        self.pools[-1].append(v)
        return v

    def visible(self):
        for p in self.pools:
            yield from p

    # ---- emitting ops ---------------------------------------------------------------------
    def op(self, em_t, np_t, err_t, dt, shape, *xs, pool=True):
        """Binds a new value: templates use {0}, {1}... for the operands, {e0}... for their errors
        and {o} for the result (in the error template)."""
        nm = self.name()
        em_ops = [x.em for x in xs]
        if xs and all(_is_lit(x) for x in xs) and not em_t.startswith("em."):
            em_ops[0] = f"em.{xs[0].dt}({em_ops[0]})"  # a traced constant, not Python arithmetic
        elif em_t.startswith("em.where") and len(xs) == 3 and _is_lit(xs[1]) and _is_lit(xs[2]):
            em_ops[1] = f"em.{xs[1].dt}({em_ops[1]})"  # where(c, 1, 2) alone would be i32
        np_ops = [x.np for x in xs]
        errs_ = {f"e{i}": x.e for i, x in enumerate(xs)}
        self.line(f"{nm} = " + em_t.format(*em_ops),
                  f"{nm} = " + np_t.format(*np_ops),
                  f"e{nm} = " + err_t.format(*np_ops, o=nm, **errs_))
        v = V(nm, nm, "e" + nm, dt, shape)
        return self.pool_add(v) if pool else v

    def lit(self, dt):
        if dt == "f32":
            t = self.c.choice(FLOAT_LITS)
        elif dt == "bool":
            if KNOWN_BUGS["scalar_broadcast_ones"]:  # em.where(False, ...) hits the same crash (F1)
                return self.scalar_arg("bool")
            t = self.c.choice(["True", "False"])
        elif dt == "u32":
            t = self.c.choice(["1", "3", "7", "12"])
        else:
            t = self.c.choice(INT_LITS)
        t2 = f"({t})" if t.startswith("-") else t
        npc = {"f32": "np.float64", "i32": "np.int64", "u32": "np.int64", "bool": "np.bool_"}[dt]
        if dt == "u32":  # a bare Python int would be i32 where no u32 value is beside it
            return V(f"em.u32({t})", f"{npc}({t})", "0.0", dt, ())
        return V(t2, f"{npc}({t})", "0.0", dt, ())

    # ---- arguments ------------------------------------------------------------------------
    def new_arg(self, dt, shape, lo=None, hi=None, kind="data"):
        """A tensor argument (shape: ints or symbolic names)."""
        k = self.nargs
        self.nargs += 1
        nm = f"a{k}"
        rng = np.random.default_rng([self.seed, k])
        cs = self.cshape(shape)
        for ax, d in enumerate(shape):
            if isinstance(d, str) and d not in self.symsrc:
                self.symsrc[d] = f"{nm}.shape[{ax}]"
        if dt == "f32":
            lo = -2.0 if lo is None else lo
            hi = 2.0 if hi is None else hi
            if kind == "grid":  # quarter-integers: sums are exact in any order
                data = (rng.integers(int(lo * 4), int(hi * 4) + 1, cs) / 4.0).astype(np.float32)
            else:
                data = rng.uniform(lo, hi, cs).astype(np.float32)
            data[data == 0] = 0.375
            if kind == "nan":
                flat = data.reshape(-1)
                flat[::3] = np.nan
                flat[1::4] = np.inf
                flat[2::5] = -np.inf
                self.nan_ok = True
        elif dt == "i32":
            lo = -20 if lo is None else lo
            hi = 20 if hi is None else hi
            data = rng.integers(lo, hi + 1, cs).astype(np.int32)
            if kind == "data":
                data[data == 0] = 3
            elif kind == "perm":
                data = rng.permutation(int(np.prod(cs))).reshape(cs).astype(np.int32)
        elif dt == "u32":
            if kind == "bits":
                data = rng.integers(1, 2 ** 32, cs, dtype=np.uint64).astype(np.uint32)
            else:
                data = rng.integers(1 if lo is None else lo, (40 if hi is None else hi) + 1, cs).astype(np.uint32)
        else:
            data = rng.uniform(size=cs) > 0.5
        if kind == "zeros":
            data = np.zeros(cs, data.dtype)
        ann_dims = ", ".join(repr(d) if isinstance(d, str) else str(d) for d in shape)
        ann = f"em.{dt}[{ann_dims}]" if shape else f"em.{dt}[()]"
        if not shape:
            ann = None
        self.args.append((nm, dt, ann, data))
        v = V(nm, nm, "e" + nm, dt, shape)
        self.pools[0].append(v)
        return v

    def scalar_arg(self, dt, value=None):
        k = self.nargs
        self.nargs += 1
        nm = f"s{k}"
        rng = np.random.default_rng([self.seed, k])
        if value is None:
            if dt == "f32":
                value = float(np.float32(rng.uniform(-2, 2)))
            elif dt == "i32":
                value = int(rng.integers(0, 6))
            elif dt == "bool":
                value = bool(rng.uniform() > 0.5)
        self.args.append((nm, dt, None, value))
        self.feat("scalar_arg")
        v = V(nm, nm, "e" + nm, dt, ())
        self.pools[0].append(v)
        return v

    # ---- shapes ---------------------------------------------------------------------------
    def dim(self, small=False):
        if small:
            return self.c.choice([1, 2, 3, 4])
        return self.c.weighted([(w, d) for d, w in DIMS])

    def shape(self, rank=None, max_elems=None, allow_sym=True):
        max_elems = max_elems or 400
        if rank is None:
            rank = self.c.weighted([(3, 1), (4, 2), (2, 3), (1, 0)])
        dims = []
        for _ in range(rank):
            d = self.dim()
            while int(np.prod(dims + [d])) > max_elems and d > 1:
                d = max(1, d // 4)
            dims.append(d)
        if allow_sym and dims and self.c.coin(0.12):
            ax = self.c.int(0, rank - 1)
            name = self.c.choice(["N", "M"])
            if name in self.sym and self.sym[name] != dims[ax]:
                name = name + "2" if name + "2" not in self.sym or self.sym[name + "2"] == dims[ax] else None
            if name:
                self.sym[name] = dims[ax]
                dims[ax] = name
                self.feat("symbolic_dim")
        return tuple(dims)

    def bshape(self, shape):
        """A shape that broadcasts to `shape` (leading dims dropped, some dims set to 1)."""
        s = list(shape)
        if s and self.c.coin(0.2):
            s = s[self.c.int(1, len(s)):]
        s = [1 if (self.c.coin(0.15) and d != 1) else d for d in s]
        if tuple(s) != tuple(shape):
            self.feat("broadcast")
        return tuple(s)

    # ---- expressions ----------------------------------------------------------------------
    def leaf(self, dt, shape):
        c = self.c
        if self.scope == "kernel":
            return self.kleaf(dt)
        cands = [v for v in self.visible() if v.dt == dt and self._bcast_ok(v.shape, shape)]
        opts = [(4, "arg"), (2, "lit"), (3 if cands else 0, "reuse"), (1, "sarg" if dt in ("f32", "i32") else "lit")]
        if dt == "i32" and shape and all(isinstance(d, int) or d in self.symsrc for d in shape):
            opts.append((3, "indices"))
        if dt == "f32" and shape and not self.is_sym(shape):
            opts.append((1, "rand"))
        kind = c.weighted(opts)
        if kind == "reuse":
            self.feat("dag_reuse")
            return c.choice(cands)
        if kind == "lit":
            self.feat("literal")
            return self.lit(dt)
        if kind == "sarg":
            for v in self.pools[0]:
                if v.dt == dt and v.em.startswith("s") and v.shape == () and c.coin(0.5):
                    return v
            return self.scalar_arg(dt)
        if kind == "indices":
            ax = c.int(0, len(shape) - 1)
            nm = self.name("i")
            names = ", ".join(f"{nm}_{k}" for k in range(len(shape)))
            self.line(f"{names}{',' if len(shape) == 1 else ''} = em.indices({self.dims_em(shape)})",
                      f"{names}{',' if len(shape) == 1 else ''} = np.indices({_cs(self.cshape(shape))})",
                      f"e{nm}_{ax} = E.z({nm}_{ax})")
            self.feat("indices")
            return self.pool_add(V(f"{nm}_{ax}", f"{nm}_{ax}", f"e{nm}_{ax}", "i32", shape))
        if kind == "rand":
            seed = c.int(0, 1000)
            self.feat("random")
            cs = self.cshape(shape)
            return self.op(f"em.random.rand({self.dims_em(shape)}, {seed})", f"rand({_cs(cs)}, {seed})", "E.z({o})",
                           "f32", shape)
        # a new argument
        s = self.bshape(shape)
        if dt == "u32":
            return self.new_arg(dt, s, kind="bits" if c.coin(0.3) else "data")
        return self.new_arg(dt, s)

    def _bcast_ok(self, s, shape):
        if len(s) > len(shape):
            return False
        for a, b in zip(reversed(s), reversed(shape)):
            if a != b and a != 1:
                return False
        return True

    def expr(self, dt, shape, depth):
        """A value of dtype dt whose shape broadcasts to `shape`."""
        c = self.c
        if depth <= 0 or c.coin(0.15):
            return self.leaf(dt, shape)
        if dt == "f32":
            return self.fexpr(shape, depth)
        if dt in ("i32", "u32"):
            return self.iexpr(dt, shape, depth)
        return self.bexpr(shape, depth)

    # float
    def fexpr(self, shape, depth):
        c = self.c
        tensor = self.scope == "host"
        kinds = [(6, "bin"), (6, "un"), (2, "where"), (2, "tern"), (2, "cast"), (1, "bitcast"), (3, "disc")]
        if tensor:
            kinds += [(3, "shape"), (2, "reduce"), (1, "matmul"), (2, "gather"), (1, "scan")]
        k = c.weighted(kinds)
        if k == "bin":
            return self.fbin(shape, depth)
        if k == "un":
            return self.fun(self.expr("f32", shape, depth - 1))
        if k == "where":
            cond = self.expr("bool", shape, depth - 1)
            a = self.expr("f32", shape, depth - 1)
            b = self.expr("f32", shape, depth - 1) if c.coin(0.7) else self.lit("f32")
            self.feat("where")
            return self.op("em.where({0}, {1}, {2})", "np.where({0}, {1}, {2})", "E.where({o}, {0}, {1}, {e1}, {2}, {e2})",
                           "f32", self.bshape_of(cond, a, b), cond, a, b)
        if k == "tern":
            return self.ftern(shape, depth)
        if k == "cast":
            src = c.choice(["i32", "u32", "bool"])
            x = self.expr(src, shape, depth - 1)
            self.feat(f"cast_{src}_f32")
            return self.op("em.f32({0})", "({0} * 1.0)", "E.cast_float({o})", "f32", x.shape, x)
        if k == "bitcast":
            u = self.expr("u32", shape, depth - 1)
            m = self.op("({0} & 0x7FFFFF) | 0x3F800000", "({0} & 0x7FFFFF) | 0x3F800000", "E.u32({o})", "u32", u.shape, u)
            self.feat("bitcast_u32_f32")
            return self.op("em.bitcast({0}, em.f32)", "bits_u2f({0})", "E.z({o})", "f32", m.shape, m)
        if k == "disc":
            x = self.expr("f32", shape, depth - 1)
            name = c.choice(["floor", "ceil", "round", "trunc", "frac", "sign"])
            self.feat(name)
            if name == "frac":
                return self.op("em.frac({0})", "({0} - np.floor({0}))", "E.frac({o}, {0}, {e0})", "f32", x.shape, x)
            f = {"floor": "np.floor", "ceil": "np.ceil", "round": "np.round", "trunc": "np.trunc", "sign": "np.sign"}[name]
            return self.op(f"em.{name}({{0}})", f"{f}({{0}})", f"E.disc({f}, {{o}}, {{0}}, {{e0}})", "f32", x.shape, x)
        if k == "shape":
            return self.shape_op("f32", shape, depth)
        if k == "reduce":
            return self.reduce_op("f32", shape, depth)
        if k == "matmul":
            return self.matmul_op(shape, depth)
        if k == "gather":
            return self.gather_op("f32", shape, depth)
        if k == "scan":
            return self.scan_op("f32", shape, depth)
        raise AssertionError(k)

    def bshape_of(self, *xs):
        shapes = [x.shape for x in xs]
        r = max(len(s) for s in shapes)
        out = []
        for k in range(r):
            ds = [s[len(s) - r + k] for s in shapes if len(s) - r + k >= 0]
            nz = [d for d in ds if d != 1]
            out.append(nz[0] if nz else 1)
        return tuple(out)

    def fbin(self, shape, depth):
        c = self.c
        a = self.expr("f32", shape, depth - 1)
        bdt = "i32" if c.coin(0.1) else "f32"
        b = self.expr(bdt, shape, depth - 1)
        if bdt == "i32":
            self.feat("promote_i32_f32")
            b = self.op("em.f32({0})" if c.coin(0.5) else "({0} + 0.0)", "({0} * 1.0)", "E.cast_float({o})", "f32",
                        b.shape, b) if b.em[0] != "(" and not b.em[0].isdigit() else b
        if a.shape == () and b.shape == () and a.e == "0.0" and b.e == "0.0" and shape:
            a = self.leaf("f32", shape)
        sh = self.bshape_of(a, b)
        name = c.weighted([(4, "add"), (3, "sub"), (4, "mul"), (2, "div"), (1, "floordiv"), (1, "mod"), (1, "pow"),
                           (1, "atan2"), (2, "min"), (2, "max"), (1, "cmpsel")])
        self.feat(name)
        if name in ("add", "sub", "mul"):
            sym = {"add": "+", "sub": "-", "mul": "*"}[name]
            if name == "sub" and c.coin(0.2):
                self.feat("neg")
                b = self.op("-{0}", "-{0}", "E.same({o}, {e0})", "f32", b.shape, b)
                sym = "+"
            ef = "E.mul" if name == "mul" else "E.add"
            return self.op(f"{{0}} {sym} {{1}}", f"{{0}} {sym} {{1}}", ef + "({o}, {0}, {e0}, {1}, {e1})", "f32", sh, a, b)
        if name in ("div", "floordiv", "mod"):
            if name != "div" or c.coin(0.6):
                b = self.op("em.abs({0}) + 0.5", "np.abs({0}) + 0.5", ABS_HALF_ERR, "f32", b.shape, b)
            if name == "div":
                return self.op("{0} / {1}", "{0} / {1}", "E.div({o}, {0}, {e0}, {1}, {e1})", "f32", sh, a, b)
            if name == "floordiv":
                return self.op("{0} // {1}", "np.floor_divide({0}, {1})", "E.fmod({o}, {0}, {e0}, {1}, {e1}, True)",
                               "f32", sh, a, b)
            return self.op("{0} % {1}", "np.mod({0}, {1})", "E.fmod({o}, {0}, {e0}, {1}, {e1})", "f32", sh, a, b)
        if name == "pow":
            a = self.op("em.abs({0}) + 0.5", "np.abs({0}) + 0.5", ABS_HALF_ERR, "f32", a.shape, a)
            b = self.op("em.clamp({0}, -3.0, 3.0)", "fclip({0}, -3.0, 3.0)", "E.clampk({o}, {0}, {e0}, -3.0, 3.0)",
                        "f32", b.shape, b)
            self.feat("clamp")
            t = "{0} ** {1}" if c.coin(0.5) else "em.pow({0}, {1})"
            return self.op(t, "np.power({0}, {1})", "E.math2('pow', np.power, {o}, {0}, {e0}, {1}, {e1})", "f32", sh, a, b)
        if name == "atan2":
            return self.op("em.atan2({0}, {1})", "np.arctan2({0}, {1})",
                           "E.math2('atan2', np.arctan2, {o}, {0}, {e0}, {1}, {e1})", "f32", sh, a, b)
        if name in ("min", "max"):
            return self.op(f"em.{name}({{0}}, {{1}})", f"np.{name}imum({{0}}, {{1}})", "E.minmax({o}, {0}, {e0}, {1}, {e1})",
                           "f32", sh, a, b)
        # cmpsel: where(a < b, a, b) spelled with a comparison
        cond = self.cmp(a, b)
        return self.op("em.where({0}, {1}, {2})", "np.where({0}, {1}, {2})", "E.where({o}, {0}, {1}, {e1}, {2}, {e2})",
                       "f32", sh, cond, a, b)

    def cmp(self, a, b):
        c = self.c
        sym = c.choice(["<", "<=", ">", ">=", "==", "!="])
        self.feat("compare")
        npf = {"<": "np.less", "<=": "np.less_equal", ">": "np.greater", ">=": "np.greater_equal", "==": "np.equal",
               "!=": "np.not_equal"}[sym]
        return self.op(f"{{0}} {sym} {{1}}", f"{npf}({{0}}, {{1}})", "E.cmp({o}, {0}, {e0}, {1}, {e1})", "bool",
                       self.bshape_of(a, b), a, b)

    UN = {  # name: (numpy function, precondition)
        "abs": ("np.abs", None), "neg": ("np.negative", None), "exp": ("np.exp", "clamp8"), "exp2": ("np.exp2", "clamp8"),
        "log": ("np.log", "pos"), "log2": ("np.log2", "pos"), "sqrt": ("np.sqrt", "pos"), "rsqrt": (None, "pos"),
        "sin": ("np.sin", "clamp20"), "cos": ("np.cos", "clamp20"), "tan": ("np.tan", "clamp1"),
        "asin": ("np.arcsin", "unit"), "acos": ("np.arccos", "unit"), "atan": ("np.arctan", None),
        "sinh": ("np.sinh", "clamp5"), "cosh": ("np.cosh", "clamp5"), "tanh": ("np.tanh", None),
    }

    def fun(self, x):
        c = self.c
        name = c.choice(list(self.UN))
        f, pre = self.UN[name]
        self.feat(name)
        if pre == "pos":
            x = self.op("em.abs({0}) + 0.5", "np.abs({0}) + 0.5", ABS_HALF_ERR, "f32", x.shape, x)
        elif pre:
            lim = {"clamp8": "8.0", "clamp20": "20.0", "clamp1": "1.1875", "unit": "0.875", "clamp5": "5.0"}[pre]
            x = self.op(f"em.clamp({{0}}, -{lim}, {lim})", f"fclip({{0}}, -{lim}, {lim})",
                        f"E.clampk({{o}}, {{0}}, {{e0}}, -{lim}, {lim})",
                        "f32", x.shape, x)
            self.feat("clamp")
        if name == "abs":
            t = "abs({0})" if c.coin(0.3) else "em.abs({0})"
            return self.op(t, "np.abs({0})", "E.absk({o}, {0}, {e0})", "f32", x.shape, x)
        if name == "neg":
            return self.op("-{0}", "-{0}", "E.same({o}, {e0})", "f32", x.shape, x)
        if name == "rsqrt":
            return self.op("em.rsqrt({0})", "1.0 / np.sqrt({0})",
                           "E.math1('rsqrt', lambda t: 1.0 / np.sqrt(t), {o}, {0}, {e0})", "f32", x.shape, x)
        return self.op(f"em.{name}({{0}})", f"{f}({{0}})", f"E.math1('{name}', {f}, {{o}}, {{0}}, {{e0}})", "f32",
                       x.shape, x)

    def ftern(self, shape, depth):
        c = self.c
        name = c.choice(["clamp", "lerp", "smoothstep", "step", "fma"])
        self.feat(name)
        x = self.expr("f32", shape, depth - 1)
        if name == "clamp":
            lo, hi = c.choice([("-1.0", "1.0"), ("0.0", "2.0"), ("-0.5", "0.25")])
            return self.op(f"em.clamp({{0}}, {lo}, {hi})", f"fclip({{0}}, {lo}, {hi})",
                           f"E.clampk({{o}}, {{0}}, {{e0}}, {lo}, {hi})", "f32",
                           x.shape, x)
        if name == "step":
            edge = self.lit("f32")
            return self.op("em.step({0}, {1})", "np.where({1} < {0}, 0.0, 1.0)", "E.cmp({o}, {1}, {e1}, {0}, 0.0)",
                           "f32", x.shape, edge, x)
        if name == "smoothstep":
            return self.op("em.smoothstep(-1.0, 1.5, {0})", "E.smooth(-1.0, 1.5, {0})",
                           "E.math1('tanh', lambda t: E.smooth(-1.0, 1.5, t), {o}, {0}, {e0}) * 4", "f32", x.shape, x)
        y = self.expr("f32", shape, depth - 1)
        z = self.expr("f32", shape, depth - 1) if c.coin(0.6) else self.lit("f32")
        sh = self.bshape_of(x, y, z)
        if name == "lerp":
            return self.op("em.lerp({0}, {1}, {2})", "{0} + ({1} - {0}) * {2}",
                           "E.lerp({o}, {0}, {e0}, {1}, {e1}, {2}, {e2})", "f32", sh, x, y, z)
        return self.op("em.fma({0}, {1}, {2})", "{0} * {1} + {2}", "E.fma({o}, {0}, {e0}, {1}, {e1}, {2}, {e2})",
                       "f32", sh, x, y, z)

    # integers
    def iexpr(self, dt, shape, depth):
        c = self.c
        tensor = self.scope == "host"
        kinds = [(8, "bin"), (3, "un"), (4, "cast"), (1, "where")]
        if tensor:
            kinds += [(1, "reduce"), (1, "argext"), (1, "scan"), (1, "gather"), (1, "shape")]
        if dt == "u32" and not self.grad:  # bits of a float: piecewise linear in it, but no gradient
            kinds.append((1, "bitcast"))
        k = c.weighted(kinds)
        if k == "bin":
            a = self.expr(dt, shape, depth - 1)
            b = self.expr(dt, shape, depth - 1)
            sh = self.bshape_of(a, b)
            name = c.weighted([(3, "+"), (2, "-"), (2, "*"), (1, "//"), (1, "%"), (2, "&"), (2, "|"), (2, "^"),
                               (2, "<<"), (2, ">>"), (1, "min"), (1, "max")])
            self.feat(f"int_{name}")
            chk = "E.i32({o})" if dt == "i32" else "E.u32({o})"
            wrap = (lambda t: t) if dt == "i32" else (lambda t: f"({t}) % 4294967296")
            if name in ("//", "%"):
                b = self.op("{0} | 1", "{0} | 1", chk, dt, b.shape, b)
                npf = "np.floor_divide" if name == "//" else "np.mod"
                return self.op(f"{{0}} {name} {{1}}", f"{npf}({{0}}, E.nz({{1}}))", chk, dt, sh, a, b)
            if name in ("<<", ">>"):
                b = self.op("{0} & 7", "{0} & 7", chk, dt, b.shape, b)
                return self.op(f"{{0}} {name} {{1}}", wrap(f"{{0}} {name} {{1}}"), chk, dt, sh, a, b)
            if name in ("min", "max"):
                return self.op(f"em.{name}({{0}}, {{1}})", f"np.{name}imum({{0}}, {{1}})", chk, dt, sh, a, b)
            return self.op(f"{{0}} {name} {{1}}", wrap(f"{{0}} {name} {{1}}"), chk, dt, sh, a, b)
        if k == "un":
            x = self.expr(dt, shape, depth - 1)
            opts = ["~"] + (["neg", "abs", "sign"] if dt == "i32" else [])
            name = c.choice(opts)
            self.feat(f"int_{name}")
            if name == "~":
                return self.op("~{0}", "~{0}" if dt == "i32" else "(~{0}) & 0xFFFFFFFF", "E.z({o})", dt, x.shape, x)
            if name == "neg":
                return self.op("-{0}", "-{0}", "E.i32({o})", dt, x.shape, x)
            return self.op(f"em.{name}({{0}})", f"np.{name}({{0}})", "E.i32({o})", dt, x.shape, x)
        if k == "cast":
            src = c.choice(["f32", "i32" if dt == "u32" else "u32", "bool"])
            x = self.expr(src, shape, depth - 1)
            self.feat(f"cast_{src}_{dt}")
            if src == "f32":
                if dt == "u32":
                    x = self.op("em.abs({0})", "np.abs({0})", "E.same({o}, {e0})", "f32", x.shape, x)
                s = c.choice(["1.0", "4.0", "16.0"])
                x = self.op(f"{{0}} * {s}", f"{{0}} * {s}", f"E.mul({{o}}, {{0}}, {{e0}}, {s}, 0.0)", "f32", x.shape, x)
                return self.op(f"em.{dt}({{0}})", "np.trunc({0}).astype(np.int64)",
                               f"E.cast_int({{o}}, {{0}}, {{e0}}, {dt == 'u32'})", dt, x.shape, x)
            if src == "bool":
                return self.op(f"em.{dt}({{0}})", "({0} * 1)", "E.z({o})", dt, x.shape, x)
            if dt == "u32":
                return self.op("em.u32({0})", "{0} % 4294967296", "E.z({o})", dt, x.shape, x)
            return self.op("em.i32({0})", "(({0} + 2**31) % 2**32) - 2**31", "E.z({o})", dt, x.shape, x)
        if k == "where":
            cond = self.expr("bool", shape, depth - 1)
            a, b = self.expr(dt, shape, depth - 1), self.expr(dt, shape, depth - 1)
            self.feat("where")
            return self.op("em.where({0}, {1}, {2})", "np.where({0}, {1}, {2})", "E.z({o})", dt, self.bshape_of(cond, a, b),
                           cond, a, b)
        if k == "bitcast":
            x = self.expr("f32", shape, depth - 1)
            self.feat("bitcast_f32_u32")
            return self.op("em.bitcast({0}, em.u32)", "bits_f2u({0})", "E.disc(lambda t: t, {o}*0, {0}*0, {e0})",
                           "u32", x.shape, x)
        if k == "reduce":
            return self.reduce_op(dt, shape, depth)
        if k == "argext":
            return self.argext_op(shape, depth) if dt == "i32" else self.reduce_op(dt, shape, depth)
        if k == "scan":
            return self.scan_op(dt, shape, depth)
        if k == "gather":
            return self.gather_op(dt, shape, depth)
        return self.shape_op(dt, shape, depth)

    def bexpr(self, shape, depth):
        c = self.c
        tensor = self.scope == "host"
        kinds = [(5, "cmp"), (3, "logic"), (1, "not"), (1, "isnan")]
        if tensor:
            kinds.append((1, "anyall"))
        k = c.weighted(kinds)
        if k == "cmp":
            dt = c.weighted([(3, "f32"), (2, "i32"), (1, "u32")])
            a = self.expr(dt, shape, depth - 1)
            b = self.expr(dt, shape, depth - 1)
            return self.cmp(a, b)
        if k == "logic":
            a, b = self.expr("bool", shape, depth - 1), self.expr("bool", shape, depth - 1)
            sym = c.choice(["&", "|", "^"])
            self.feat("bool_logic")
            npf = {"&": "np.logical_and", "|": "np.logical_or", "^": "np.logical_xor"}[sym]
            return self.op(f"{{0}} {sym} {{1}}", f"{npf}({{0}}, {{1}})", "E.z({o})", "bool", self.bshape_of(a, b), a, b)
        if k == "not":
            a = self.expr("bool", shape, depth - 1)
            self.feat("bool_not")
            return self.op("~{0}", "np.logical_not({0})", "E.z({o})", "bool", a.shape, a)
        if k == "isnan":
            x = self.expr("f32", shape, depth - 1)
            name = c.choice(["isnan", "isinf"])
            self.feat(name)
            return self.op(f"em.{name}({{0}})", f"np.{name}({{0}})", "E.z({o})", "bool", x.shape, x)
        return self.reduce_op("bool", shape, depth)

    # ---- tensor-level ops ------------------------------------------------------------------
    def full(self, v, shape):
        """v broadcast to exactly `shape` (an explicit em.broadcast_to when it is not already)."""
        if _is_lit(v) or v.em.startswith("em.u32("):  # a Python number: make it a traced constant
            npc = {"f32": "np.float64", "i32": "np.int64", "u32": "np.int64", "bool": "np.bool_"}[v.dt]
            v = self.op(f"em.{v.dt}({{0}})" if not v.em.startswith("em.") else "{0}", f"{npc}({{0}})", "E.z({o})",
                        v.dt, (), v)
        if tuple(v.shape) == tuple(shape):
            return v
        self.feat("broadcast_to")
        cs = self.cshape(shape)
        if KNOWN_BUGS["scalar_broadcast_ones"] and v.shape == () and len(shape) >= 1:
            z = self.new_arg(v.dt, shape, kind="zeros")  # v + zeros: the same value without the crashing kernel
            if v.dt == "bool":
                return self.op("{0} | {1}", "np.logical_or({0}, {1})", "E.z({o})", "bool", shape, v, z)
            return self.op("{0} + {1}", "{0} + {1}", "E.bc({e0}, {o}.shape)", v.dt, shape, v, z)
        return self.op(f"em.broadcast_to({{0}}, {self.dims_em(shape)})", f"np.broadcast_to({{0}}, {_cs(cs)})",
                       f"E.bc({{e0}}, {_cs(cs)})", v.dt, shape, v)

    def reduce_op(self, dt, shape, depth):
        c = self.c
        if self.is_sym(shape):
            return self.leaf(dt, shape)
        keep = c.coin(0.3)
        full = not shape or c.coin(0.1)
        if full:
            xs = self.shape(rank=c.int(1, 3), max_elems=200, allow_sym=False)
            axes = None
        else:
            n_ax = c.int(1, 2)
            xs = list(shape)
            axes = []
            for _ in range(n_ax):
                p = c.int(0, len(xs))
                xs.insert(p, c.choice([1, 2, 3, 4, 5, 17]))
                axes = [a + 1 if a >= p else a for a in axes] + [p]
            if keep:
                for a in axes:
                    pass
            xs = tuple(xs)
            if keep:  # keepdims: the target needs size-1 dims where the axes were
                pass
            if self.size(xs) > self.MAX_ELEMS:
                return self.leaf(dt, shape)
        if dt == "bool":
            src = self.expr("bool", xs, depth - 1) if c.coin(0.5) else self.cmp(self.expr("f32", xs, depth - 1),
                                                                                  self.lit("f32"))
            name = c.choice(["any", "all"])
            efn = "E.z({o})"
        elif dt == "f32":
            name = c.choice(["sum", "mean", "max", "min", "prod", "norm"])
            src = self.expr("f32", xs, depth - 1)
            if name == "prod":
                src = self.op("em.cos({0}) * 0.5 + 1.0", "np.cos({0}) * 0.5 + 1.0",
                              "E.add({o}, np.cos({0}) * 0.5, E.mul(np.cos({0}) * 0.5, np.cos({0}), "
                              "E.math1('cos', np.cos, np.cos({0}), {0}, {e0}), 0.5, 0.0), 1.0, 0.0)", "f32", src.shape, src)
            efn = {"sum": "E.rsum({o}, {0}, {e0}, AX, KD)", "mean": "E.rsum({o}, {0}, {e0}, AX, KD, True)",
                   "max": "E.rmax({o}, {0}, {e0}, AX, KD)", "min": "E.rmax({o}, {0}, {e0}, AX, KD)",
                   "prod": "E.rprod({o}, {0}, {e0}, AX, KD)", "norm": "E.rnorm({o}, {0}, {e0}, AX, KD)"}[name]
        else:
            name = c.choice(["sum", "max", "min"])
            src = self.expr(dt, xs, depth - 1)
            efn = "E.i32({o})" if dt == "i32" else "E.u32({o})"
            if dt == "u32" and name == "sum":
                name = "max"
        src = self.full(src, xs)
        self.feat(f"reduce_{name}", "reduce_keepdims" if keep else "reduce", "reduce_multi_axis" if axes and
                  len(axes) > 1 else "reduce_axis" if axes else "reduce_all")
        ax_em = "None" if axes is None else (str(axes[0]) if len(axes) == 1 and c.coin(0.5) else str(tuple(axes)))
        # negative axes sometimes
        if axes is not None and len(axes) == 1 and c.coin(0.3):
            ax_em = str(axes[0] - len(xs))
        ax_np = "None" if axes is None else str(tuple(axes))
        kd = "True" if keep else "False"
        npn = {"sum": "zsum", "mean": "zmean", "max": "np.max", "min": "np.min", "prod": "np.prod",
               "any": "np.any", "all": "np.all"}.get(name)
        if name == "norm":
            npx = f"np.sqrt(np.sum({{0}} * {{0}}, axis={ax_np}, keepdims={kd}))"
        else:
            npx = f"{npn}({{0}}, axis={ax_np}, keepdims={kd})"
        if dt in ("i32", "u32") and name == "sum":
            pass
        if axes is None:
            oshape = (1,) * len(xs) if keep else ()
        else:
            oshape = tuple((1 if k in axes else d) for k, d in enumerate(xs) if keep or k not in axes)
        kw = f", axis={ax_em}" + (", keepdims=True" if keep else "")
        v = self.op(f"em.{name}({{0}}{kw})", npx, efn.replace("AX", ax_np).replace("KD", kd), dt, oshape, src)
        if keep and axes is not None:  # back to the target shape
            v = self.op(f"em.squeeze({{0}}, axis={tuple(axes)})", f"np.squeeze({{0}}, axis={tuple(axes)})",
                        f"E.mapn(lambda t: np.squeeze(t, axis={tuple(axes)}), {{e0}})", dt, tuple(shape), v)
            self.feat("squeeze")
        elif keep:
            return self.leaf(dt, shape) if shape else self.op("em.reshape({0}, ())", "np.reshape({0}, ())",
                                                              "E.mapn(lambda t: np.reshape(t, ()), {e0})", dt, (), v)
        return v

    def argext_op(self, shape, depth):
        c = self.c
        if self.is_sym(shape):
            return self.leaf("i32", shape)
        name = c.choice(["argmax", "argmin"])
        if not shape or c.coin(0.15):
            xs = self.shape(rank=c.int(1, 2), max_elems=100, allow_sym=False)
            x = self.full(self.expr("f32", xs, depth - 1), xs)
            self.feat(name)
            v = self.op(f"em.{name}({{0}})", f"np.{name}({{0}})", f"E.argext({{o}}, {{0}}, {{e0}}, None, False, "
                        f"{name == 'argmax'})", "i32", (), x)
            return v
        p = c.int(0, len(shape))
        xs = list(shape)
        xs.insert(p, c.choice([2, 3, 4, 17]))
        xs = tuple(xs)
        if self.size(xs) > self.MAX_ELEMS:
            return self.leaf("i32", shape)
        x = self.full(self.expr("f32", xs, depth - 1), xs)
        self.feat(name)
        return self.op(f"em.{name}({{0}}, axis={p})", f"np.{name}({{0}}, axis={p})",
                       f"E.argext({{o}}, {{0}}, {{e0}}, {p}, False, {name == 'argmax'})", "i32", shape, x)

    def scan_op(self, dt, shape, depth):
        if not shape or self.is_sym(shape):
            return self.leaf(dt, shape)
        ax = self.c.int(0, len(shape) - 1)
        x = self.full(self.expr(dt, shape, depth - 1), shape)
        self.feat("prefix_sum")
        axe = ax - len(shape) if self.c.coin(0.3) else ax
        ef = f"E.cumsum({{o}}, {{0}}, {{e0}}, {ax})" if dt == "f32" else "E.i32({o})"
        return self.op(f"em.prefix_sum({{0}}, axis={axe})", f"np.cumsum({{0}}, axis={ax})", ef, dt, shape, x)

    def matmul_op(self, shape, depth):
        c = self.c
        if self.is_sym(shape) or len(shape) > 3:
            return self.leaf("f32", shape)
        k = c.choice([1, 2, 3, 4, 17])
        form = c.choice(["@", "matmul", "dot"])
        self.feat("matmul" if form != "dot" else "dot")
        if len(shape) == 0:
            a = self.full(self.expr("f32", (k,), depth - 1), (k,))
            b = self.full(self.expr("f32", (k,), depth - 1), (k,))
        elif len(shape) == 1:
            if c.coin(0.5):
                a, b = self.full(self.expr("f32", (k,), depth - 1), (k,)), self.full(self.expr("f32", (k, shape[0]), depth - 1),
                                                                                   (k, shape[0]))
            else:
                a, b = self.full(self.expr("f32", (shape[0], k), depth - 1), (shape[0], k)), \
                    self.full(self.expr("f32", (k,), depth - 1), (k,))
        elif len(shape) == 2:
            a = self.full(self.expr("f32", (shape[0], k), depth - 1), (shape[0], k))
            b = self.full(self.expr("f32", (k, shape[1]), depth - 1), (k, shape[1]))
        else:
            form = "@" if form == "dot" else form
            a = self.full(self.expr("f32", (shape[0], shape[1], k), depth - 1), (shape[0], shape[1], k))
            bs = (k, shape[2]) if c.coin(0.5) else (shape[0], k, shape[2])
            b = self.full(self.expr("f32", bs, depth - 1), bs)
        emt = {"@": "{0} @ {1}", "matmul": "em.matmul({0}, {1})", "dot": "em.dot({0}, {1})"}[form]
        npf = "np.dot" if form == "dot" else "np.matmul"
        return self.op(emt, f"zmatmul({{0}}, {{1}}, {npf})", f"E.matmul({{o}}, {{0}}, {{e0}}, {{1}}, {{e1}}, {npf})", "f32",
                       tuple(shape), a, b)

    def shape_op(self, dt, shape, depth):
        c = self.c
        sym = self.is_sym(shape)
        opts = [(3, "transpose"), (2, "flip"), (3, "unsqueeze"), (1, "squeeze"), (4, "slice")]
        if not sym:
            opts += [(3, "reshape"), (2, "concat"), (2, "stack"), (2, "repeat"), (1, "broadcast_to")]
        k = c.weighted(opts)
        S = tuple(shape)
        cs = self.cshape(S)
        if k == "transpose" and len(S) >= 2:
            rest = list(range(len(S)))
            perm = [rest.pop(c.int(0, len(rest) - 1)) for _ in range(len(S))]
            if c.coin(0.4) or perm == list(range(len(S))):
                perm = list(range(len(S)))[::-1]
                style = c.choice(["T", "fn"])
            else:
                style = "axes"
            inv = list(np.argsort(perm))
            xs = tuple(S[i] for i in inv)  # x.transpose(perm) has shape xs[perm] = S
            x = self.full(self.expr(dt, xs, depth - 1), xs)
            self.feat("transpose" if style != "T" else "T")
            emt = {"T": "{0}.T", "fn": "em.transpose({0})", "axes": f"em.transpose({{0}}, {tuple(perm)})"}[style]
            return self.op(emt, f"np.transpose({{0}}, {tuple(perm)})",
                           f"E.mapn(lambda t: np.transpose(t, {tuple(perm)}), {{e0}})", dt, S, x)
        if k == "flip" and S:
            ax = c.int(0, len(S) - 1)
            x = self.full(self.expr(dt, S, depth - 1), S)
            self.feat("flip")
            if c.coin(0.3) and ax == 0:
                self.feat("slice_step")
                return self.op("{0}[::-1]", "{0}[::-1]", "E.mapn(lambda t: t[::-1], {e0})", dt, S, x)
            return self.op(f"em.flip({{0}}, axis={ax})", f"np.flip({{0}}, axis={ax})",
                           f"E.mapn(lambda t: np.flip(t, axis={ax}), {{e0}})", dt, S, x)
        if k == "unsqueeze" and 1 in S:
            p = S.index(1)
            xs = S[:p] + S[p + 1:]
            x = self.full(self.expr(dt, xs, depth - 1), xs)
            if c.coin(0.5) or (KNOWN_BUGS["scalar_index_none"] and not xs):
                self.feat("unsqueeze")
                return self.op(f"em.unsqueeze({{0}}, {p})", f"np.expand_dims({{0}}, {p})",
                               f"E.mapn(lambda t: np.expand_dims(t, {p}), {{e0}})", dt, S, x)
            self.feat("index_none")
            key = ", ".join([":"] * p + ["None"])
            return self.op(f"{{0}}[{key}]", f"{{0}}[{key}]", f"E.mapn(lambda t: t[{key}], {{e0}})", dt, S, x)
        if k == "squeeze" and len(S) < 4:
            p = c.int(0, len(S))
            xs = S[:p] + (1,) + S[p:]
            x = self.full(self.expr(dt, xs, depth - 1), xs)
            self.feat("squeeze")
            return self.op(f"em.squeeze({{0}}, axis={p})", f"np.squeeze({{0}}, axis={p})",
                           f"E.mapn(lambda t: np.squeeze(t, axis={p}), {{e0}})", dt, S, x)
        if k == "slice" and S:
            return self.slice_op(dt, S, depth)
        if sym or k in ("transpose", "flip", "unsqueeze", "squeeze", "slice"):
            return self.expr(dt, S, depth - 1)
        n = int(np.prod(cs)) if cs else 1
        if k == "reshape":
            # another factorization of n
            facs = [d for d in range(1, n + 1) if n % d == 0]
            a = c.choice(facs)
            xs = (a, n // a) if c.coin(0.7) else (n,)
            if c.coin(0.3) and len(xs) == 2 and xs[1] % 2 == 0:
                xs = (xs[0], 2, xs[1] // 2)
            x = self.full(self.expr(dt, xs, depth - 1), xs)
            self.feat("reshape")
            tgt = list(S)
            if tgt and c.coin(0.3):
                tgt[c.int(0, len(tgt) - 1)] = -1
            emt = f"em.reshape({{0}}, {_cs(tuple(tgt))})" if c.coin(0.5) else f"{{0}}.reshape({_cs(tuple(tgt))})"
            return self.op(emt, f"np.reshape({{0}}, {_cs(S)})", f"E.mapn(lambda t: np.reshape(t, {_cs(S)}), {{e0}})",
                           dt, S, x)
        if k == "concat" and S and any(d >= 2 for d in S):
            ax = c.choice([i for i, d in enumerate(S) if d >= 2])
            cut = c.int(1, S[ax] - 1)
            s1 = S[:ax] + (cut,) + S[ax + 1:]
            s2 = S[:ax] + (S[ax] - cut,) + S[ax + 1:]
            x = self.full(self.expr(dt, s1, depth - 1), s1)
            y = self.full(self.expr(dt, s2, depth - 1), s2)
            self.feat("concat")
            return self.op(f"em.concat([{{0}}, {{1}}], axis={ax})", f"np.concatenate([{{0}}, {{1}}], axis={ax})",
                           f"E.mapn(lambda t, u: np.concatenate([t, u], axis={ax}), {{e0}}, {{e1}})", dt, S, x, y)
        if k == "stack" and S and S[0] in (1, 2, 3) or k == "stack" and S and S[-1] in (2, 3):
            ax = 0 if S[0] in (1, 2, 3) else len(S) - 1
            m = S[ax]
            xs = S[:ax] + S[ax + 1:]
            parts = [self.full(self.expr(dt, xs, depth - 1), xs) for _ in range(m)]
            self.feat("stack")
            names = ", ".join(f"{{{i}}}" for i in range(m))
            tt = ", ".join(f"t{i}" for i in range(m))
            return self.op(f"em.stack([{names}], axis={ax})", f"np.stack([{names}], axis={ax})",
                           f"E.mapn(lambda {tt}: np.stack([{tt}], axis={ax}), " +
                           ", ".join(f"{{e{i}}}" for i in range(m)) + ")", dt, S, *parts)
        if k == "repeat" and S and any(d % 2 == 0 or d % 3 == 0 for d in S):
            ax = c.choice([i for i, d in enumerate(S) if d % 2 == 0 or d % 3 == 0])
            r = 2 if S[ax] % 2 == 0 else 3
            xs = S[:ax] + (S[ax] // r,) + S[ax + 1:]
            x = self.full(self.expr(dt, xs, depth - 1), xs)
            self.feat("repeat")
            return self.op(f"em.repeat({{0}}, {r}, axis={ax})", f"np.repeat({{0}}, {r}, axis={ax})",
                           f"E.mapn(lambda t: np.repeat(t, {r}, axis={ax}), {{e0}})", dt, S, x)
        if k == "broadcast_to" and S:
            xs = self.bshape(S)
            x = self.full(self.expr(dt, xs, depth - 1), xs)
            return self.full(x, S) if x.shape != S else self.expr(dt, S, depth - 1)
        return self.expr(dt, S, depth - 1)

    def slice_op(self, dt, S, depth):
        """x[...] with steps, negative bounds and int indices whose result has shape S."""
        c = self.c
        xs, key = [], []
        for d in S:
            if isinstance(d, str):
                xs.append(d)
                key.append(c.choice([":", "::-1"]))
                continue
            if c.coin(0.3) and len(S) < 3:  # an int index removes an axis before this one
                D = c.choice([2, 3, 5])
                kidx = c.int(-D, D - 1)
                xs.append(D)
                key.append(str(kidx))
                self.feat("index_int" if kidx >= 0 else "index_negative")
            st = c.choice([1, 2, -1, -2, 3])
            extra = c.int(0, 2)
            D = d * abs(st) + extra
            start = c.int(0, D - d * abs(st))
            if st > 0:
                b, e = start, start + (d - 1) * st + 1
                if c.coin(0.3):
                    b, e = b - D, e - D  # negative bounds
                    if e >= 0:
                        e = None
            else:
                b = D - 1 - start
                e = b + (d - 1) * st - 1
                if e < 0:
                    e = None
                elif c.coin(0.3):
                    b, e = b - D, e - D
            sl = f"{'' if b is None else b}:{'' if e is None else e}{'' if st == 1 else ':' + str(st)}"
            if len(range(D)[slice(b, e, st)]) != d:
                sl, D = ":", d
            xs.append(D)
            key.append(sl)
            if st != 1:
                self.feat("slice_step")
            if b is not None and b < 0 or e is not None and e < 0:
                self.feat("slice_negative")
        xs = tuple(xs)
        if self.size(xs) > self.MAX_ELEMS:
            return self.expr(dt, S, depth - 1)
        x = self.full(self.expr(dt, xs, depth - 1), xs)
        self.feat("slice")
        k = ", ".join(key)
        return self.op(f"{{0}}[{k}]", f"{{0}}[{k}]", f"E.mapn(lambda t: t[{k}], {{e0}})", dt, S, x)

    def index_expr(self, shape, axis_dim, base):
        """An i32 index tensor of `shape` meant for an axis of size axis_dim: an em.indices
        coordinate (base) transformed, or data; often out of range (clamped or wrapped)."""
        c = self.c
        k = c.weighted([(3, "plain"), (3, "offset"), (1, "scale"), (1, "flip"), (1, "data")])
        if k == "data":
            a = self.new_arg("i32", shape, lo=-3, hi=axis_dim + 2, kind="idx")
            return a
        if k == "plain":
            return base
        if k == "offset":
            off = c.choice([1, 2, -1, -2, 3])
            return self.op(f"{{0}} + ({off})", f"{{0}} + ({off})", "E.z({o})", "i32", base.shape, base)
        if k == "scale":
            return self.op("{0} * 2 - 1", "{0} * 2 - 1", "E.z({o})", "i32", base.shape, base)
        return self.op(f"{axis_dim - 1} - {{0}}", f"{axis_dim - 1} - {{0}}", "E.z({o})", "i32", base.shape, base)

    def gather_op(self, dt, shape, depth):
        c = self.c
        if not shape or self.is_sym(shape) or len(shape) > 3:
            return self.leaf(dt, shape)
        cs = self.cshape(shape)
        nm = self.name("g")
        names = [f"{nm}_{k}" for k in range(len(shape))]
        self.line(f"{', '.join(names)}{',' if len(shape) == 1 else ''} = em.indices({self.dims_em(shape)})",
                  f"{', '.join(names)}{',' if len(shape) == 1 else ''} = np.indices({_cs(cs)})", None)
        self.feat("indices", "gather")
        bases = [V(n, n, "0.0", "i32", shape) for n in names]
        r = c.int(1, 2)
        src_shape = tuple(c.choice([1, 2, 3, 4, 5, 17]) if c.coin(0.5) else cs[min(a, len(cs) - 1)] for a in range(r))
        if c.coin(0.5) and not KNOWN_BUGS["composed_gather"]:
            src = self.full(self.expr(dt, src_shape, depth - 1), src_shape)  # an expression: gathers compose
        else:
            src = self.new_arg(dt, src_shape) if dt != "u32" else self.full(self.expr(dt, src_shape, 0), src_shape)
        idx = [self.index_expr(shape, src_shape[a], c.choice(bases)) for a in range(r)]
        mode = c.weighted([(4, "subscript"), (2, "clamp"), (2, "wrap"), (1, "unsafe")])
        self.feat(f"gather_{mode}")
        ops = ", ".join(f"{{{i + 1}}}" for i in range(r))
        if mode == "subscript":
            emt = f"{{0}}[{ops}]"
        else:
            emt = f"em.gather({{0}}, ({ops},), mode='{mode}')"
        if mode in ("subscript", "clamp"):
            npk = ", ".join(f"clip({{{i + 1}}}, {src_shape[i]})" for i in range(r))
        elif mode == "wrap":
            npk = ", ".join(f"np.mod({{{i + 1}}}, {src_shape[i]})" for i in range(r))
        else:
            npk = ", ".join(f"E.inrange({{{i + 1}}}, {src_shape[i]})" for i in range(r))
        out_shape = self.bshape_of(*idx)
        return self.op(emt, f"{{0}}[{npk}]", f"E.mapn(lambda t: t[{npk}], {{e0}})", dt, out_shape, src, *idx)

    # ---- kernel scope ---------------------------------------------------------------------
    def kleaf(self, dt):
        """A scalar inside an explicit kernel: a load at the thread's (or a loop's) index, an
        index, a var, a uniform scalar or a literal."""
        c = self.c
        scal = [v for v in self.visible() if v.dt == dt and v.shape == ()]
        k = c.weighted([(5, "load"), (2 if scal else 0, "reuse"), (1, "lit"), (2 if dt == "i32" else 0, "idx")])
        if k == "reuse":
            return c.choice(scal)
        if k == "lit":
            return self.lit(dt)
        if k == "idx":
            return c.choice(self.kidx)
        # a load A[idx...] from an argument
        r = c.int(1, 2)
        shape = tuple(c.choice([1, 3, 4, 5, 17]) for _ in range(r))
        cand = [v for v in self.pools[0] if v.dt == dt and len(v.shape) == r and not self.is_sym(v.shape)
                and v.em.startswith("a")]
        A = c.choice(cand) if cand and c.coin(0.5) else self.new_arg(dt, shape, kind="data")
        shape = self.cshape(A.shape)
        idx = []
        for a in range(r):
            base = c.choice(self.kidx)
            off = c.choice([0, 0, 0, 1, -1, 2])
            idx.append(base if off == 0 else self.op(f"{{0}} + ({off})", f"{{0}} + ({off})", "0.0", "i32", (), base,
                                                   pool=False))
        mode = c.weighted([(4, "subscript"), (1, "wrap"), (1, "clamp")])
        ops = ", ".join(f"{{{i + 1}}}" for i in range(r))
        if mode == "wrap":
            emt = f"em.gather({{0}}, ({ops},), mode='wrap')"
            npk = ", ".join(f"np.mod({{{i + 1}}}, {shape[i]})" for i in range(r))
        else:
            emt = f"{{0}}[{ops}]" if mode == "subscript" else f"em.gather({{0}}, ({ops},), mode='clamp')"
            npk = ", ".join(f"clip({{{i + 1}}}, {shape[i]})" for i in range(r))
        self.feat("kernel_load" + ("_wrap" if mode == "wrap" else ""))
        return self.op(emt, f"{{0}}[{npk}]", f"{{e0}}[:, {npk}]", dt, (), A, *idx, pool=False)

    def var_v(self, nm, dt, shape):
        return V(f"{nm}.val" if self.c.coin(0.7) else nm, nm, "e" + nm, dt, shape)

    # ---- statement blocks -----------------------------------------------------------------
    def output(self, v):
        if v.em.startswith("(") or v.em[0].isdigit() or v.em in ("True", "False"):
            return
        self.outs.append(v)

    def b_expr(self):
        dt = self.c.weighted([(6, "f32"), (2, "i32"), (1, "u32"), (1, "bool")])
        shape = self.shape()
        v = self.full(self.expr(dt, shape, self.c.int(2, 5)), shape) if self.c.coin(0.5) else \
            self.expr(dt, shape, self.c.int(2, 5))
        self.feat("elementwise")
        self.output(v)

    def b_shape(self):
        dt = self.c.weighted([(3, "f32"), (1, "i32")])
        shape = self.shape(allow_sym=False)
        self.output(self.shape_op(dt, shape, 3))

    def b_reduce(self):
        dt = self.c.weighted([(4, "f32"), (1, "i32"), (1, "bool")])
        shape = self.shape(rank=self.c.int(0, 2), allow_sym=False)
        self.output(self.reduce_op(dt, shape, 3) if not self.c.coin(0.25) or dt != "i32" else self.argext_op(shape, 3))

    def b_matmul(self):
        shape = self.shape(rank=self.c.int(0, 3), max_elems=200, allow_sym=False)
        self.output(self.matmul_op(shape, 2))

    def b_gather(self):
        dt = self.c.weighted([(3, "f32"), (1, "i32")])
        shape = self.shape(rank=self.c.int(1, 2), allow_sym=False)
        v = self.gather_op(dt, shape, 2)
        if self.c.coin(0.5) and not KNOWN_BUGS["composed_gather"]:  # gather of a computed gather (issue (b))
            self.feat("composed_gather")
            w = self.fun(v) if dt == "f32" else v
            w = self.full(w, shape)
            nm = self.name("g")
            cs = self.cshape(shape)
            names = [f"{nm}_{k}" for k in range(len(shape))]
            self.line(f"{', '.join(names)}{',' if len(shape) == 1 else ''} = em.indices({self.dims_em(shape)})",
                      f"{', '.join(names)}{',' if len(shape) == 1 else ''} = np.indices({_cs(cs)})", None)
            bases = [V(n, n, "0.0", "i32", shape) for n in names]
            idx = [self.index_expr(shape, cs[a], bases[a]) for a in range(len(shape))]
            ops = ", ".join(f"{{{i + 1}}}" for i in range(len(shape)))
            npk = ", ".join(f"clip({{{i + 1}}}, {cs[i]})" for i in range(len(shape)))
            v = self.op(f"{{0}}[{ops}]", f"{{0}}[{npk}]", f"E.mapn(lambda t: t[{npk}], {{e0}})", dt,
                        self.bshape_of(*idx), w, *idx)
        self.output(v)

    def b_scatter(self):
        c = self.c
        dt = c.weighted([(3, "f32"), (1, "i32")])
        kind = c.choice(["perm", "indices", "wrap", "slice", "into_arg"])
        self.feat("scatter", f"scatter_{kind}")
        if kind in ("perm", "into_arg"):
            n = c.choice([3, 4, 17, 100])
            S = (n,)
            P = self.new_arg("i32", S, kind="perm")
            if KNOWN_BUGS["scatter_reads_target"]:
                val = self.full(self.expr(dt, S, 2), S)  # made before the target exists: it cannot read it
            if kind == "into_arg":
                buf = self.new_arg(dt, (n,))
                bnm = buf.em
            else:
                bnm = self.name("buf")
                self.line(f"{bnm} = em.zeros(({n},), em.{dt})", f"{bnm} = np.zeros(({n},), {_npdt(dt)})",
                          f"e{bnm} = np.zeros((2, {n}))")
            if not KNOWN_BUGS["scatter_reads_target"]:
                val = self.full(self.expr(dt, S, 2), S)
            # np.copy: NumPy's fancy assignment does not copy a value that overlaps its target
            # (a[p] = a writes element by element); Ember's scatter reads the whole value first.
            self.line(f"{bnm}[{P.em}] = {val.em}", f"{bnm}[{P.np}] = np.copy({val.np})",
                      f"e{bnm}[:, {P.np}] = E.bc({val.e}, {S})")
            self.output(V(bnm, bnm, "e" + bnm, dt, S))
            return
        S = self.shape(rank=2, max_elems=200, allow_sym=False)
        bnm = self.name("buf")
        nm = self.name("s")
        if kind == "slice":
            D = (S[0] * 2 + 1, S[1] + 2)
            self.line(f"{bnm} = em.zeros({D}, em.{dt})", f"{bnm} = np.zeros({D}, {_npdt(dt)})",
                      f"e{bnm} = np.zeros((2,) + {D})")
            val = self.full(self.expr(dt, S, 2), S)
            key = f"1::2, {c.choice(['1:-1', '-' + str(S[1] + 1) + ':-1'])}"
            self.line(f"{bnm}[{key}] = {val.em}", f"{bnm}[{key}] = {val.np}", f"e{bnm}[:, {key}] = E.bc({val.e}, {S})")
            self.output(V(bnm, bnm, "e" + bnm, dt, D))
            return
        self.line(f"{nm}_0, {nm}_1 = em.indices({S})", f"{nm}_0, {nm}_1 = np.indices({S})", None)
        transpose = c.coin(0.4)
        D = (S[1], S[0]) if transpose else S
        self.line(f"{bnm} = em.zeros({D}, em.{dt})", f"{bnm} = np.zeros({D}, {_npdt(dt)})",
                  f"e{bnm} = np.zeros((2,) + {D})")
        i0, i1 = (f"{nm}_1", f"{nm}_0") if transpose else (f"{nm}_0", f"{nm}_1")
        if c.coin(0.5):
            i0 = f"({D[0] - 1} - {i0})"
            self.feat("scatter_flip")
        val = self.full(self.expr(dt, S, 2), S)
        if kind == "wrap":
            off = c.choice([1, 2, -1, 5])
            self.line(f"em.scatter({bnm}, ({i0}, {i1} + ({off})), {val.em}, mode='wrap')",
                      f"{bnm}[{i0}, np.mod({i1} + ({off}), {D[1]})] = {val.np}",
                      f"e{bnm}[:, {i0}, np.mod({i1} + ({off}), {D[1]})] = E.bc({val.e}, {S})")
        else:
            style = c.choice(["sub", "fn"])
            self.line(f"{bnm}[{i0}, {i1}] = {val.em}" if style == "sub" else
                      f"em.scatter({bnm}, ({i0}, {i1}), {val.em})",
                      f"{bnm}[{i0}, {i1}] = {val.np}", f"e{bnm}[:, {i0}, {i1}] = E.bc({val.e}, {S})")
        out = V(bnm, bnm, "e" + bnm, dt, D)
        if c.coin(0.4):
            self.pool_add(out)
            self.feat("scatter_then_use")
            out = self.op("{0} * 2 + {1}", "{0} * 2 + {1}", "E.add({o}, {0} * 2, E.mul({0} * 2, {0}, {e0}, 2, 0.0), {1}, "
                          "{e1})" if dt == "f32" else "E.i32({o})", dt, D, out, self.expr(dt, D, 1))
        self.output(out)

    def b_atomic(self):
        c = self.c
        dt = c.weighted([(2, "f32"), (2, "i32"), (1, "u32")])
        n = c.choice([5, 17, 64, 100])
        m = c.choice([1, 3, 4, 16])
        opts = {"f32": ["add", "min", "max", "exchange"], "i32": ["add", "min", "max", "and", "or", "xor", "exchange"],
                "u32": ["add", "min", "max", "and", "or", "xor"]}[dt]
        if self.grad and dt == "f32" and GRAD_KNOWN_BUGS["atomic_minmax_f32"]:
            opts = ["add", "exchange"]
        name = c.choice(opts)
        self.feat("atomic", f"atomic_{name}", f"atomic_{dt}")
        B = self.new_arg("i32", (n,), lo=-2, hi=m + 1, kind="idx")
        into_arg = c.coin(0.25) and name != "exchange"
        if into_arg:
            H = self.new_arg(dt, (m,), kind="grid" if dt == "f32" else "data")
            hn = H.em
            self.line(None, None, f"a{hn} = np.abs({hn}) * 0")
        else:
            hn = self.name("H")
            self.line(f"{hn} = em.zeros(({m},), em.{dt})", f"{hn} = np.zeros(({m},), {_npdt(dt)})",
                      f"e{hn} = np.zeros((2, {m})); a{hn} = np.zeros(({m},))")
        exact = dt != "f32" or name != "add" or c.coin(0.5)
        if self.grad and dt == "f32" and name in ("min", "max"):
            exact = False  # distinct values: no ties between threads (their gradient would split)
        X = self.new_arg(dt, (n,), kind="grid" if dt == "f32" and exact else ("bits" if dt == "u32" and name in
                                                                              ("and", "or", "xor") else "data"))
        with self.block(f"with em.kernel({n}) as i:" if c.coin(0.5) else f"with em.kernel(({n},)) as (i,):",
                        f"for i in range({n}):", scope="kernel"):
            self.kidx = [V("i", "i", "0.0", "i32", ())]
            mode = c.choice(["sub", "wrap", "clamp"])
            if name == "exchange":
                self.line(f"k = em.clamp({B.em}[i], 0, {m - 1})", f"k = clip({B.np}[i], {m})", None)
                val = "em.f32(k) * 2.0 + 1.0" if dt == "f32" else "k * 3 + 1"
                nval = "k * 2.0 + 1.0" if dt == "f32" else "k * 3 + 1"
                self.line(f"em.atomic_exchange({hn}[k], {val})", f"{hn}[k] = {nval}", None)
                return self.output(V(hn, hn, "e" + hn, dt, (m,)))
            if mode == "sub":
                tgt, k = f"{hn}[{B.em}[i]]", f"clip({B.np}[i], {m})"
            else:
                tgt = f"em.gather({hn}, {B.em}[i], mode='{mode}')"
                k = f"np.mod({B.np}[i], {m})" if mode == "wrap" else f"clip({B.np}[i], {m})"
                self.feat(f"atomic_gather_{mode}")
            v = X.em + "[i]"
            if dt == "i32" and c.coin(0.5):
                v = f"{X.em}[i] * 2 - i"
            npv = v.replace(X.em, X.np)
            upd = {"add": f"{hn}[{k}] = E.wrapdt({hn}[{k}] + {npv}, '{dt}')",
                   "min": f"{hn}[{k}] = min({hn}[{k}], {npv})", "max": f"{hn}[{k}] = max({hn}[{k}], {npv})",
                   "and": f"{hn}[{k}] = {hn}[{k}] & {npv}", "or": f"{hn}[{k}] = {hn}[{k}] | {npv}",
                   "xor": f"{hn}[{k}] = {hn}[{k}] ^ {npv}"}[name]
            err = f"a{hn}[{k}] += abs({npv})" if dt == "f32" and name == "add" else None
            self.line(f"em.atomic_{name}({tgt}, {v})", upd, err)
        if dt == "f32" and name == "add":
            self.line(None, None, f"e{hn} = e{hn} + E.U * {n + 1} * a{hn}")
        self.output(V(hn, hn, "e" + hn, dt, (m,)))

    def b_hostloop(self):
        c = self.c
        S = self.shape(rank=c.int(0, 2), max_elems=120)
        x0 = self.full(self.expr("f32", S, 2), S)
        vn = self.name("acc")
        self.line(f"{vn} = em.var({x0.em})", f"{vn} = np.array({x0.np}, dtype=np.float64)",
                  f"e{vn} = E.bc({x0.e}, {_cs(self.cshape(S))}).copy()")
        self.feat("host_loop", "var")
        cnt = c.weighted([(3, "const"), (2, "arg"), (1, "range")])
        if cnt == "const":
            n = c.int(1, 5)
            hdr, nph = f"with em.loop({n}) as t{vn}:", f"for t{vn} in range({n}):"
        elif cnt == "arg":
            s = self.scalar_arg("i32")
            self.feat("loop_runtime_count")
            hdr, nph = f"with em.loop({s.em}) as t{vn}:", f"for t{vn} in range({s.np}):"
        else:
            a, b, st = c.choice([(1, 7, 2), (5, 0, -1), (0, 6, 3), (4, -2, -2)])
            self.feat("loop_step")
            hdr, nph = f"with em.loop({a}, {b}, {st}) as t{vn}:", f"for t{vn} in range({a}, {b}, {st}):"
        with self.block(hdr, nph):
            t = self.pool_add(V(f"t{vn}", f"t{vn}", "0.0", "i32", ()))
            acc = self.pool_add(self.var_v(vn, "f32", S))
            if c.coin(0.5):  # a host-level if on the counter
                cond = self.op("{0} % 2 == 0", "{0} % 2 == 0", "E.z({o})", "bool", (), t)
                self.feat("host_if")
                with self.block(f"with em.if_({cond.em}):", f"if {cond.np}:"):
                    u = self.op("{0} * 0.5 + 1.0", "{0} * 0.5 + 1.0",
                                "E.add({o}, {0} * 0.5, E.mul({0} * 0.5, {0}, {e0}, 0.5, 0.0), 1.0, 0.0)", "f32", S, acc)
                    self.line(f"{vn}.val = {u.em}", f"{vn} = {u.np}", f"e{vn} = E.bc({u.e}, {_cs(self.cshape(S))})")
                if c.coin(0.5):
                    self.feat("host_else")
                    with self.block("with em.else_():", "else:"):
                        u = self.op("{0} - 0.25", "{0} - 0.25", "E.add({o}, {0}, {e0}, 0.25, 0.0)", "f32", S, acc)
                        self.line(f"{vn}.val = {u.em}", f"{vn} = {u.np}", f"e{vn} = E.bc({u.e}, {_cs(self.cshape(S))})")
                acc = self.pool_add(self.var_v(vn, "f32", S))
            u = self.expr("f32", S, c.int(1, 3))
            tf = self.op("em.f32({0})", "({0} * 1.0)", "E.z({o})", "f32", (), t)
            th = self.op("em.tanh({0} + {1} * 0.125)", "np.tanh({0} + {1} * 0.125)",
                         "E.math1('tanh', np.tanh, {o}, {0} + {1} * 0.125, E.add({0} + {1} * 0.125, {0}, {e0}, {1} * "
                         "0.125, 0.0)) + E.rnd({0} + {1} * 0.125, 2, 2)", "f32", u.shape, u, tf)
            acc = self.var_v(vn, "f32", S)
            nv = self.op("{0} * 0.5 + {1}", "{0} * 0.5 + {1}",
                         "E.add({o}, {0} * 0.5, E.mul({0} * 0.5, {0}, {e0}, 0.5, 0.0), {1}, {e1})", "f32", S, acc, th)
            self.line(f"{vn}.val = {nv.em}", f"{vn} = {nv.np}", f"e{vn} = E.bc({nv.e}, {_cs(self.cshape(S))})")
        self.output(self.op("{0} + 0.0", "{0} + 0.0", "E.same({o}, {e0})", "f32", S, V(f"{vn}.val", vn, "e" + vn, "f32", S)))

    def b_tensor_if(self):
        c = self.c
        S = self.shape(rank=c.int(1, 2), max_elems=200)
        x0 = self.full(self.expr("f32", S, 2), S)
        cond = self.full(self.expr("bool", S, 2), S)
        a = self.full(self.expr("f32", S, 2), S)  # a var set under a tensor if takes the if's shape
        b = self.full(self.expr("f32", S, 2), S)
        if self.grad and GRAD_KNOWN_BUGS["if_value_without_gradient"]:  # both branch values depend on an x
            a, b = self.with_grad(a, S), self.with_grad(b, S)
        cs = _cs(self.cshape(S))
        vn = self.name("tv")
        self.feat("tensor_if", "var")
        self.line(f"{vn} = em.var({x0.em})", f"{vn} = np.array({x0.np}, dtype=np.float64)", f"e{vn} = E.bc({x0.e}, {cs}).copy()")
        with self.block(f"with em.if_({cond.em}):", None):
            self.line(f"{vn}.val = {a.em}", f"{vn} = np.where({cond.np}, {a.np}, {vn})",
                      f"e{vn} = np.where({cond.np}, E.bc({a.e}, {cs}), e{vn})")
        if c.coin(0.6):
            self.feat("tensor_else")
            with self.block("with em.else_():", None):
                self.line(f"{vn}.val = {b.em}", f"{vn} = np.where({cond.np}, {vn}, {b.np})",
                          f"e{vn} = np.where({cond.np}, e{vn}, E.bc({b.e}, {cs}))")
        self.output(self.op("{0} * 1.0", "{0} * 1.0", "E.same({o}, {e0})", "f32", S, V(f"{vn}.val", vn, "e" + vn, "f32", S)))

    def with_grad(self, v, S):
        """v + p * 0.125 with p a new f32 argument: a value that depends on a differentiated argument."""
        p = self.new_arg("f32", self.bshape(S))
        return self.op("{0} + {1} * 0.125", "{0} + {1} * 0.125",
                       "E.add({o}, {0}, {e0}, {1} * 0.125, E.mul({1} * 0.125, {1}, {e1}, 0.125, 0.0))", "f32", S, v, p)

    def b_rowloop(self):
        """The issue's row loop: y[t, i] = sum_k w[i, k] x[t, k], and RNN-like scans over time."""
        c = self.c
        T = c.choice([1, 2, 3, 8])
        M = c.choice([1, 2, 3, 4, 17])
        K = c.choice([1, 2, 3, 4, 17])
        form = c.choice(["rowsum", "rowsum", "matvec", "rnn", "rnn2"])
        self.feat("row_loop", f"row_loop_{form}")
        W = self.new_arg("f32", (M, K), lo=-1, hi=1)
        X = self.new_arg("f32", (T, K), lo=-1, hi=1)
        y = self.name("y")
        self.line(f"{y} = em.zeros([{T}, {M}])", f"{y} = np.zeros(({T}, {M}))", f"e{y} = np.zeros((2, {T}, {M}))")
        if form == "rnn" or form == "rnn2":
            if K != M:
                W = self.new_arg("f32", (M, M), lo=-1, hi=1)
            Uw = self.new_arg("f32", (M, K), lo=-1, hi=1)
            h = self.name("h")
            self.line(f"{h} = em.var(em.zeros([{M}]))", f"{h} = np.zeros({M})", f"e{h} = np.zeros((2, {M}))")
            h2 = None
            if form == "rnn2":
                W2 = self.new_arg("f32", (M, M), lo=-1, hi=1)
                h2 = self.name("h")
                self.line(f"{h2} = em.var(em.zeros([{M}]))", f"{h2} = np.zeros({M})", f"e{h2} = np.zeros((2, {M}))")
        with self.block(f"with em.loop({T}) as t{y}:", f"for t{y} in range({T}):"):
            t = V(f"t{y}", f"t{y}", "0.0", "i32", ())
            xt = self.op("{0}[{1}]", f"{{0}}[clip({{1}}, {T})]", f"E.mapn(lambda q: q[clip({{1}}, {T})], {{e0}})",
                         "f32", (K,), X, t)
            if form == "rowsum":
                nm = self.name("r")
                self.line(f"{nm}_i, {nm}_k = em.indices([{M}, {K}])", f"{nm}_i, {nm}_k = np.indices(({M}, {K}))", None)
                ii, kk = V(f"{nm}_i", f"{nm}_i", "0.0", "i32", (M, K)), V(f"{nm}_k", f"{nm}_k", "0.0", "i32", (M, K))
                wg = self.op("{0}[{1}, {2}]", f"{{0}}[clip({{1}}, {M}), clip({{2}}, {K})]",
                             f"E.mapn(lambda q: q[clip({{1}}, {M}), clip({{2}}, {K})], {{e0}})", "f32", (M, K), W, ii, kk)
                xg = self.op("{0}[{1}, {2}]", f"{{0}}[clip({{1}}, {T}), clip({{2}}, {K})]",
                             f"E.mapn(lambda q: q[clip({{1}}, {T}), clip({{2}}, {K})], {{e0}})", "f32", (M, K), X, t, kk)
                p = self.op("{0} * {1}", "{0} * {1}", "E.mul({o}, {0}, {e0}, {1}, {e1})", "f32", (M, K), wg, xg)
                s = self.op("em.sum({0}, axis=1)", "zsum({0}, axis=1)", "E.rsum({o}, {0}, {e0}, (1,), False)", "f32",
                            (M,), p)
            elif form == "matvec":
                s = self.op("{0} @ {1}", "zmatmul({0}, {1})", "E.matmul({o}, {0}, {e0}, {1}, {e1})", "f32", (M,), W, xt)
            else:
                a1 = self.op("{0} @ {1}", "zmatmul({0}, {1})", "E.matmul({o}, {0}, {e0}, {1}, {e1})", "f32", (M,), W,
                             V(f"{h}.val", h, "e" + h, "f32", (M,)))
                a2 = self.op("{0} @ {1}", "zmatmul({0}, {1})", "E.matmul({o}, {0}, {e0}, {1}, {e1})", "f32", (M,), Uw, xt)
                z_ = self.op("{0} + {1}", "{0} + {1}", "E.add({o}, {0}, {e0}, {1}, {e1})", "f32", (M,), a1, a2)
                s = self.op("em.tanh({0})", "np.tanh({0})", "E.math1('tanh', np.tanh, {o}, {0}, {e0})", "f32", (M,), z_)
                self.line(f"{h}.val = {s.em}", f"{h} = {s.np}", f"e{h} = E.bc({s.e}, ({M},))")
                if h2:
                    b1 = self.op("{0} @ {1}", "zmatmul({0}, {1})", "E.matmul({o}, {0}, {e0}, {1}, {e1})", "f32", (M,),
                                 W2, V(f"{h}.val", h, "e" + h, "f32", (M,)))
                    b2 = self.op("{0} + {1} * 0.5", "{0} + {1} * 0.5",
                                 "E.add({o}, {0}, {e0}, {1} * 0.5, E.mul({1} * 0.5, {1}, {e1}, 0.5, 0.0))", "f32", (M,),
                                 b1, V(f"{h2}.val", h2, "e" + h2, "f32", (M,)))
                    s = self.op("em.tanh({0})", "np.tanh({0})", "E.math1('tanh', np.tanh, {o}, {0}, {e0})", "f32", (M,), b2)
                    self.line(f"{h2}.val = {s.em}", f"{h2} = {s.np}", f"e{h2} = E.bc({s.e}, ({M},))")
            style = c.choice(["slice", "row", "indices", "issue"]) if form == "rowsum" else c.choice(["slice", "row"])
            if style == "issue" and self.grad and GRAD_KNOWN_BUGS["scatter_duplicate_targets"]:
                style = "slice"
            if style == "issue":  # y[t, i] = em.sum(w[i, k] * x[t, k], axis=1) with i of shape [M, K]
                self.feat("row_loop_issue_form")
                self.line(f"{y}[t{y}, {nm}_i] = {s.em}", f"{y}[t{y}, :] = {s.np}", f"e{y}[:, t{y}, :] = E.bc({s.e}, ({M},))")
            if style == "slice":
                self.line(f"{y}[t{y}, :] = {s.em}", f"{y}[t{y}, :] = {s.np}", f"e{y}[:, t{y}, :] = E.bc({s.e}, ({M},))")
            elif style == "issue":
                pass
            elif style == "row":
                self.line(f"{y}[t{y}] = {s.em}", f"{y}[t{y}] = {s.np}", f"e{y}[:, t{y}] = E.bc({s.e}, ({M},))")
            else:
                self.line(f"({y}_r,) = em.indices([{M}])", f"{y}_r = np.arange({M})", None)
                self.line(f"{y}[t{y}, {y}_r] = {s.em}", f"{y}[t{y}, {y}_r] = {s.np}",
                          f"e{y}[:, t{y}, {y}_r] = E.bc({s.e}, ({M},))")
        self.output(V(y, y, "e" + y, "f32", (T, M)))

    def b_kernel(self):
        c = self.c
        r = c.int(1, 2)
        S = tuple(c.choice([1, 3, 4, 17, 5]) for _ in range(r))
        dt = c.weighted([(3, "f32"), (1, "i32")])
        out = self.name("out")
        alloc = c.choice(["zeros", "buffer"])
        self.line(f"{out} = em.{alloc}({S}, em.{dt})", f"{out} = np.zeros({S}, {_npdt(dt)})",
                  f"e{out} = np.zeros((2,) + {S})")
        self.feat("kernel", f"kernel_{alloc}")
        ids = ["ki", "kj"][:r]
        hdr = f"with em.kernel({S[0]}) as ki:" if r == 1 and c.coin(0.5) else \
            f"with em.kernel({S}) as ({', '.join(ids)}{',' if r == 1 else ''}):"
        with self.block(hdr, f"for {', '.join(ids)}{',' if r == 1 else ''} in np.ndindex({S}):", scope="kernel"):
            self.kidx = [V(k, k, "0.0", "i32", ()) for k in ids]
            init = self.expr(dt, (), 1)
            acc = self.name("acc")
            self.line(f"{acc} = em.var({init.em})" if init.dt == dt else f"{acc} = em.var({init.em}, em.{dt})",
                      f"{acc} = {init.np}", f"e{acc} = E.bc({init.e}, ())")
            self.feat("kernel_var")
            lp = c.weighted([(3, "loop"), (1, "none")])
            if lp == "loop":
                lk = c.weighted([(3, "const"), (1, "arg"), (1, "range")])
                if lk == "const":
                    n = c.choice([1, 2, 3, 4, 7])
                    lh, nh = f"({n})", f"({n})"
                elif lk == "arg":
                    s = self.scalar_arg("i32")
                    lh, nh = f"({s.em})", f"({s.np})"
                    self.feat("kernel_loop_runtime")
                else:
                    a, b, st = c.choice([(1, 9, 2), (6, -1, -2), (3, 0, -1)])
                    lh, nh = f"({a}, {b}, {st})", f"({a}, {b}, {st})"
                    self.feat("kernel_loop_step")
                lv = self.name("lk")
                self.feat("kernel_loop")
                with self.block(f"with em.loop{lh} as {lv}:", f"for {lv} in range{nh}:"):
                    self.kidx = self.kidx + [V(lv, lv, "0.0", "i32", ())]
                    av = V(f"{acc}.val", acc, "e" + acc, dt, ())
                    self.pool_add(av)
                    if c.coin(0.3):
                        cc = self.op("{0} % 3 == 1", "{0} % 3 == 1", "E.z({o})", "bool", (), V(lv, lv, "0.0", "i32", ()))
                        self.feat("continue")
                        with self.block(f"with em.if_({cc.em}):", f"if {cc.np}:"):
                            self.line("em.continue_()", "continue")
                    val = self.expr(dt, (), c.int(1, 3))
                    cond = self.expr("bool", (), 1) if c.coin(0.5) else None
                    if dt == "f32":
                        upd = self.op("{0} * 0.75 + {1}", "{0} * 0.75 + {1}",
                                      "E.add({o}, {0} * 0.75, E.mul({0} * 0.75, {0}, {e0}, 0.75, 0.0), {1}, {e1})", dt,
                                      (), av, val)
                    else:
                        upd = self.op("{0} + {1}", "{0} + {1}", "E.i32({o})", dt, (), av, val)
                    if cond is not None:
                        self.feat("kernel_if")
                        with self.block(f"with em.if_({cond.em}):", f"if {cond.np}:"):
                            self.line(f"{acc}.val = {upd.em}", f"{acc} = {upd.np}", f"e{acc} = {upd.e}")
                        if c.coin(0.5):
                            self.feat("kernel_else")
                            with self.block("with em.else_():", "else:"):
                                self.line(f"{acc}.val = {acc} - 1" if dt == "i32" else f"{acc}.val = {acc} * 0.5",
                                          f"{acc} = {acc} - 1" if dt == "i32" else f"{acc} = {acc} * 0.5",
                                          f"E.i32({acc})" if dt == "i32" else None)
                    else:
                        self.line(f"{acc}.val = {upd.em}", f"{acc} = {upd.np}", f"e{acc} = {upd.e}")
                    if c.coin(0.3):
                        lim = "40" if dt == "i32" else "2.5"
                        bc_ = self.op(f"{{0}} > {lim}", f"{{0}} > {lim}", f"E.cmp({{o}}, {{0}}, {{e0}}, {lim}, 0.0)",
                                      "bool", (), V(f"{acc}.val", acc, "e" + acc, dt, ()))
                        self.feat("break")
                        with self.block(f"with em.if_({bc_.em}):", f"if {bc_.np}:"):
                            self.line("em.break_()", "break")
            else:
                val = self.expr(dt, (), c.int(1, 3))
                self.line(f"{acc}.val = {val.em}", f"{acc} = {val.np}", f"e{acc} = E.bc({val.e}, ())")
            key = ", ".join(ids)
            self.line(f"{out}[{key}] = {acc}.val", f"{out}[{key}] = {acc}", f"e{out}[:, {key}] = e{acc}")
        self.kidx = []
        self.output(V(out, out, "e" + out, dt, S))

    def b_group(self):
        c = self.c
        G = c.choice([4, 8, 16, 32])
        n = c.choice([G, 3 * G, 2 * G + 3, 5, 100])
        form = c.choice(["sum", "reverse", "scan"])
        self.feat("group", f"group_{form}", "group_buffer", "barrier", "local_index")
        ng = -(-n // G)
        if form == "scan":
            X = self.new_arg("i32", (n,), lo=-50, hi=50)
            x = X
        else:
            x = self.full(self.expr("f32", (n,), 2), (n,))
        Y = self.name("Y")
        lg = G.bit_length() - 1
        if form == "sum":
            self.feat("group_index")
            self.line(f"{Y} = em.zeros(({ng},), em.f32)", None, None)
            with self.block(f"with em.kernel({n}, group={G}) as i:", None):
                self.line(f"buf = em.group_buffer({G}, em.f32)")
                self.line("l = em.local_index()")
                self.line(f"buf[l] = {x.em}[i]")
                self.line("em.barrier()")
                with self.block(f"with em.loop({lg}) as k:", None):
                    self.line(f"s = ({G // 2}) >> k")
                    with self.block(f"with em.if_((l < s) & (i + s < {n})):", None):
                        self.line("buf[l] = buf[l] + buf[l + s]")
                    self.line("em.barrier()")
                with self.block("with em.if_(l == 0):", None):
                    self.line(f"{Y}[em.group_index()] = buf[0]")
            self.line(None, f"{Y} = np.pad({x.np}, (0, {ng * G - n})).reshape({ng}, {G}).sum(axis=1)",
                      f"e{Y} = E.rsum({Y}, np.pad({x.np}, (0, {ng * G - n})).reshape({ng}, {G}), "
                      f"E.mapn(lambda q: np.pad(q, (0, {ng * G - n})).reshape({ng}, {G}), E.bc({x.e}, ({n},))), (1,), False)")
            return self.output(V(Y, Y, "e" + Y, "f32", (ng,)))
        if form == "reverse":
            self.line(f"{Y} = em.zeros(({n},), em.f32)", None, None)
            with self.block(f"with em.kernel({n}, group={G}) as i:", None):
                self.line(f"buf = em.group_buffer({G}, em.f32)")
                self.line("l = em.local_index()")
                self.line(f"buf[l] = {x.em}[i] * 2.0")
                self.line("em.barrier()")
                self.line(f"j = em.group_index() * {G} + ({G - 1} - l)")
                self.feat("group_index")
                with self.block(f"with em.if_(j < {n}):", None):
                    self.line(f"{Y}[i] = buf[{G - 1} - l]")
            self.line(None, f"{Y} = E.group_reverse({x.np} * 2.0, {G})",
                      f"e{Y} = E.mapn(lambda q: E.group_reverse(q, {G}), E.bc({x.e}, ({n},)))")
            return self.output(V(Y, Y, "e" + Y, "f32", (n,)))
        self.line(f"{Y} = em.zeros(({n},), em.i32)", None, None)
        with self.block(f"with em.kernel({n}, group={G}) as i:", None):
            self.line(f"buf = em.group_buffer({G}, em.i32)")
            self.line("l = em.local_index()")
            self.line(f"buf[l] = {x.em}[i]")
            self.line("em.barrier()")
            with self.block(f"with em.loop({lg}) as k:", None):
                self.line("d = 1 << k")
                self.line("tv = em.var(buf[l])")
                with self.block("with em.if_(l >= d):", None):
                    self.line("tv.val = tv + buf[l - d]")
                self.line("em.barrier()")
                self.line("buf[l] = tv")
                self.line("em.barrier()")
            self.line(f"{Y}[i] = buf[l]")
        self.line(None, f"{Y} = np.cumsum(np.pad({x.np}, (0, {ng * G - n})).reshape({ng}, {G}), axis=1).reshape(-1)[:{n}]",
                  f"e{Y} = E.z({Y})")
        self.output(V(Y, Y, "e" + Y, "i32", (n,)))

    def b_nan(self):
        S = self.shape(rank=1, allow_sym=False)
        A = self.new_arg("f32", S, kind="nan")
        self.feat("nan_inf_inputs", "isnan", "isinf")
        a = self.op("em.isnan({0})", "np.isnan({0})", "E.z({o})", "bool", S, A)
        b = self.op("em.isinf({0})", "np.isinf({0})", "E.z({o})", "bool", S, A)
        self.output(a)
        self.output(b)
        m = self.op("{0} | {1}", "np.logical_or({0}, {1})", "E.z({o})", "bool", S, a, b)
        lit = self.lit("f32")
        s = self.op("em.where({0}, {1}, {2})", "np.where({0}, {1}, {2})", "E.z({o})", "f32", S, m, lit, A)
        self.output(self.op("{0} * 2.0", "{0} * 2.0", "E.mul({o}, {0}, 0.0, 2.0, 0.0)", "f32", S, s))

    BLOCKS = [(10, "expr"), (4, "shape"), (4, "reduce"), (2, "matmul"), (4, "gather"), (3, "scatter"), (3, "atomic"),
              (3, "hostloop"), (2, "tensor_if"), (3, "rowloop"), (4, "kernel"), (2, "group"), (1, "nan"),
              (3, "reduce_atomic"), (3, "inj_atomic"), (3, "par_hostloop"), (3, "row_fuse")]  # the last four: gen_isl.py

    def random_block(self):
        kind = self.c.weighted(self.BLOCKS if not self.grad else [b for b in self.BLOCKS if b[1] != "group"])
        if kind == "rowloop" and KNOWN_BUGS["row_loop"]:
            kind = "expr"
        getattr(self, "b_" + kind)()

    # ---- assembling -----------------------------------------------------------------------
    def snapshot(self):
        return (len(self.lines), len(self.args), len(self.outs), self.nargs, self.n, set(self.features),
                dict(self.sym), dict(self.symsrc), [list(p) for p in self.pools], self.ind, self.scope, self.npind)

    def restore(self, s):
        (nl, na, no, self.nargs, self.n, self.features, self.sym, self.symsrc, self.pools, self.ind, self.scope,
         self.npind) = s
        del self.lines[nl:]
        del self.args[na:]
        del self.outs[no:]
        self.kidx = []

    def sources(self, checked=False):
        outs = [o for k, o in enumerate(self.outs) if k not in self.drop_outputs]
        params = []
        for nm, dt, ann, _ in self.args:
            params.append(f"{nm}: {ann if ann else 'em.' + dt}")
        em_lines = ["import ember as em", "", "", "@em.compile", f"def f({', '.join(params)}):"]
        np_lines = [f"def ref({', '.join(a[0] for a in self.args)}):"]
        for nm, dt, ann, _ in self.args:
            conv = {"f32": "np.float64", "i32": "np.int64", "u32": "np.int64", "bool": "np.bool_"}[dt]
            if ann:
                np_lines.append(f"    {nm} = np.array({nm}, dtype={_npdt(dt)})")
            else:
                np_lines.append(f"    {nm} = {conv}({nm})")
            if checked:
                np_lines.append(f"    e{nm} = E.z({nm})")
        for ind, em, npind, np_, err in self.lines:
            if em is not None:
                em_lines.append("    " * ind + em)
            if np_ is not None:
                np_lines.append("    " * npind + np_)
            if checked and err is not None:
                np_lines.append("    " * npind + err)
        em_lines.append("    return (" + "".join(o.em + ", " for o in outs) + ")")
        tens = [a[0] for a in self.args if a[2]]
        if checked:
            np_lines.append("    return [" + ", ".join(o.np for o in outs) + "], [" + ", ".join(o.e for o in outs) +
                            "], [" + ", ".join(tens) + "], [" + ", ".join("e" + t for t in tens) + "]")
        else:
            np_lines.append("    return [" + ", ".join(o.np for o in outs) + "], [" + ", ".join(tens) + "]")
        return "\n".join(em_lines) + "\n", NP_PRELUDE + "\n\n" + "\n".join(np_lines) + "\n"

    def check(self):
        """Runs the checked reference; raises errs.Reject for an ill-conditioned program."""
        _, src = self.sources(checked=True)
        ns = {"E": E}
        exec(compile(src, f"<fuzz-ref {self.seed}>", "exec"), ns)
        data = [a[3].copy() if isinstance(a[3], np.ndarray) else a[3] for a in self.args]
        E.GRAD = self.grad
        try:
            with np.errstate(all="ignore"):
                outs, errs_, args_after, arg_errs = ns["ref"](*data)
        finally:
            E.GRAD = False
        res = []
        for o, e, v in zip(outs, errs_, [o for k, o in enumerate(self.outs) if k not in self.drop_outputs]):
            o = np.asarray(o)
            if v.dt == "f32":
                o = o.astype(np.float64)
                if not self.nan_ok and not np.all(np.isfinite(o)):
                    raise E.Reject("non-finite output")
            elif v.dt in ("i32", "u32"):
                o = o.astype(np.int64)
                if v.dt == "i32" and (np.any(o >= 2 ** 31) or np.any(o < -2 ** 31)):
                    raise E.Reject("i32 overflow")
                if v.dt == "u32" and (np.any(o >= 2 ** 32) or np.any(o < 0)):
                    raise E.Reject("u32 range")
            else:
                o = o.astype(bool)
            e = E.bc(e, o.shape).astype(np.float64)
            res.append((o, e))
        ta = []
        for (nm, dt, ann, _), a, e in zip([a for a in self.args if a[2]], args_after, arg_errs):
            if dt == "f32" and not np.all(np.isfinite(np.asarray(a, float))) and not self.nan_ok:
                raise E.Reject("non-finite argument")
            a = np.asarray(a)
            ta.append((a, E.bc(e, a.shape).astype(np.float64)))
        return res, ta

    nan_ok = False


def _differentiable(g, result):
    """Gradient mode: the program has a f32 argument and a finite f32 output (something to check)."""
    outs = [o for k, o in enumerate(g.outs) if k not in g.drop_outputs]
    return any(a[1] == "f32" for a in g.args) and any(
        o.dt == "f32" and np.all(np.isfinite(r[0])) for o, r in zip(outs, result[0]))


def _is_lit(v):
    return v.e == "0.0" and (v.em[0] in "(-0123456789" or v.em in ("True", "False"))


def _npdt(dt):
    return {"f32": "np.float64", "i32": "np.int64", "u32": "np.int64", "bool": "bool"}[dt]


def generate(seed, choices=None, drop_outputs=(), max_blocks=4, grad=False):
    """The program of `seed` (or of a recorded/shrunk choice list). grad=True: the program of the
    gradient mode (tests/fuzz/grad.py): no workgroup kernels (em.grad rejects them), no bitcast
    of a float to bits, no f32 atomic min/max while GRAD_KNOWN_BUGS says so, and derivative
    kinks (min/max, max reductions, abs, clamp) kept away from the error bound like jumps (errs.GRAD);
    the same seed is another program than without grad."""
    g = Gen(seed, choices, drop_outputs, grad)
    nblocks = g.c.int(1, max_blocks)
    result = None
    for b in range(nblocks + 4):
        if b >= nblocks and (not grad or result is not None and _differentiable(g, result)):
            break  # gradient mode: up to 4 more parts until a f32 argument reaches a finite f32 output
        for attempt in range(6):
            snap = g.snapshot()
            try:
                g.random_block()
                if g.ind != 1:
                    raise AssertionError("unbalanced block")
                result = g.check()
                break
            except E.Reject:
                g.restore(snap)
            except Exception:  # a fuzzer bug: FUZZ_DEBUG=1 raises it, else the part is dropped
                if os.environ.get("FUZZ_DEBUG"):
                    raise
                GEN_ERRORS[0] += 1
                g.restore(snap)
    if not g.outs or result is None:
        g = Gen(seed, [], drop_outputs, grad)
        g.c.int(1, 1)
        a = g.new_arg("f32", (3,))
        g.output(g.op("{0} + 1.0", "{0} + 1.0", "E.add({o}, {0}, {e0}, 1.0, 0.0)", "f32", (3,), a))
        result = g.check()
    return _program(g, seed, result, drop_outputs, grad)


def generate_block(seed, kind, grad=False):
    """A program of one block of `kind` (e.g. gen_isl.py's "reduce_atomic"), for tests of what a
    block exercises; None when six tries were all rejected by the reference's checks."""
    g = Gen(seed, None, (), grad)
    for _ in range(6):
        snap = g.snapshot()
        try:
            getattr(g, "b_" + kind)()
            return _program(g, seed, g.check(), (), grad)
        except E.Reject:
            g.restore(snap)
    return None


def _program(g, seed, result, drop_outputs, grad):
    em_src, np_src = g.sources()
    (res, targs) = result
    return Program(seed, em_src, np_src, [(a[0], a[1], a[2], a[3]) for a in g.args],
                   [o.dt for k, o in enumerate(g.outs) if k not in g.drop_outputs],
                   [r[0] for r in res], [r[1] for r in res], targs, sorted(g.features), list(g.c.rec),
                   gpu_ok=g.gpu_ok,
                   out_specs=[(o.em, o.shape) for k, o in enumerate(g.outs) if k not in g.drop_outputs],
                   grad=grad)
