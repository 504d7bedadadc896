"""Gradient checks for em.grad against float64 central differences of a NumPy reference.

check_grad(backend, fn, ref, args) takes
  fn    an Ember function of traced values (called inside @em.compile) returning an f32 value or a
        tuple of them,
  ref   the same function in NumPy, evaluated in float64 (each test writes it with np.float64),
  args  {name: value}: float32 arrays (differentiated), int32/bool arrays (not), Python floats
        (f32 scalar arguments, differentiated) and Python ints (i32 scalars, not),
and builds two programs:
  gradient  L = sum_k sum(w_k * fn(args)[k]) with fixed random weights w_k > 0 of each output's
            shape (every output element matters, with a different weight), a scalar, and
            em.grad(L, [args...]) for the differentiated arguments (a list: one result each);
  forward   L and em.jvp(L, [args...], [d...]) along random directions d (forward mode).
The gradient program's L is compared with the reference's (so fn and ref agree: a failure there is
a bug in the test or in the forward computation, not in autodiff), then each gradient with float64
central differences of L_ref = sum_k sum(w_k * ref(args)[k]), then the forward program's L and
jvp (= sum_k <dL/dx_k, d_k> of the central differences). Finite differences of the f32
program itself would be useless at the 1e-4 level: an f32 L has ~1e-7 relative rounding, so a
step h gives ~1e-7 |L| / h of noise (1e-2 at h = 1e-5).

Inputs are random (np.random.default_rng(seed)), never zero, and kept away from kinks and
singularities by `away` (each test names its op's domain); the f32 inputs are converted exactly
to float64, so both sides are evaluated at the same point.

Tolerances (`tolerance`): errors are measured relative to the gradient's scale, max |want| over
the argument (an element-wise relative test would fail on the tiny elements of a gradient whose
other elements are large, where f32 rounding is relative to the large terms it came from).
  cpu: 1e-4. Ember's cpu math is within 1 ulp (core/IR.md "Float math"), basic ops correctly
       rounded: a gradient through ~10-30 f32 ops and sums of up to ~100 positive terms has a
       relative error of k * 2^-24 ~ 1e-6..1e-5; the central differences are exact to ~1e-9
       (h = 1e-5 |x|: truncation h^2 |f'''| / 6, rounding 1e-16 |L| / h). 1e-4 leaves a margin of
       10 over the worst expected f32 error and is still 100x below what a wrong derivative gives
       (a wrong term of one element of a 20-element sum changes the gradient by >~ 1e-2).
  GPU dialects (vulkan, vulkan-hlsl, opengl): 1e-3. Their native math is looser (tests/fuzz/
       errs.py, calibrated on lavapipe/llvmpipe: exp 12 ulp, pow 16 ulp, sinh 10 ulp, log and sin
       ~2-6e-7 absolute), and a derivative evaluates such functions again (d tan = 1 + tan^2,
       d pow = y * log(x)...), so per-op errors of ~2e-6 compound to ~1e-4 over a chain; 1e-3
       keeps a margin of 10 and still catches wrong derivatives.
Measured (this suite, lavapipe/llvmpipe for the GPU dialects): worst error / scale 6e-7 on cpu
(softmax), 2e-6 on vulkan, vulkan-hlsl and opengl; a wrong derivative gives >= 1e-2.
A gradient that is exactly zero (zero-derivative ops, arguments y does not depend on) is checked
against an absolute floor of rtol * SCALE_FLOOR.
"""
import inspect
import zlib

import numpy as np

import ember as em

CPU_RTOL = 1e-4
GPU_RTOL = 1e-3
SCALE_FLOOR = 1e-2  # gradients here are O(0.1-10) (weights in [0.5, 1.5]): 1e-2 is "zero"
STEP = 1e-5  # central-difference step, relative to max(1, |x|)


def tolerance(backend):
    """The relative tolerance (to the gradient's scale) on `backend`; see the module docstring."""
    return CPU_RTOL if backend == "cpu" else GPU_RTOL


def seed_of(name):
    """A stable seed from a test's name (the same inputs on every run and backend)."""
    return zlib.crc32(name.encode())


