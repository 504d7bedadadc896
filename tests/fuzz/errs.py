"""Error bounds for the fuzzer's checked reference (imported as E by the generated code).

Every reference value v (float64 for f32, int64 for i32/u32, bool) has an error bound e of shape
(2,) + v.shape: e[0] bounds |f32 result - v| on the cpu backend and the reference interpreter
(correctly rounded basic ops, Ember's <= 1 ulp math), e[1] on the GPU dialects (GLSL/HLSL native
math, calibrated on lavapipe/llvmpipe: exp 10 ulp, log/log2 ~4e-7 absolute, sinh/tanh ~2e-7
absolute, pow 10 ulp, tan/asin/acos/atan/atan2 3 ulp, division 3 ulp). Bounds are first order plus
the exact image of the perturbed inputs for math functions. A check that finds a discontinuous op
(floor, comparison, cast to int, argmax...) too close to its discontinuity for the bound raises
Reject, and the generator makes another program part.

Gradient mode (GRAD = True, set by the generator while it checks a grad-mode program): ops whose
*derivative* jumps (min/max, max/min reductions, abs, clamp) are discontinuous ops too: an input
closer to the kink than the forward error bound could take the other side in f32, and the f32
gradient would then be the other one-sided derivative (kinks within the central-difference step
are the gradient checker's business: tests/fuzz/grad.py). And a math function's derivative must be
well-conditioned in f32 (dcheck): its relative error, from the error of what it is evaluated at,
within a quarter of the gradient tolerance GRAD_RTOL (else tanh near saturation, where 1 - tanh^2
is computed from tanh's f32 result, or cos as sin's derivative near its zero, would be compared
with their float64 values at a precision f32 cannot give).
"""
import numpy as np

U = 2.0 ** -23  # one ulp, relative (an upper bound)
CLASSES = ("cpu", "gpu")


GRAD = False  # gradient mode: derivative kinks within the error reject too (see the docstring)
GRAD_RTOL = (1e-4, 1e-3)  # the gradient tolerance relative to its scale, cpu / GPU (tests/fuzz/grad.py)


class Reject(Exception):
    """The generated part is not well-conditioned (or would overflow): generate another."""


def kc(cpu, gpu, nd):
    return np.array([cpu, gpu], float).reshape((2,) + (1,) * nd)


def bc(e, shape):
    """An error (a scalar 0, or (2,) + s with s broadcastable to shape) as (2,) + shape."""
    e = np.asarray(e, float)
    shape = tuple(np.shape(shape)) if not isinstance(shape, tuple) else shape
    if e.ndim == 0:
        return np.broadcast_to(e, (2,) + shape)
    s = e.shape[1:]
    e = e.reshape((2,) + (1,) * (len(shape) - len(s)) + s)
    return np.broadcast_to(e, (2,) + shape)


def z(v):
    return np.zeros((2,) + np.shape(v))


def _exact32(o):
    o = np.asarray(o, float)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(o.astype(np.float32).astype(float) == o)


def rnd(o, kcpu, kgpu, agpu=0.0, exact_ok=False):
    """The rounding error of one op producing o: k ulps (cpu, gpu) and an absolute gpu term."""
    o = np.asarray(o, float)
    r = kc(kcpu, kgpu, o.ndim) * U * np.abs(o) + kc(0.0, agpu, o.ndim) + 1e-37
    if exact_ok:
        r = np.where(_exact32(o), 0.0, r)
    return r


def fin(o):
    """Rejects non-finite, huge or subnormal-range results (GPUs may flush subnormals)."""
    o = np.asarray(o, float)
    if not np.all(np.isfinite(o)) or np.any(np.abs(o) > 1e30):
        raise Reject("not finite")
    if np.any((np.abs(o) < 1e-30) & (o != 0)):
        raise Reject("tiny")
    return o


def ulps_math(name):
    return MATH.get(name, (2, 4, 0.0))


# name: (cpu ulps, gpu ulps, gpu absolute)
MATH = {
    "exp": (1, 12, 0.0), "exp2": (1, 5, 0.0), "log": (1, 8, 5e-7), "log2": (1, 8, 6e-7),
    "sqrt": (1, 2, 0.0), "rsqrt": (2, 3, 0.0), "sin": (1, 3, 2e-7), "cos": (1, 3, 2e-7),
    "tan": (2, 4, 0.0), "asin": (2, 4, 0.0), "acos": (2, 4, 0.0), "atan": (2, 4, 0.0),
    "sinh": (2, 10, 3e-7), "cosh": (2, 8, 0.0), "tanh": (1, 4, 3e-7), "pow": (1, 16, 0.0),
    "atan2": (1, 4, 0.0),
}


# ---- arithmetic ----------------------------------------------------------------------------
def _exact_rnd(o, ea, eb):
    """Rounding of + - *: none where both operands are exact and the exact result is an f32."""
    r = rnd(o, 1, 1)
    return np.where(_exact32(o) & (ea.max(axis=0) == 0) & (eb.max(axis=0) == 0), 0.0, r)


def add(o, a, ea, b, eb):
    o = fin(o)
    ea, eb = bc(ea, o.shape), bc(eb, o.shape)
    return ea + eb + _exact_rnd(o, ea, eb)


def mul(o, a, ea, b, eb):
    o = fin(o)
    ea, eb = bc(ea, o.shape), bc(eb, o.shape)
    return np.abs(a) * eb + np.abs(b) * ea + ea * eb + _exact_rnd(o, ea, eb)


def div(o, a, ea, b, eb):
    o = fin(o)
    ea, eb = bc(ea, o.shape), bc(eb, o.shape)
    b = np.broadcast_to(np.abs(np.asarray(b, float)), o.shape)
    if np.any(b - eb[1] <= 0.5 * b):
        raise Reject("division by an uncertain value")
    return (ea + np.abs(o) * eb) / (b - eb) + rnd(o, 1, 3)


def same(o, e):
    return bc(e, np.shape(o)).copy()


def minmax(o, a, ea, b, eb):
    sh = np.shape(o)
    if GRAD:
        _kink(np.broadcast_to(np.asarray(a, float) - np.asarray(b, float), sh), (bc(ea, sh) + bc(eb, sh)).max(axis=0))
    return np.maximum(bc(ea, sh), bc(eb, sh))


def _kink(d, e):
    """Gradient mode: d (the distance of a derivative's kink) must be 0 (an exact tie: both sides
    computed alike, so tied in f32 too; the derivative splits evenly as central differences do) or
    more than twice its error e."""
    d = np.abs(np.asarray(d, float))
    if np.any((e > 0) & (d > 0) & (d <= 2 * e)):
        raise Reject("derivative kink within the error")


def absk(o, x, ex):
    """|x| (the error of x; in gradient mode x must stay away from 0 by twice its error)."""
    sh = np.shape(o)
    if GRAD:
        _kink(np.broadcast_to(np.asarray(x, float), sh), bc(ex, sh).max(axis=0))
    return bc(ex, sh).copy()


def clampk(o, x, ex, lo, hi):
    """clamp(x, lo, hi) (the error of x; in gradient mode x must stay away from lo and hi)."""
    sh = np.shape(o)
    if GRAD:
        x = np.broadcast_to(np.asarray(x, float), sh)
        e = bc(ex, sh).max(axis=0)
        _kink(x - lo, e)
        _kink(x - hi, e)
    return bc(ex, sh).copy()


def where(o, c, a, ea, b, eb):
    sh = np.shape(o)
    return np.where(np.asarray(c, bool), bc(ea, sh), bc(eb, sh))