# ---- inputs ----------------------------------------------------------------------------------
def away(rng, shape, lo, hi, bad=None, sign=False):
    """float32 uniform in [lo, hi) of `shape`, never exactly zero, resampled where bad(x) (a mask
    of elements too close to a kink or singularity, evaluated on the float32 values in float64)
    holds. sign=True flips the sign of a random half (for domains like +-[0.5, 2])."""
    shape = tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    x = rng.uniform(lo, hi, shape)
    if sign:
        x = x * rng.choice([-1.0, 1.0], shape)
    x = x.astype(np.float32)
    for _ in range(1000):
        mask = x == 0
        if bad is not None:
            mask |= np.asarray(bad(x.astype(np.float64)), bool)
        if not mask.any():
            return x
        y = rng.uniform(lo, hi, shape)
        if sign:
            y = y * rng.choice([-1.0, 1.0], shape)
        x = np.where(mask, y.astype(np.float32), x)
    raise AssertionError("could not draw inputs away from the kinks; widen the domain")


def near_int(x, margin=0.05, offset=0.0):
    """Mask: x within `margin` of an integer (+ offset: 0.5 for round's half-integers)."""
    f = np.mod(x - offset, 1.0)
    return (f < margin) | (f > 1.0 - margin)


def distinct(rng, shape, spacing=0.2, lo=-2.0):
    """float32 values whose pairwise gaps are >= spacing / 2 (for max/min/argmax: no ties)."""
    n = int(np.prod(shape))
    v = lo + spacing * rng.permutation(n) + rng.uniform(0, spacing / 2, n)
    return v.reshape(shape).astype(np.float32)


# ---- programs --------------------------------------------------------------------------------
def spec_of(v, symbolic=False):
    """The em annotation for an argument value; symbolic=True names every dimension > 1 by its
    size ("D5": equal sizes share a name, as broadcasting needs) instead of fixing it."""
    if isinstance(v, np.ndarray):
        dt = {np.dtype(np.float32): em.f32, np.dtype(np.int32): em.i32, np.dtype(np.bool_): em.bool,
              np.dtype(np.uint32): em.u32}[v.dtype]
        return dt[tuple(f"D{int(d)}" if symbolic and d > 1 else int(d) for d in v.shape)]
    if isinstance(v, bool):
        return em.bool
    if isinstance(v, float):
        return em.f32
    if isinstance(v, int):
        return em.i32
    raise TypeError(f"unsupported argument {v!r}")


def is_float(v):
    return (isinstance(v, np.ndarray) and v.dtype == np.float32) or isinstance(v, float)


def to64(v):
    """The argument as the reference sees it: float arrays and floats in float64 (exactly the f32
    value), others as they are."""
    if isinstance(v, np.ndarray) and v.dtype == np.float32:
        return v.astype(np.float64)
    if isinstance(v, float):
        return float(np.float32(v))
    return v.copy() if isinstance(v, np.ndarray) else v


def program(body, names, specs, name):
    """em.compile of body(*values) with parameters `names` annotated with `specs`."""
    def fn(*vals):
        return body(*vals)
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    fn.__annotations__ = dict(zip(names, specs))
    fn.__name__ = fn.__qualname__ = name
    return em.compile(fn)