def _inner_extremum(name, f, o, lo, hi):
    """How far the non-monotonic functions get from o at an extremum inside [lo, hi], which the
    endpoints miss (seed 302105: cos of an f32(u32) near 4e9, whose rounding error of 128 spans
    many periods, was given the endpoints' deviation 0.5 instead of 1 + |cos|)."""
    if name in ("sin", "cos"):
        c = 0.0 if name == "cos" else np.pi / 2  # extrema at c + k pi
        t = c + np.ceil((lo - c) / np.pi) * np.pi
        inner = np.where(t <= hi, np.abs(f(t) - o), 0.0)
        return np.where(hi - lo >= np.pi, 1.0 + np.abs(o), inner)  # two extrema: the whole [-1, 1]
    if name == "cosh":
        return np.where((lo <= 0) & (hi >= 0), np.abs(1.0 - o), 0.0)
    return 0.0


def math1(name, f, o, x, ex):
    """A unary math function: the image of [x - ex, x + ex] plus its rounding error."""
    o = fin(o)
    ex = bc(ex, o.shape)
    x = np.broadcast_to(np.asarray(x, float), o.shape)
    with np.errstate(all="ignore"):
        d = np.maximum(np.abs(f(x + ex) - o), np.abs(f(x - ex) - o))
        d = np.maximum(d, _inner_extremum(name, f, o, x - ex, x + ex))
    if not np.all(np.isfinite(d)):
        raise Reject("math near its domain edge")
    kcpu, kgpu, agpu = MATH[name]
    e = d * 1.01 + rnd(o, kcpu, kgpu, agpu)
    if GRAD:
        dcheck(lambda t: f(t[0]), o, [x], [ex], e if f is np.tanh else None)
    return e


def dcheck(f, o, xs, exs, eo=None):
    """Gradient mode: the partial derivatives of f (of the arguments xs, errors exs) evaluated in f32
    at the perturbed arguments must be within GRAD_RTOL / 4 of their values (relative): the change
    of a partial over each argument's error (its own plus one ulp of max(1, |x|) for the rounding
    inside the derivative's formula), by second differences. eo (tanh): the derivative is computed
    from the result o as 1 - o^2, whose error 2 |o| eo is what counts."""
    sh = np.shape(o)
    xs = [np.broadcast_to(np.asarray(x, float), sh) for x in xs]
    hs = [1e-4 * np.maximum(1.0, np.abs(x)) for x in xs]
    n = len(xs)

    def at(*steps):
        return np.asarray(f([x + k * h for x, h, k in zip(xs, hs, steps)]), float)
    with np.errstate(all="ignore"):
        f0 = at(*[0] * n)
        for k in range(n):
            ek = [1 if i == k else 0 for i in range(n)]
            em = [-1 if i == k else 0 for i in range(n)]
            fp, fm = at(*ek), at(*em)
            d1 = np.abs(fp - fm) / (2 * hs[k])
            for c in range(2):
                rel = np.zeros(sh)
                for m in range(n):
                    ein = bc(exs[m], sh)[c] + U * np.maximum(1.0, np.abs(xs[m]))
                    if m == k:
                        d2 = np.abs(fp - 2 * f0 + fm) / hs[k] ** 2
                    else:
                        pp = [1 if i in (k, m) else 0 for i in range(n)]
                        pm = [1 if i == k else (-1 if i == m else 0) for i in range(n)]
                        mp = [-1 if i == k else (1 if i == m else 0) for i in range(n)]
                        mm = [-1 if i in (k, m) else 0 for i in range(n)]
                        d2 = np.abs(at(*pp) - at(*pm) - at(*mp) + at(*mm)) / (4 * hs[k] * hs[m])
                    rel = rel + d2 * ein
                rel = rel / d1
                if eo is not None:
                    oo = np.asarray(o, float)
                    rel = rel + 2 * np.abs(oo) * bc(eo, sh)[c] / (1 - oo * oo)
                if np.any((d1 > 0) & ~(rel <= GRAD_RTOL[c] / 4)):
                    raise Reject("derivative ill-conditioned in f32")


def math2(name, f, o, x, ex, y, ey):
    o = fin(o)
    ex, ey = bc(ex, o.shape), bc(ey, o.shape)
    x = np.broadcast_to(np.asarray(x, float), o.shape)
    y = np.broadcast_to(np.asarray(y, float), o.shape)
    d = np.zeros_like(ex)
    with np.errstate(all="ignore"):
        for sx in (-1, 1):
            for sy in (-1, 1):
                d = np.maximum(d, np.abs(f(x + sx * ex, y + sy * ey) - o))
    if not np.all(np.isfinite(d)) or np.any(d > 0.05 * (1 + np.abs(o))):
        raise Reject("ill-conditioned")
    kcpu, kgpu, agpu = MATH[name]
    if GRAD:
        dcheck(lambda t: f(t[0], t[1]), o, [x, y], [ex, ey])
    if name == "pow":  # exp2(y * log2(x)) on the GPU: the error grows with |y log2 x|
        agpu_arr = 4 * U * np.abs(o) * np.abs(y * np.log2(np.maximum(x, 1e-30)))
        return d * 1.01 + rnd(o, kcpu, kgpu) + kc(0, 1, o.ndim) * agpu_arr
    return d * 1.01 + rnd(o, kcpu, kgpu, agpu)


# ---- discontinuous ops ---------------------------------------------------------------------
def disc(f, o, x, ex):
    """f is piecewise constant and monotone (floor, ceil, trunc, round, sign, casts to int):
    f must be the same at x - 2ex and x + 2ex (exact inputs are always fine)."""
    ex = bc(ex, np.shape(o)).max(axis=0) * 2
    x = np.broadcast_to(np.asarray(x, float), np.shape(o))
    with np.errstate(all="ignore"):
        bad = (ex > 0) & ((f(x - ex) != f(x + ex)) | (f(x - ex) != o))
    if np.any(bad):
        raise Reject("discontinuity within the error")
    return z(o)


def frac(o, x, ex):
    disc(np.floor, np.floor(x), x, ex)
    # x - floor(x) rounds at the larger of |x| and the result (frac(-0.007) = 0.993 rounds at 1).
    return bc(ex, np.shape(o)) + rnd(np.maximum(np.abs(np.asarray(x, float)), np.abs(np.asarray(o, float))), 1, 1)


def cmp(o, a, ea, b, eb):
    sh = np.shape(o)
    e = (bc(ea, sh) + bc(eb, sh)).max(axis=0)
    d = np.abs(np.broadcast_to(np.asarray(a, float) - np.asarray(b, float), sh))
    if np.any((e > 0) & (d <= 2 * e)):
        raise Reject("comparison within the error")
    return z(o)


def fmod(o, a, ea, b, eb, floordiv=False):
    """a % b and a // b on floats (b > 0 by construction): a / b must stay away from integers."""
    sh = np.shape(o)
    a = np.broadcast_to(np.asarray(a, float), sh)
    b = np.broadcast_to(np.asarray(b, float), sh)
    ea, eb = bc(ea, sh), bc(eb, sh)
    r = a / b
    er = ((ea + np.abs(r) * eb) / np.abs(b)).max(axis=0) + 8 * U * np.abs(r) + 1e-30
    if np.any(np.abs(r - np.round(r)) <= 2 * er):
        raise Reject("quotient near an integer")
    if floordiv:
        return z(o)
    return ea + np.abs(np.floor(r)) * eb + rnd(np.maximum(np.abs(a), np.abs(b * np.floor(r))), 4, 8)


def cast_int(o, x, ex, unsigned=False):
    x = np.asarray(x, float)
    if np.any(np.abs(x) >= 2.0 ** 30) or (unsigned and np.any(x < 0)):
        raise Reject("cast out of range")
    return disc(np.trunc, o, x, ex)


def cast_float(o):
    o = np.asarray(o, float)
    return np.where(np.abs(o) <= 2.0 ** 24, 0.0, rnd(o, 1, 1))