def as_list(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def weights(outs64, seed):
    """Fixed random weights in [0.5, 1.5) of each output's shape (float32, exact in float64).
    Positive, so a gradient summing many terms does not cancel to a value small next to its
    rounding error; distinct, so a permuted or misplaced gradient is seen."""
    rng = np.random.default_rng(seed + 1)
    return [rng.uniform(0.5, 1.5, np.shape(o)).astype(np.float32) for o in outs64]


def weighted_loss(fn, nargs, flat_weights=False):
    """The traced L = sum_k sum(w_k * fn(args)[k]) of values args + weights. flat_weights: the
    weights come flattened (free dimension) and are reshaped to each output's (symbolic) shape."""
    def body(*vals):
        outs = as_list(fn(*vals[:nargs]))
        ws = vals[nargs:]
        assert len(outs) == len(ws), f"fn returned {len(outs)} values, the reference {len(ws)}"
        L = None
        for o, w in zip(outs, ws):
            if flat_weights:
                w = unflatten(w, o.shape)
            t = em.sum(w * o)
            L = t if L is None else L + t
        return L
    return body


def unflatten(w, shape):
    """Flat w as a value of `shape` (ints or symbolic scalar Values): w[row-major index], a gather
    (em.reshape cannot prove at trace time that a free and a symbolic size are equal)."""
    if not shape:
        return w[0]
    idx = em.indices(shape)
    flat = idx[0]
    for k in range(1, len(shape)):
        flat = flat * shape[k] + idx[k]
    return w[flat]


def ref_loss(ref, ws):
    ws64 = [w.astype(np.float64) for w in ws]

    def L(*vals):
        return float(sum(np.sum(w.reshape(np.shape(o)) * np.asarray(o, np.float64))
                         for o, w in zip(as_list(call(ref, vals)), ws64)))
    return L


def call(ref, vals):
    """ref(*vals) on copies of the arrays (a reference may write its arguments, as the program may)."""
    return ref(*[v.copy() if isinstance(v, np.ndarray) else v for v in vals])


# ---- numerics --------------------------------------------------------------------------------
def central_diff(L, vals, k, step=STEP):
    """d L / d vals[k] by float64 central differences (vals[k] an array or a float)."""
    vals = list(vals)
    x = vals[k]
    if not isinstance(x, np.ndarray):
        h = step * max(1.0, abs(x))
        vals[k] = x + h
        lp = L(*vals)
        vals[k] = x - h
        lm = L(*vals)
        return (lp - lm) / (2 * h)
    g = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        h = step * max(1.0, abs(x[idx]))
        xp = x.copy()
        xp[idx] += h
        vals[k] = xp
        lp = L(*vals)
        xm = x.copy()
        xm[idx] -= h
        vals[k] = xm
        lm = L(*vals)
        g[idx] = (lp - lm) / (2 * h)
    vals[k] = x
    return g


def assert_close(got, want, rtol, what):
    """|got - want| <= rtol * max(max |want|, SCALE_FLOOR) everywhere (NaN fails), with a message
    naming the worst element, got and want."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, SCALE_FLOOR)
    err = np.abs(got - want)
    bad = ~(err <= rtol * scale)
    if bad.any():
        e = np.where(np.isnan(err), np.inf, err)
        i = np.unravel_index(int(np.argmax(e)), e.shape) if e.ndim else ()
        with np.printoptions(precision=6, suppress=True, linewidth=150, threshold=60):
            raise AssertionError(
                f"{what}: {int(bad.sum())} of {bad.size} elements off; worst at {i}: got {got[i]!r}, "
                f"want {want[i]!r} (|err| {float(err[i]):.3g} > {rtol:g} * scale {scale:.3g})\n"
                f"got:\n{got}\nwant:\n{want}")


def run(prog, *args):
    """The program's results as NumPy arrays; array arguments are passed as copies (a program may
    write its arguments in place)."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    return [np.asarray(t.numpy()) for t in as_list(prog(*args))]