def i32(o):
    o = np.asarray(o)
    if np.any(o >= 2 ** 31) or np.any(o < -2 ** 31):
        raise Reject("i32 overflow")
    return z(o)


def u32(o):
    return z(o)


def nz(v):
    if np.any(np.asarray(v) == 0):
        raise Reject("integer division by zero")
    return v


# ---- reductions and linear algebra -----------------------------------------------------------
def _n(x, axes):
    x = np.asarray(x)
    if axes is None:
        return max(x.size, 1)
    return int(np.prod([x.shape[a] for a in axes])) if axes else 1


def _ax(axes, nd):
    """Axes of a value of rank nd as axes of its error (which has a leading class axis)."""
    if axes is None:
        return tuple(range(1, nd + 1))
    return tuple((a % nd) + 1 for a in axes)


def rsum(o, x, ex, axes, keepdims, mean=False):
    o = fin(o)
    x = np.asarray(x, float)
    ax = _ax(axes, x.ndim)
    ex = bc(ex, x.shape)
    n = _n(x, axes)
    s = np.sum(ex, axis=ax, keepdims=keepdims) + (n + 1) * U * np.sum(np.abs(x), axis=axes, keepdims=keepdims)
    s = s * kc(1, 1, np.ndim(o))
    if mean:
        s = s / n + rnd(o, 2, 3)
    return s


def rmax(o, x, ex, axes, keepdims):
    x = np.asarray(x, float)
    ax = _ax(axes, x.ndim)
    if GRAD:  # the extreme element must beat every other by twice their errors (or tie exactly)
        xa = tuple(a - 1 for a in ax)  # the reduced axes of x
        e = bc(ex, x.shape).max(axis=0)
        okd = np.asarray(o, float) if keepdims else np.expand_dims(np.asarray(o, float), xa)
        hit = x == okd
        eo = np.max(np.where(hit, e, 0.0), axis=xa, keepdims=True)
        _kink(np.where(hit, 0.0, x - okd), np.where(hit, 0.0, e + eo))
    return np.max(bc(ex, x.shape), axis=ax, keepdims=keepdims)


def rprod(o, x, ex, axes, keepdims):
    o = fin(o)
    x = np.asarray(x, float)
    ex = bc(ex, x.shape)
    if np.any(np.abs(x) <= 4 * ex.max(axis=0)):
        raise Reject("product of uncertain small values")
    ax = _ax(axes, x.ndim)
    rel = np.sum(ex / np.maximum(np.abs(x), 1e-30), axis=ax, keepdims=keepdims)
    n = _n(x, axes)
    return np.abs(o) * (rel * 1.1 + (n + 1) * U)


def rnorm(o, x, ex, axes, keepdims):
    o = fin(o)
    x = np.asarray(x, float)
    ex = bc(ex, x.shape)
    ax = _ax(axes, x.ndim)
    n = _n(x, axes)
    s = np.sum(np.abs(x) * ex + ex * ex, axis=ax, keepdims=keepdims)
    e = s / np.maximum(o, 1e-30) * 1.1 + (n + 3) * U * np.abs(o) + np.sqrt(s) * 0
    if GRAD and np.any(np.abs(o) <= 2 * e.max(axis=0) + 1e-30):
        raise Reject("norm at 0: its derivative x / |x| is 0 / 0 (NaN in Ember, as in JAX)")
    return e


def argext(o, x, ex, axis, keepdims, largest):
    """argmax/argmin: the extreme element must beat every other by more than the errors."""
    x = np.asarray(x, float)
    e = bc(ex, x.shape).max(axis=0)
    if axis is None:
        x, e, axis = x.reshape(-1), e.reshape(-1), 0
    xs = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
    es = np.moveaxis(e, axis, -1).reshape(-1, x.shape[axis])
    for row, er in zip(xs, es):
        k = int(np.argmax(row) if largest else np.argmin(row))
        gap = (row[k] - row) if largest else (row - row[k])
        lim = 2 * (er + er[k])
        bad = np.ones(len(row), bool)
        bad[k] = False
        if np.any(bad & (lim > 0) & (gap <= lim)):
            raise Reject("argmax/argmin ambiguous")
    return z(o)


def cumsum(o, x, ex, axis):
    o = fin(o)
    x = np.asarray(x, float)
    ex = bc(ex, x.shape)
    n = x.shape[axis]
    return np.cumsum(ex, axis=axis + 1 if axis >= 0 else axis) + (n + 1) * U * np.cumsum(np.abs(x), axis=axis)


def matmul(o, a, ea, b, eb, fn=np.matmul):
    o = fin(o)
    a, b = np.asarray(a, float), np.asarray(b, float)
    ea, eb = bc(ea, a.shape), bc(eb, b.shape)
    k = a.shape[-1] if a.ndim else 1
    out = []
    for c in range(2):
        out.append(fn(np.abs(a), eb[c]) + fn(ea[c], np.abs(b)) + fn(ea[c], eb[c])
                   + (k + 2) * U * fn(np.abs(a), np.abs(b)))
    return np.stack(out).reshape((2,) + np.shape(o))


def mapn(f, *es, shapes=None):
    """The error of a structural op (shape op, slice, gather): the same op on each class."""
    if shapes is not None:
        es = [bc(e, s) for e, s in zip(es, shapes)]
    es = [np.zeros(2) if np.ndim(e) == 0 else e for e in es]  # a scalar's (or a literal's) zero error
    return np.stack([np.asarray(f(*[e[c] for e in es]), float) for c in range(2)])


# ---- composites ------------------------------------------------------------------------------
def smooth(e0, e1, x):
    t = np.clip((np.asarray(x, float) - e0) / (e1 - e0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def lerp(o, a, ea, b, eb, t, et):
    o = fin(o)
    sh = np.shape(o)
    d = np.asarray(b, float) - np.asarray(a, float)
    ed = add(np.broadcast_to(d, sh), a, ea, b, eb)
    p = np.broadcast_to(d * np.asarray(t, float), sh)
    ep = mul(p, np.broadcast_to(d, sh), ed, t, et)
    return add(o, a, ea, p, ep)


def fma(o, a, ea, b, eb, c, ec):
    o = fin(o)
    sh = np.shape(o)
    p = np.broadcast_to(np.asarray(a, float) * np.asarray(b, float), sh)
    return add(o, p, mul(p, a, ea, b, eb), c, ec)


def inrange(k, n):
    k = np.asarray(k)
    if np.any(k < 0) or np.any(k >= n):
        raise Reject("unsafe index out of range")
    return k


def wrapdt(x, dt):
    if dt == "u32":
        return x % 2 ** 32
    if dt == "i32" and not -2 ** 31 <= x < 2 ** 31:
        raise Reject("i32 overflow")
    return x


def group_reverse(x, G):
    """Y[i] = x[g*G + G-1-l] where that index is inside, else 0 (the group 'reverse' program)."""
    x = np.asarray(x)
    n = x.shape[-1]
    y = np.zeros_like(x)
    for i in range(n):
        g, l = divmod(i, G)
        j = g * G + (G - 1 - l)
        if j < n:
            y[..., i] = x[..., j]
    return y


# ---- race programs (gen_race.py) -------------------------------------------------------------
RACES = []


def race_probe(target, value, ran=None):
    """Records in RACES whether the threads of a store (`ran`: the mask of those that run it, None
    for all) write different values into one element: `target` the element each thread writes,
    `value` what it writes (both of the store's shape)."""
    t = np.asarray(target).reshape(-1)
    v = np.broadcast_to(np.asarray(value, float), np.shape(target)).reshape(-1)
    if ran is not None:
        m = np.broadcast_to(np.asarray(ran, bool), np.shape(target)).reshape(-1)
        t, v = t[m], v[m]
    RACES.append(any(np.any(v[t == e] != v[t == e][0]) for e in np.unique(t)))