def check_grad(backend, fn, ref, args, *, wrt=None, rtol=None, name="f", seed=None, runs=None, symbolic=False):
    """Checks em.grad of L = sum(w * fn(args)) against central differences of the reference on
    `backend` (see the module docstring). wrt: the names to differentiate (default: every float
    argument). runs: further argument dicts to call the same two compiled programs with (e.g.
    another runtime trip count), each checked the same way. symbolic: annotate the arguments'
    dimensions symbolically (spec_of). Returns the programs."""
    names = list(args)
    wrt = [n for n in names if is_float(args[n])] if wrt is None else list(wrt)
    rtol = tolerance(backend) if rtol is None else rtol
    seed = seed_of(name) if seed is None else seed
    outs64 = as_list(call(ref, [to64(v) for v in args.values()]))
    ws = weights(outs64, seed)
    wnames = [f"w{k}__" for k in range(len(ws))]
    specs = [spec_of(v, symbolic) for v in args.values()]
    if symbolic:  # an output's dims are computed from the arguments': weights come flat, reshaped
        ws = [w.reshape(-1) for w in ws]
        specs += [em.f32[None] for _ in ws]
    else:
        specs += [spec_of(w) for w in ws]
    body = weighted_loss(fn, len(names), symbolic)
    pos = [names.index(n) for n in wrt]

    def grad_body(*vals):  # L and its gradients from one program (the common use)
        L = body(*vals)
        g = em.grad(L, [vals[p] for p in pos])
        assert isinstance(g, list) and len(g) == len(pos), f"em.grad of a list gave {g!r}"
        return [L] + g

    nv = len(names) + len(ws)

    def fwd_body(*vals):  # L and its forward-mode derivative along the directions d
        L = body(*vals[:nv])
        return L, em.jvp(L, [vals[p] for p in pos], list(vals[nv:]))
    ds = directions(args, wrt, seed)
    dspecs = [spec_of(d, symbolic) for d in ds]
    fwd = program(fwd_body, names + wnames + [f"d_{n}__" for n in wrt], specs + dspecs, f"{name}_loss")
    grd = program(grad_body, names + wnames, specs, f"{name}_grad")
    for a in [args] + list(runs or []):
        check_run(backend, fwd, grd, ref, a, ws, ds, wrt, rtol, name)
    return fwd, grd


def directions(args, wrt, seed):
    """Random tangents (one per differentiated argument, of its shape) for em.jvp."""
    rng = np.random.default_rng(seed + 2)
    out = []
    for n in wrt:
        v = args[n]
        out.append(float(np.float32(rng.uniform(-1, 1))) if isinstance(v, float)
                   else rng.uniform(-1, 1, v.shape).astype(np.float32))
    return out


def check_run(backend, fwd, grd, ref, args, ws, ds, wrt, rtol, name):
    names = list(args)
    vals = list(args.values())
    vals64 = [to64(v) for v in vals]
    L = ref_loss(ref, ws)
    L64 = L(*vals64)
    # Forward: rounding is relative to the sum of |terms| (cancellation); bound it by sum |w f|.
    mag = sum(float(np.sum(np.abs(w.astype(np.float64).reshape(np.shape(o)) * np.asarray(o, np.float64))))
              for o, w in zip(as_list(call(ref, vals64)), ws))
    Lg, *grads = run(grd, *vals, *ws)
    assert len(grads) == len(wrt)
    assert abs(float(Lg) - L64) <= rtol * max(mag, SCALE_FLOOR), \
        f"{name} on {backend}: the gradient program's L = {float(Lg)!r}, the reference's {L64!r} " \
        "(fn and ref disagree: a bug in the test or in the forward computation)"
    wants = []
    for n, g in zip(wrt, grads):
        want = central_diff(L, vals64, names.index(n))
        wants.append(want)
        assert_close(g, want, rtol, f"{name} on {backend}: dL/d{n}")
    # The forward program: L again and em.jvp(L, xs, ds) = sum_k <dL/dx_k, d_k> (from the central
    # differences), relative to sum_k sum |dL/dx_k * d_k| (the terms may cancel).
    Lf, jv = run(fwd, *vals, *ws, *ds)
    assert abs(float(Lf) - L64) <= rtol * max(mag, SCALE_FLOOR), \
        f"{name} on {backend}: the forward program's L = {float(Lf)!r}, the reference's {L64!r}"
    terms = [np.asarray(want, np.float64) * np.asarray(d, np.float64) for want, d in zip(wants, ds)]
    jwant = float(sum(np.sum(t) for t in terms))
    jscale = max(float(sum(np.sum(np.abs(t)) for t in terms)), SCALE_FLOOR)
    assert abs(float(jv) - jwant) <= rtol * jscale, \
        f"{name} on {backend}: em.jvp(L, {wrt}, d) = {float(jv)!r}, want {jwant!r} (tolerance " \
        f"{rtol * jscale:.3g}; the gradients agree with central differences: forward mode differs)"
