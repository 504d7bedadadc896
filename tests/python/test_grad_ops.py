"""em.grad on straight-line code, on every backend: one gradient check per elementwise op, cast,
broadcast, shape op, gather, reduction, scan, matmul, scatter, atomic and var update, each against
float64 central differences of a NumPy reference (tests/python/gradcheck.py: the loss is
sum(w * f(args)) with fixed random weights, so every output element matters). Then the API:
gradients w.r.t. intermediate values, vars, lists and tuples (structure kept), of values that do
not depend on x (zeros), explicit dy, gradients of gradients, em.jvp, detach and the TypeErrors.

Each case names its inputs' domain: away from kinks (abs, floor, min...: >= 0.05 from the kink)
and singularities (log, sqrt, div: >= 0.2 from 0; tan: |x| <= 1.2; asin/acos: |x| <= 0.9)."""
import sys

import numpy as np
import pytest

import ember as em
from gradcheck import away, assert_close, central_diff, check_grad, distinct, near_int, run, seed_of, tolerance

S = (3, 5)  # the elementwise shape: 15 elements, two axes


class Case:
    def __init__(self, name, fn, ref, make, wrt=None):
        self.name, self.fn, self.ref, self.make, self.wrt = name, fn, ref, make, wrt

    def __repr__(self):
        return self.name


def unary(name, fn, ref, lo, hi, bad=None):
    return Case(name, lambda x: fn(x), lambda x: ref(x), lambda r: {"x": away(r, S, lo, hi, bad)})


def binary(name, fn, ref, da, db, bad=None, sign_b=False):
    def make(r):
        for _ in range(1000):
            a = away(r, S, *da)
            b = away(r, S, *db, sign=sign_b)
            if bad is None or not np.any(bad(a.astype(np.float64), b.astype(np.float64))):
                return {"a": a, "b": b}
        raise AssertionError("no inputs away from the kinks")
    return Case(name, fn, ref, make)


ZERO = lambda x: np.abs(x) < 0.1  # noqa: E731  (kink or singularity at 0)

# ---- elementwise: unary (domain in the arguments) -----------------------------------------------
# Ops with a zero derivative (sign floor ceil round trunc) are checked as op(x) * x, whose
# gradient is op(x): a wrong derivative of op shows as an extra term.
UNARY = [
    unary("neg", lambda x: -x, lambda x: -x, -2, 2),
    unary("abs", em.abs, np.abs, -2, 2, ZERO),
    unary("abs_operator", lambda x: abs(x) * x, lambda x: np.abs(x) * x, -2, 2, ZERO),
    unary("sign", lambda x: em.sign(x) * x, lambda x: np.sign(x) * x, -2, 2, ZERO),
    unary("floor", lambda x: em.floor(x) * x, lambda x: np.floor(x) * x, -3, 3, near_int),
    unary("ceil", lambda x: em.ceil(x) * x, lambda x: np.ceil(x) * x, -3, 3, near_int),
    unary("round", lambda x: em.round(x) * x, lambda x: np.round(x) * x, -3, 3,
          lambda x: near_int(x, offset=0.5)),
    unary("trunc", lambda x: em.trunc(x) * x, lambda x: np.trunc(x) * x, -3, 3, near_int),
    unary("frac", lambda x: em.frac(x) * x, lambda x: (x - np.floor(x)) * x, -3, 3, near_int),
    unary("floordiv", lambda x: (x // 0.75) * x, lambda x: np.floor(x / 0.75) * x, -3, 3,
          lambda x: near_int(x / 0.75)),
    unary("exp", em.exp, np.exp, -2, 2),
    unary("exp2", em.exp2, np.exp2, -2, 2),
    unary("log", em.log, np.log, 0.2, 4),
    unary("log2", em.log2, np.log2, 0.2, 4),
    unary("sqrt", em.sqrt, np.sqrt, 0.2, 4),
    unary("rsqrt", em.rsqrt, lambda x: 1 / np.sqrt(x), 0.2, 4),
    unary("sin", em.sin, np.sin, -3, 3),
    unary("cos", em.cos, np.cos, -3, 3),
    unary("tan", em.tan, np.tan, -1.2, 1.2),
    unary("asin", em.asin, np.arcsin, -0.9, 0.9),
    unary("acos", em.acos, np.arccos, -0.9, 0.9),
    unary("atan", em.atan, np.arctan, -3, 3),
    unary("sinh", em.sinh, np.sinh, -2, 2),
    unary("cosh", em.cosh, np.cosh, -2, 2),
    unary("tanh", em.tanh, np.tanh, -2, 2),
    # Python constants on either side, integer and float exponents of a negative base, a constant
    # base: x ** 3 = x * x * x must not go through log(x) (NaN for x < 0).
    unary("constants", lambda x: (2.0 - x) * 3.0 - 1.0 / x + x / 4.0 + 2 * x,
          lambda x: (2.0 - x) * 3.0 - 1.0 / x + x / 4.0 + 2 * x, -2, 2, lambda x: np.abs(x) < 0.3),
    unary("pow_int_exponent_negative_base", lambda x: x ** 3 + x ** 2, lambda x: x ** 3 + x ** 2, -2, 2, ZERO),
    unary("pow_float_exponent_negative_base", lambda x: em.pow(x, 2.0), lambda x: x ** 2.0, -2, 2, ZERO),
    unary("pow_constant_base", lambda x: 2.0 ** x + em.pow(3.0, x), lambda x: 2.0 ** x + 3.0 ** x, -2, 2),
    unary("pow_half", lambda x: x ** 0.5 + x ** -1.5, lambda x: x ** 0.5 + x ** -1.5, 0.2, 4),
    unary("relu_max_constant", lambda x: em.max(x, 0.3) + em.min(x, -0.2) * 2.0,
          lambda x: np.maximum(x, 0.3) + np.minimum(x, -0.2) * 2.0, -2, 2,
          lambda x: (np.abs(x - 0.3) < 0.05) | (np.abs(x + 0.2) < 0.05)),
    unary("clamp", lambda x: em.clamp(x, -0.5, 0.7) * x, lambda x: np.clip(x, -0.5, 0.7) * x, -2, 2,
          lambda x: (np.abs(x + 0.5) < 0.05) | (np.abs(x - 0.7) < 0.05)),
    unary("smoothstep", lambda x: em.smoothstep(-1.5, 2.0, x),
          lambda x: (lambda t: t * t * (3 - 2 * t))(np.clip((x + 1.5) / 3.5, 0, 1)), -1.4, 1.9),
    unary("step", lambda x: em.step(0.5, x) * x, lambda x: np.where(x < 0.5, 0.0, 1.0) * x, -2, 2,
          lambda x: np.abs(x - 0.5) < 0.05),
    # Casts: f32 -> i32 -> f32 has a zero derivative (the gradient of x * f32(i32(3x)) is
    # f32(i32(3x))); f32(x) of an f32 is the identity; em.cast likewise.
    unary("cast_through_int", lambda x: x * em.f32(em.i32(x * 3.0)), lambda x: x * np.trunc(x * 3.0), -2, 2,
          lambda x: near_int(3 * x, 0.1)),
    unary("cast_f32_identity", lambda x: em.f32(x) * em.cast(x, em.f32), lambda x: x * x, -2, 2),
]

# ---- elementwise: binary ------------------------------------------------------------------------
BINARY = [
    binary("add", lambda a, b: a + b, np.add, (-2, 2), (-2, 2)),
    binary("sub", lambda a, b: a - b, np.subtract, (-2, 2), (-2, 2)),
    binary("mul", lambda a, b: a * b, np.multiply, (-2, 2), (-2, 2)),
    binary("div", lambda a, b: a / b, np.divide, (-2, 2), (0.5, 2), sign_b=True),
    # d(a mod b)/da = 1, d/db = -floor(a / b); away from a / b integer (the jumps).
    binary("mod", lambda a, b: a % b, np.mod, (-3, 3), (0.5, 2), bad=lambda a, b: near_int(a / b, 0.03)),
    binary("pow", em.pow, np.power, (0.3, 3), (-2, 2)),
    binary("pow_operator", lambda a, b: a ** b, np.power, (0.3, 3), (-2, 2)),
    # atan2(y, x): away from the origin and from the branch cut (y = 0, x < 0).
    binary("atan2", em.atan2, np.arctan2, (-2, 2), (-2, 2),
           bad=lambda y, x: (np.hypot(x, y) < 0.3) | (np.abs(y) < 0.1)),
    binary("min", em.min, np.minimum, (-2, 2), (-2, 2), bad=lambda a, b: np.abs(a - b) < 0.05),
    binary("max", em.max, np.maximum, (-2, 2), (-2, 2), bad=lambda a, b: np.abs(a - b) < 0.05),
    binary("lerp", lambda a, b: em.lerp(a, b, a * 0.25 + 0.5), lambda a, b: a + (b - a) * (a * 0.25 + 0.5),
           (-2, 2), (-2, 2)),
    binary("fma", lambda a, b: em.fma(a, b, a * b), lambda a, b: a * b + a * b, (-2, 2), (-2, 2)),
    binary("chain", lambda a, b: em.sin(a * b) / (1.0 + b * b) + em.exp(a - b) * em.tanh(a),
           lambda a, b: np.sin(a * b) / (1.0 + b * b) + np.exp(a - b) * np.tanh(a), (-1.5, 1.5), (-1.5, 1.5)),
]


def _where(r):
    return {"c": away(r, S, -2, 2, ZERO), "a": away(r, S, -2, 2), "b": away(r, S, -2, 2)}


def _broadcast(r):
    return {"a": away(r, (3, 1), -2, 2), "b": away(r, (1, 4), -2, 2), "v": away(r, (4,), -2, 2), "s": 0.75}


def _cast_arg(r):
    return {"x": away(r, S, -2, 2), "k": r.integers(-5, 6, S).astype(np.int32)}


def _mask(r):
    return {"x": away(r, S, -2, 2), "m": r.uniform(size=S) > 0.5}


OTHER_ELEMENTWISE = [
    # The condition's argument c gets a zero gradient (where is not differentiable in c).
    Case("where", lambda c, a, b: em.where(c > 0, a * a, b * 3.0), lambda c, a, b: np.where(c > 0, a * a, b * 3.0),
         _where),
    Case("where_bool_argument", lambda x, m: em.where(m, em.sin(x), x * 2.0),
         lambda x, m: np.where(m, np.sin(x), x * 2.0), _mask),
    Case("where_scalar_branch", lambda c, a, b: em.where(c > 0, a, 0.5) * b,
         lambda c, a, b: np.where(c > 0, a, 0.5) * b, _where),
    # The untaken branch is NaN (sqrt/log of x < 0): the gradient there is 0 (central differences),
    # not 0 * NaN. The classic where-NaN trap of JAX and PyTorch; common in SDF code.
    Case("where_guarded_sqrt_log", lambda x: em.where(x > 0, em.sqrt(x), 0.0) + em.where(x > 0, em.log(x), x),
         lambda x: np.where(x > 0, np.sqrt(np.abs(x)), 0.0) + np.where(x > 0, np.log(np.abs(x)), x),
         lambda r: {"x": away(r, S, -2, 2, ZERO)}),
    # A condition, a branch and an operand of three different broadcast shapes.
    Case("where_broadcast_shapes", lambda c, a, s: em.where(c > 0, a * a, s) * a,
         lambda c, a, s: np.where(c > 0, a * a, s) * a,
         lambda r: {"c": away(r, (3, 1), -2, 2, ZERO), "a": away(r, (1, 4), -2, 2), "s": -0.4}),
    Case("cast_int_argument", lambda x, k: x * em.f32(k) + em.f32(k * 2) * x * x,
         lambda x, k: x * k + (k * 2) * x * x, _cast_arg),
    # Broadcasting: a[3,1] op b[1,4] op v[4] op scalar argument s; gradients reduce over the
    # broadcast axes (and to a scalar for s).
    Case("broadcast", lambda a, b, v, s: a * b + em.sin(a) * v - s * b + s * s,
         lambda a, b, v, s: a * b + np.sin(a) * v - s * b + s * s, _broadcast),
    Case("broadcast_to", lambda a, b, v, s: em.broadcast_to(a, (3, 4)) * em.broadcast_to(v, (2, 3, 4)) * s,
         lambda a, b, v, s: np.broadcast_to(a, (3, 4)) * np.broadcast_to(v, (2, 3, 4)) * s, _broadcast,
         wrt=["a", "v", "s"]),
    Case("scalar_argument_only", lambda a, b, v, s: em.exp(s) * s, lambda a, b, v, s: np.exp(s) * s, _broadcast,
         wrt=["s", "a"]),
]


# ---- shape ops, slicing, gathers -------------------------------------------------------------
def _x(shape, lo=-2, hi=2):
    return lambda r: {"x": away(r, shape, lo, hi)}


def _xy(sx, sy):
    return lambda r: {"x": away(r, sx, -2, 2), "y": away(r, sy, -2, 2)}


def _idx(r):
    # Repeated indices (0 three times, 5 twice) and unused ones: the gradient scatter-adds.
    return {"x": away(r, (8,), -2, 2), "idx": np.array([0, 5, 0, 2, 7, 5, 0, 3, 1, 6, 6], np.int32)}


def _idx2(r):
    return {"x": away(r, (5, 4), -2, 2), "rows": np.array([4, 0, 4, 2, 4, 1], np.int32),
            "cols": np.array([3, 3, 0, 1, 2, 3], np.int32)}


def _i(n):
    return em.indices([n])[0]


def _stencil(x):
    i = _i(8)
    return x[i + 1] * 2.0 - x[i - 1] * x[i] + x[i + 3]  # clamped: x[7] and x[0] repeat at the edges


def _stencil_ref(x):
    i = np.arange(8)
    c = lambda k: x[np.clip(k, 0, 7)]  # noqa: E731
    return c(i + 1) * 2.0 - c(i - 1) * c(i) + c(i + 3)


def _stencil_wrap(x):
    i = _i(8)
    return em.gather(x, i + 1, mode="wrap") * em.gather(x, i - 2, mode="wrap") + em.gather(x, i + 9, mode="wrap")


def _stencil_wrap_ref(x):
    i = np.arange(8)
    return x[(i + 1) % 8] * x[(i - 2) % 8] + x[(i + 9) % 8]


def _laplacian(x):
    i, j = em.indices([4, 5])
    g = lambda a, b: em.gather(x, (a, b), mode="wrap")  # noqa: E731
    return (g(i + 1, j) + g(i - 1, j) + g(i, j + 1) + g(i, j - 1) - 4.0 * x) * x


def _laplacian_ref(x):
    r = lambda a, ax: np.roll(x, a, axis=ax)  # noqa: E731
    return (r(-1, 0) + r(1, 0) + r(-1, 1) + r(1, 1) - 4.0 * x) * x


def _gather_idx(x, idx):
    return x[idx] * x[idx]


def _gather2(x, rows, cols):
    return em.sin(x[rows, cols]) + x[rows, 1] * 2.0


def _oob(r):
    # Out-of-range indices: clamp takes -3 -> 0 and 9, 100 -> 7; wrap takes -3 -> 5, 9 -> 1, 100 -> 4.
    return {"x": away(r, (8,), -2, 2), "idx": np.array([-3, 9, 100, 2, 7, 0, -1], np.int32)}


def _gather_modes(x, idx):
    return x[idx] * 2.0 + em.gather(x, idx, mode="wrap") * em.gather(x, idx, mode="clip")


def _gather_modes_ref(x, idx):
    c, w = x[np.clip(idx, 0, 7)], x[np.mod(idx, 8)]
    return c * 2.0 + w * c


def _scatter_wrap(x, idx):
    B = em.zeros([8], em.f32)
    em.scatter(B, idx, x, mode="wrap")   # distinct targets after wrapping
    return B * B + B


def _scatter_wrap_ref(x, idx):
    B = np.zeros(8)
    B[np.mod(idx, 8)] = x
    return B * B + B


def _scatter_wrap_in(r):
    return {"x": away(r, (5,), -2, 2), "idx": np.array([-1, 9, 3, 12, -6], np.int32)}


def _computed_index(x, y):
    k = em.i32(em.floor(x * 2.0 + 3.0))    # an index computed from x: no gradient along it
    return y[k] * x + y[k + 1]


def _computed_index_ref(x, y):
    k = np.floor(x * 2.0 + 3.0).astype(int)
    return y[np.clip(k, 0, 7)] * x + y[np.clip(k + 1, 0, 7)]


SHAPE = [
    Case("gather_at_an_index_computed_from_x", _computed_index, _computed_index_ref,
         lambda r: {"x": away(r, (3, 4), -1.4, 2.4, lambda x: near_int(2 * x, 0.1)), "y": away(r, (8,), -2, 2)}),
    Case("reshape", lambda x: em.reshape(x, (3, 4)) * em.reshape(x, (4, 3)).T,
         lambda x: x.reshape(3, 4) * x.reshape(4, 3).T, _x((2, 6))),
    Case("reshape_method_infer", lambda x: em.sin(x.reshape(-1, 2)), lambda x: np.sin(x.reshape(-1, 2)), _x((2, 3, 2))),
    Case("transpose", lambda x: em.transpose(x, (2, 0, 1)) * 2.0 + x.T[0].T,
         lambda x: np.transpose(x, (2, 0, 1)) * 2.0 + x.T[0].T, _x((2, 3, 4))),
    Case("squeeze_unsqueeze", lambda x: em.unsqueeze(em.squeeze(x, 1), 0) * em.squeeze(x),
         lambda x: np.expand_dims(np.squeeze(x, 1), 0) * np.squeeze(x), _x((3, 1, 4))),
    Case("concat", lambda x, y: em.concat([x, y * y, x], axis=1), lambda x, y: np.concatenate([x, y * y, x], axis=1),
         _xy((3, 2), (3, 4))),
    Case("concat_flat", lambda x, y: em.concat([x, y], axis=None), lambda x, y: np.concatenate([x.ravel(), y.ravel()]),
         _xy((3, 2), (3, 4))),
    Case("stack", lambda x, y: em.stack([x, y, x * y], axis=1), lambda x, y: np.stack([x, y, x * y], axis=1),
         _xy((3, 4), (3, 4))),
    Case("repeat", lambda x: em.repeat(x, 3, axis=1) * 2.0 + em.reshape(em.repeat(x, 3), (2, 6)),
         lambda x: np.repeat(x, 3, axis=1) * 2.0 + np.repeat(x, 3).reshape(2, 6), _x((2, 2))),
    Case("flip", lambda x: em.flip(x, 1) * x + em.flip(x), lambda x: np.flip(x, 1) * x + np.flip(x), _x((3, 4))),
    Case("slices", lambda x: x[1:3, ::2] * x[-2:, 1::2] + x[:2, -1:], lambda x: x[1:3, ::2] * x[-2:, 1::2] + x[:2, -1:],
         _x((3, 4))),
    Case("negative_step_slice", lambda x: x[::-1] * x[::-2][1] + x[None, 3::-1, 0, None],
         lambda x: x[::-1] * x[::-2][1] + x[None, 3::-1, 0, None], _x((4, 3))),
    Case("integer_index", lambda x: x[1] * x[:, 2, None] + x[-1, -1], lambda x: x[1] * x[:, 2, None] + x[-1, -1],
         _x((3, 4))),
    Case("none_and_ellipsis", lambda x: x[None, ..., None] * x[..., 0, None, None],
         lambda x: x[None, ..., None] * x[..., 0, None, None], _x((2, 3))),
    Case("stencil_clamp", _stencil, _stencil_ref, _x((8,))),
    Case("stencil_wrap", _stencil_wrap, _stencil_wrap_ref, _x((8,))),
    Case("laplacian_wrap_2d", _laplacian, _laplacian_ref, _x((4, 5))),
    Case("gather_repeated_indices", _gather_idx, lambda x, idx: x[idx] * x[idx], _idx),
    Case("gather_out_of_range_modes", _gather_modes, _gather_modes_ref, _oob),
    Case("scatter_wrap_mode", _scatter_wrap, _scatter_wrap_ref, _scatter_wrap_in),
    Case("gather_2d_repeated", _gather2, lambda x, rows, cols: np.sin(x[rows, cols]) + x[rows, 1] * 2.0, _idx2),
]


# ---- reductions, scans, matmul ---------------------------------------------------------------
def _logsumexp(x):
    m = em.max(x, axis=1, keepdims=True)
    return em.log(em.sum(em.exp(x - m), axis=1)) + m[:, 0]


def _logsumexp_ref(x):
    m = np.max(x, axis=1, keepdims=True)
    return np.log(np.sum(np.exp(x - m), axis=1)) + m[:, 0]


def _logsumexp_detached(x):
    m = em.max(x, axis=1, keepdims=True).detach()
    return em.log(em.sum(em.exp(x - m), axis=1)) + m[:, 0]


def _distinct(shape):
    return lambda r: {"x": distinct(r, shape)}


def _prod_in(r):
    return {"x": away(r, (3, 4), 0.5, 1.5, sign=True)}


def _mm(r):
    return {"a": away(r, (3, 4), -2, 2), "b": away(r, (4, 5), -2, 2), "v": away(r, (4,), -2, 2)}


def _bmm(r):
    return {"a": away(r, (2, 3, 4), -1, 1), "b": away(r, (4, 2), -1, 1)}


REDUCTIONS = [
    Case("sum_all", lambda x: em.sum(x * x), lambda x: np.sum(x * x), _x((3, 4))),
    Case("sum_axis", lambda x: em.sum(em.sin(x), axis=1) * em.sum(x, axis=0)[1],
         lambda x: np.sum(np.sin(x), axis=1) * np.sum(x, axis=0)[1], _x((3, 4))),
    Case("sum_axes_keepdims", lambda x: em.sum(x, axis=(0, 2), keepdims=True) * x,
         lambda x: np.sum(x, axis=(0, 2), keepdims=True) * x, _x((2, 3, 4))),
    Case("mean", lambda x: em.mean(x * x, axis=-1) + em.mean(x), lambda x: np.mean(x * x, axis=-1) + np.mean(x),
         _x((3, 4))),
    Case("max_axis", lambda x: em.max(x, axis=1) * 2.0 + em.max(x * x),
         lambda x: np.max(x, axis=1) * 2.0 + np.max(x * x), lambda r: {"x": distinct(r, (3, 4), 0.3, -1.5)}),
    Case("min_axis", lambda x: em.min(x, axis=0) + em.min(em.sin(x)), lambda x: np.min(x, axis=0) + np.min(np.sin(x)),
         lambda r: {"x": distinct(r, (3, 4), 0.2, -1.2)}),
    Case("prod", lambda x: em.prod(x, axis=1) + em.prod(x), lambda x: np.prod(x, axis=1) + np.prod(x), _prod_in),
    Case("norm", lambda x: em.norm(x, axis=-1) + em.norm(x), lambda x: np.linalg.norm(x, axis=-1) + np.linalg.norm(x),
         _x((3, 4))),
    Case("logsumexp", _logsumexp, _logsumexp_ref, _distinct((3, 4))),
    # Values where exp overflows f32 (> 88): the max subtraction keeps the forward finite, and the
    # reverse pass must not form inf - inf through the max's two paths.
    Case("logsumexp_large_values", _logsumexp, _logsumexp_ref, lambda r: {"x": distinct(r, (3, 4), 3.0, 80.0)}),
    # A zero factor: d prod / dx_i is the product of the others (finite), not prod / x_i.
    Case("prod_with_a_zero", lambda x: em.prod(x, axis=1), lambda x: np.prod(x, axis=1),
         lambda r: {"x": np.array([[0.5, 0.0, -1.5, 2.0], [1.2, -0.7, 0.9, 1.1], [0.0, 0.0, 1.3, -0.6]], np.float32)}),
    Case("logsumexp_detached_max", _logsumexp_detached, _logsumexp_ref, _distinct((3, 4))),
    Case("softmax", lambda x: em.exp(x) / em.sum(em.exp(x), axis=1, keepdims=True),
         lambda x: np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True), _x((3, 4))),
    Case("prefix_sum", lambda x: em.prefix_sum(x, axis=0) * em.prefix_sum(x * x),
         lambda x: np.cumsum(x, axis=0) * np.cumsum(x * x, axis=-1), _x((4, 5))),
    Case("matmul", lambda a, b, v: a @ b + (a @ v)[:, None], lambda a, b, v: a @ b + (a @ v)[:, None], _mm),
    Case("matmul_batched", lambda a, b: em.matmul(a, b) * em.matmul(a, b), lambda a, b: (a @ b) * (a @ b), _bmm),
    # Sizes where the blocked scan, the tiled matmul (4 x 16 tiles) and long reductions kick in.
    Case("prefix_sum_long", lambda x: em.prefix_sum(em.sin(x)) * 0.01, lambda x: np.cumsum(np.sin(x)) * 0.01,
         _x((2000,))),
    Case("max_long", lambda x: em.max(x * x, axis=0), lambda x: np.max(x * x, axis=0),
         lambda r: {"x": distinct(r, (1500, 2), 0.01, 0.05)}),
    Case("matmul_tiled", lambda a, b: em.tanh(a @ b), lambda a, b: np.tanh(a @ b),
         lambda r: {"a": away(r, (40, 24), -0.3, 0.3), "b": away(r, (24, 33), -0.3, 0.3)}),
    Case("dot", lambda a, b, v: em.dot(v, v) * em.dot(a, v) + em.dot(a, b)[:, 0],
         lambda a, b, v: np.dot(v, v) * np.dot(a, v) + np.dot(a, b)[:, 0], _mm),
]


# ---- scatters, in-place overwrites, atomics, vars ---------------------------------------------------
def _scatter(x, y, idx):
    B = em.zeros([10], em.f32)
    B[idx] = x        # distinct indices; 0, 1, 5 and 9 stay zero
    B[1] = y[0] * 2.0
    return em.sin(B) + B


def _scatter_ref(x, y, idx):
    B = np.zeros(10)
    B[idx] = x
    B[1] = y[0] * 2.0
    return np.sin(B) + B


def _scatter_in(r):
    return {"x": away(r, (6,), -2, 2), "y": away(r, (2,), -2, 2), "idx": np.array([7, 2, 8, 4, 3, 6], np.int32)}


def _slice_scatter(x, y):
    B = em.zeros([4, 6], em.f32)
    B[1:3, ::2] = x
    B[0] = y * y
    B[3, 1:] = x[0, 0]
    return B * B + B


def _slice_scatter_ref(x, y):
    B = np.zeros((4, 6))
    B[1:3, ::2] = x
    B[0] = y * y
    B[3, 1:] = x[0, 0]
    return B * B + B


def _overwrite(x):
    A = em.zeros([6], em.f32)
    A[:] = x
    i = _i(6)
    A[i] = em.sin(A[i]) * 2.0   # in place: A[i] = f(A[i])
    A[i] = A[i] * A[i] + A[i]
    return A


def _overwrite_ref(x):
    a = np.sin(x) * 2.0
    return a * a + a


def _partial_overwrite(x, y):
    A = em.zeros([6], em.f32)
    A[:] = x * x
    A[2:5] = y[:3] * 3.0  # the gradient of x[2:5] is zero: overwritten
    return A * x


def _partial_overwrite_ref(x, y):
    A = x * x
    A[2:5] = y[:3] * 3.0
    return A * x


def _atomic(x, y, idx):
    H = em.zeros([5], em.f32)
    em.atomic_add(H[idx], x * y)     # repeated bins: the sums' gradients go to every contributor
    return H * H + H


def _atomic_ref(x, y, idx):
    H = np.zeros(5)
    np.add.at(H, idx, x * y)
    return H * H + H


def _atomic_kernel(x, y, idx):
    H = em.zeros([5], em.f32)
    with em.kernel(x.shape[0]) as i:
        em.atomic_add(H[idx[i]], em.sin(x[i]) * y[i])
    return H * H


def _atomic_kernel_ref(x, y, idx):
    H = np.zeros(5)
    np.add.at(H, idx, np.sin(x) * y)
    return H * H


def _atomic_in(r):
    return {"x": away(r, (9,), -2, 2), "y": away(r, (9,), -2, 2),
            "idx": np.array([0, 3, 3, 1, 0, 3, 4, 1, 3], np.int32)}


def _var_updates(x, y):
    v = em.var(x)
    v.val = v.val * y + 1.0
    v.val = em.sin(v.val)
    v.val += x * v.val
    return v.val * y


def _var_updates_ref(x, y):
    v = x * y + 1.0
    v = np.sin(v)
    v = v + x * v
    return v * y


def _overwrite_argument(a):
    i = _i(6)
    a[i] = em.sin(a[i]) * 2.0   # the argument itself, in place: x is its value on entry
    return a * a


def _overwrite_argument_ref(a):
    a = np.sin(a) * 2.0
    return a * a


def _nbody(X, V, dt):
    d = X[:, None, :] - X[None, :, :]
    r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-2
    F = em.sum(-d / (r2 * em.sqrt(r2)), axis=1)
    V2 = V + F * dt
    return X + V2 * dt, V2


def _nbody_ref(X, V, dt):
    d = X[:, None, :] - X[None, :, :]
    r2 = np.sum(d * d, axis=-1, keepdims=True) + 1e-2
    F = np.sum(-d / (r2 * np.sqrt(r2)), axis=1)
    V2 = V + F * dt
    return X + V2 * dt, V2


def _large(x, v, s):
    return em.sin(x * s) * v + x


def _large_in(r):
    # 51k elements: a full reduction runs as one loop per thread, and llvmpipe/lavapipe stop every
    # shader loop after 65535 iterations (BackendError), forward or backward.
    return {"x": away(r, (200, 257), 0.1, 1.0), "v": away(r, (257,), 0.5, 1.5), "s": 0.8}


def _argmax_gather(x):
    i = em.indices([3])[0]
    k = em.argmax(x, axis=1)
    return x[i, k] * 2.0 + x[i, (k + 1) % 4]


def _argmax_gather_ref(x):
    k = np.argmax(x, axis=1)
    i = np.arange(3)
    return x[i, k] * 2.0 + x[i, (k + 1) % 4]


def _scatter_bcast(v, idx):
    B = em.zeros([6, 4], em.f32)
    B[idx] = v          # v [4] broadcast into the rows idx: its gradient sums over them
    return B * B + B


def _scatter_bcast_ref(v, idx):
    B = np.zeros((6, 4))
    B[idx] = v
    return B * B + B


SCATTERS = [
    Case("scatter_broadcast_value", _scatter_bcast, _scatter_bcast_ref,
         lambda r: {"v": away(r, (4,), -2, 2), "idx": np.array([4, 1, 2], np.int32)}),
    Case("overwrite_argument_in_place", _overwrite_argument, _overwrite_argument_ref,
         lambda r: {"a": away(r, (6,), -2, 2)}),
    # The DESIGN section 5 N-body step (1 kernel fused): d(X', V')/d(X, V, dt).
    Case("nbody_step", _nbody, _nbody_ref,
         lambda r: {"X": away(r, (5, 3), -1, 1), "V": away(r, (5, 3), -0.5, 0.5), "dt": 0.01}),
    Case("scatter_into_zeros", _scatter, _scatter_ref, _scatter_in),
    Case("slice_scatter", _slice_scatter, _slice_scatter_ref, _xy((2, 3), (6,))),
    Case("in_place_overwrite", _overwrite, _overwrite_ref, _x((6,))),
    Case("partial_overwrite", _partial_overwrite, _partial_overwrite_ref, _xy((6,), (4,))),
    Case("atomic_add", _atomic, _atomic_ref, _atomic_in),
    Case("atomic_add_in_kernel", _atomic_kernel, _atomic_kernel_ref, _atomic_in),
    Case("var_updates", _var_updates, _var_updates_ref, _xy((3, 4), (3, 4))),
    # 51k elements: the gradients w.r.t. v and s are reductions over 200 rows / every element
    # (positive terms: f32 sums stay within ~1e-6 whatever their order).
    Case("large_broadcast_reductions", _large, lambda x, v, s: np.sin(x * s) * v + x, _large_in, wrt=["v", "s"]),
    Case("gather_at_argmax", _argmax_gather, _argmax_gather_ref, lambda r: {"x": distinct(r, (3, 4), 0.3)}),
]

CASES = UNARY + BINARY + OTHER_ELEMENTWISE + SHAPE + REDUCTIONS + SCATTERS


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grad(backend, case):
    args = case.make(np.random.default_rng(seed_of(case.name)))
    check_grad(backend, case.fn, case.ref, args, wrt=case.wrt, name=case.name)


# Cases whose fn builds no fixed-size value of its own (em.indices([8]), em.zeros([10])...).
SYMBOLIC = ["chain", "broadcast", "sum_axis", "softmax", "gather_repeated_indices", "matmul", "concat", "prefix_sum",
            "atomic_add", "nbody_step"]


@pytest.mark.parametrize("case", [c for c in CASES if c.name in SYMBOLIC], ids=SYMBOLIC)
def test_grad_symbolic_shapes(backend, case):
    """The same checks with every dimension > 1 symbolic (em.f32["D3", "D5"]): the gradients'
    shapes (zeros and broadcast reductions included) come from the call's shapes."""
    args = case.make(np.random.default_rng(seed_of(case.name)))
    check_grad(backend, case.fn, case.ref, args, wrt=case.wrt, name=case.name + "_symbolic", symbolic=True)


def test_grad_of_an_independent_value_symbolic_shape(backend):
    """Zeros of x's shape when x's shape is only known at call time (two calls, two shapes)."""
    @em.compile
    def f(x: em.f32["N", 3], y: em.f32["M"]):  # noqa: F821
        u = x * 2.0
        return em.grad(em.sum(em.sin(y)), [x, u])

    for n in (4, 7):
        gx, gu = run(f, np.ones((n, 3), np.float32), np.ones(5, np.float32))
        assert gx.shape == (n, 3) and gu.shape == (n, 3) and not gx.any() and not gu.any(), (gx, gu)


# ---- the API -----------------------------------------------------------------------------------
def _rng(name):
    return np.random.default_rng(seed_of(name))


def test_grad_wrt_intermediate_value(backend):
    """em.grad(L, u) for u = exp(x) computed inside the program: dL/du with x's path cut, i.e.
    w * cos(u) * y, not w * cos(u) * y * exp(x)."""
    r = _rng("intermediate")
    x, y, w = away(r, (3, 4), -1, 1), away(r, (3, 4), -2, 2), away(r, (3, 4), 0.5, 1.5)

    @em.compile
    def f(x: em.f32[3, 4], y: em.f32[3, 4], w: em.f32[3, 4]):
        u = em.exp(x)
        L = em.sum(w * em.sin(u) * y) + em.sum(u * 0.5)
        return em.grad(L, u), u

    g, u = run(f, x, y, w)
    u64 = np.exp(x.astype(np.float64))
    want = central_diff(lambda u: np.sum(w * np.sin(u) * y) + np.sum(u * 0.5), [u64], 0)
    assert_close(g, want, tolerance(backend), f"dL/du on {backend}")


def test_grad_wrt_var_is_the_value_at_its_start(backend):
    """em.grad(L, v) for a var: the gradient w.r.t. the var's value where it was made (u = 2x),
    through every later update of it."""
    r = _rng("var")
    x, y, w = away(r, (5,), -1, 1), away(r, (5,), -2, 2), away(r, (5,), 0.5, 1.5)

    @em.compile
    def f(x: em.f32[5], y: em.f32[5], w: em.f32[5]):
        v = em.var(x * 2.0)
        v.val = em.sin(v.val) * y
        v.val = v.val * v.val + x
        return em.grad(em.sum(w * v.val), v)

    (g,) = run(f, x, y, w)
    x64 = x.astype(np.float64)
    want = central_diff(lambda u: np.sum(w * ((np.sin(u) * y) ** 2 + x64)), [2 * x64], 0)
    assert_close(g, want, tolerance(backend), f"dL/dv on {backend}")


def test_grad_of_a_list_and_a_tuple_keeps_the_structure(backend):
    """A list of x gives a list, a tuple a tuple, one value one value; each entry its gradient,
    an unused argument (b) zeros of its shape, a scalar argument a scalar."""
    r = _rng("structure")
    a, b, w = away(r, (3, 4), -2, 2), away(r, (2, 5), -2, 2), away(r, (3, 4), 0.5, 1.5)
    s = 0.6

    @em.compile
    def f(a: em.f32[3, 4], b: em.f32[2, 5], s: em.f32, w: em.f32[3, 4]):
        L = em.sum(w * em.sin(a) * s)
        gl = em.grad(L, [a, b, s])
        gt = em.grad(L, (s, a))
        g1 = em.grad(L, a)
        gaa = em.grad(L, [a, a])
        assert type(gaa) is list and len(gaa) == 2, f"em.grad of [a, a] gave {gaa!r}"
        assert type(gl) is list and len(gl) == 3, f"em.grad of a list gave {gl!r}"
        assert type(gt) is tuple and len(gt) == 2, f"em.grad of a tuple gave {gt!r}"
        assert isinstance(g1, em.Value), f"em.grad of a value gave {g1!r}"
        return gl[0], gl[1], gl[2], gt[0], gt[1], g1, gaa[0], gaa[1]

    ga, gb, gs, gs2, ga2, ga3, gaa0, gaa1 = run(f, a, b, s, w)
    a64 = a.astype(np.float64)
    rt = tolerance(backend)
    assert_close(ga, w * np.cos(a64) * np.float32(s), rt, "list[0]")
    assert_close(ga2, ga, rt, "tuple[1]")
    assert_close(ga3, ga, rt, "single")
    assert_close(gaa0, ga, rt, "[a, a][0]")
    assert_close(gaa1, ga, rt, "[a, a][1] (the same x twice: each entry the whole gradient)")
    assert gb.shape == (2, 5) and np.all(gb == 0), f"gradient w.r.t. an unused argument: {gb}"
    assert_close(gs, np.sum(w * np.sin(a64)), rt, "list[2] (scalar)")
    assert_close(gs2, gs, rt, "tuple[0] (scalar)")


def test_grad_of_a_value_independent_of_x_is_zeros(backend):
    """y does not depend on x (nor on its shape's other arguments): zeros of x's shape, for an
    argument, a scalar argument and an intermediate value."""
    @em.compile
    def f(x: em.f32[4, 3], s: em.f32, y: em.f32[5]):
        u = x * 2.0
        L = em.sum(em.sin(y))
        return em.grad(L, [x, s, u]) + [em.grad(em.sum(u), y), em.grad(em.sum(y).detach() * 1.0, y)]

    r = _rng("independent")
    gx, gs, gu, gy, gd = run(f, away(r, (4, 3), -2, 2), 0.5, away(r, (5,), -2, 2))
    for g, shape in ((gx, (4, 3)), (gs, ()), (gu, (4, 3)), (gy, (5,)), (gd, (5,))):
        assert g.shape == shape and np.all(g == 0), f"expected zeros of shape {shape}, got {g!r}"


def test_grad_with_explicit_dy(backend):
    """em.grad(y, x, dy) is J^T dy: for y = sin(x) * x[::-1] (a vector), central differences of
    sum(dy * y); a dy of a broadcastable shape and a scalar dy on a scalar y too."""
    r = _rng("dy")
    x, d, e = away(r, (6,), -2, 2), away(r, (6,), -2, 2), away(r, (3, 6), -2, 2)

    @em.compile
    def f(x: em.f32[6], d: em.f32[6], e: em.f32[3, 6]):
        y = em.sin(x) * x[::-1]
        z = x[None, :] * e
        return em.grad(y, x, d), em.grad(z, x, e), em.grad(em.sum(y), x, 3.0), em.grad(y, x)

    g, gz, gs, g1 = run(f, x, d, e)
    x64 = x.astype(np.float64)
    yfn = lambda x: np.sin(x) * x[::-1]  # noqa: E731
    rt = tolerance(backend)
    assert_close(g, central_diff(lambda x: np.sum(d * yfn(x)), [x64], 0), rt, "J^T dy")
    assert_close(gz, np.sum(e.astype(np.float64) ** 2, axis=0), rt, "J^T dy of a broadcast product")
    assert_close(gs, 3.0 * central_diff(lambda x: np.sum(yfn(x)), [x64], 0), rt, "scalar dy = 3")
    assert_close(g1, central_diff(lambda x: np.sum(yfn(x)), [x64], 0), rt, "dy = None (ones)")


def test_grad_of_grad_hessian_vector_product(backend):
    """f(x) = sum(tanh(M x)): g = em.grad(f, x) = M^T (1 - t^2), em.grad(g, x, v) = H v with
    H = M^T diag(-2 t (1 - t^2)) M (NumPy, analytic), the same as em.jvp(g, x, v) (forward over
    reverse), and the mixed second derivative em.grad(g, M, v) against central differences of
    v . g(M)."""
    r = _rng("hvp")
    M, x, v = away(r, (4, 3), -1, 1), away(r, (3,), -1, 1), away(r, (3,), -1, 1)

    @em.compile
    def f(M: em.f32[4, 3], x: em.f32[3], v: em.f32[3]):
        L = em.sum(em.tanh(M @ x))
        g = em.grad(L, x)
        return (g, em.grad(g, x, v), em.grad(g, M, v), em.grad(em.grad(em.sum(x * x * x), x), x),
                em.jvp(g, x, v))

    g, hv, gm, d2, fwd_over_rev = run(f, M, x, v)
    M64, x64, v64 = M.astype(np.float64), x.astype(np.float64), v.astype(np.float64)
    t = np.tanh(M64 @ x64)
    rt = tolerance(backend)
    assert_close(g, M64.T @ (1 - t * t), rt, "grad")
    assert_close(hv, M64.T @ (-2 * t * (1 - t * t) * (M64 @ v64)), rt, "Hessian-vector product")
    vg = lambda M: v64 @ (M.T @ (1 - np.tanh(M @ x64) ** 2))  # noqa: E731
    assert_close(gm, central_diff(vg, [M64], 0), rt, "mixed second derivative d(v . grad_x f)/dM")
    assert_close(d2, 6 * x64, rt, "d2/dx2 sum(x^3) (ones)")
    assert_close(fwd_over_rev, M64.T @ (-2 * t * (1 - t * t) * (M64 @ v64)), rt,
                 "em.jvp of em.grad (forward over reverse)")


def test_jvp_against_central_differences(backend):
    """em.jvp(y, x, dx) = J dx: (ref(x + h dx) - ref(x - h dx)) / 2h, for an elementwise chain,
    a matmul with a reduction, and a scalar argument."""
    r = _rng("jvp")
    x, dx, A = away(r, (3, 4), -1.5, 1.5), away(r, (3, 4), -1, 1), away(r, (4, 2), -1, 1)
    s, ds = 0.8, -0.35

    @em.compile
    def f(x: em.f32[3, 4], dx: em.f32[3, 4], A: em.f32[4, 2], s: em.f32, ds: em.f32):
        y1 = em.exp(em.sin(x) * x) / (1.0 + x * x)
        y2 = em.sum(em.tanh(x @ A), axis=0)
        y3 = em.sin(s * x) * s
        return em.jvp(y1, x, dx), em.jvp(y2, x, dx), em.jvp(y3, s, ds), em.jvp(y2, A, A * 0.0 + 1.0)

    j1, j2, j3, j4 = run(f, x, dx, A, s, ds)
    x64, dx64, A64 = x.astype(np.float64), dx.astype(np.float64), A.astype(np.float64)
    s64, ds64 = float(np.float32(s)), float(np.float32(ds))
    h = 1e-6

    def dirdiff(fn, p, d):
        return (fn(p + h * d) - fn(p - h * d)) / (2 * h)
    rt = tolerance(backend)
    assert_close(j1, dirdiff(lambda x: np.exp(np.sin(x) * x) / (1 + x * x), x64, dx64), rt, "jvp elementwise")
    assert_close(j2, dirdiff(lambda x: np.sum(np.tanh(x @ A64), axis=0), x64, dx64), rt, "jvp matmul + sum")
    assert_close(j3, dirdiff(lambda s: np.sin(s * x64) * s, s64, ds64), rt, "jvp w.r.t. a scalar")
    assert_close(j4, dirdiff(lambda A: np.sum(np.tanh(x64 @ A), axis=0), A64, np.ones_like(A64)), rt,
                 "jvp w.r.t. A")


def test_detach_stops_gradients(backend):
    """d/dx (x * x.detach()) = x.detach() = x (not 2x); d/dx (sg(sin x) * sin x + x) = sin x cos x + 1;
    a detached value used alone gives zeros."""
    r = _rng("detach")
    x = away(r, (7,), -2, 2)

    @em.compile
    def f(x: em.f32[7]):
        y = em.sin(x)
        return (em.grad(em.sum(x * x.detach()), x), em.grad(em.sum(y.detach() * y + x), x),
                em.grad(em.sum(em.exp(x).detach()), x), x.detach() * 2.0)

    g1, g2, g3, fwd = run(f, x)
    x64 = x.astype(np.float64)
    rt = tolerance(backend)
    assert_close(g1, x64, rt, "x * x.detach()")
    assert_close(g2, np.sin(x64) * np.cos(x64) + 1, rt, "sg(sin x) * sin x + x")
    assert np.all(g3 == 0), f"gradient of a detached value: {g3}"
    assert_close(fwd, 2 * x64, rt, "detach leaves the value as it is")


# ---- user errors ------------------------------------------------------------------------------
def _line():
    """The caller's line + 1: the line of the em.grad call that follows."""
    return sys._getframe(1).f_lineno + 1


def _raises_at(f, args, where, key, *words):
    """f(*args) raises em.TypeError naming the test file's line where[key] (recorded while
    tracing) and each of `words` (a tuple: any one of its alternatives, case-insensitive)."""
    with pytest.raises(em.TypeError) as ei:
        f(*args)
    msg = str(ei.value)
    line = where[key]
    assert f"test_grad_ops.py:{line}" in msg, f"the message does not name the user's line {line}: {msg}"
    for w in words:
        alts = w if isinstance(w, tuple) else (w,)
        assert any(a.lower() in msg.lower() for a in alts), f"the message does not name {' or '.join(alts)}: {msg}"
    return msg


def test_grad_of_an_integer_or_bool_value_is_a_type_error():
    """em.grad(y, x) with y i32 (or bool): em.TypeError naming y (dtype and shape), x, and the line."""
    where = {}

    @em.compile
    def f(x: em.f32[3], k: em.i32[3]):
        y = em.sum(k * 2)
        where["f"] = _line()
        return em.grad(y, x)

    @em.compile
    def g(x: em.f32[3]):
        c = x > 0.0
        where["g"] = _line()
        return em.grad(c, x)

    x, k = np.ones(3, np.float32), np.arange(3, dtype=np.int32)
    _raises_at(f, (x, k), where, "f", "i32[]", "f32[3]")    # y (i32[]) and x (f32[3])
    _raises_at(g, (x,), where, "g", "bool[3]", "f32[3]")


def test_grad_with_respect_to_an_integer_value_is_a_type_error():
    """em.grad(y, k) with k an i32 (or bool) argument, alone or in a list: em.TypeError naming k and
    y (dtype and shape) and the line."""
    where = {}

    @em.compile
    def f(x: em.f32[3], k: em.i32[3], n: em.i32):
        y = em.sum(x * em.f32(k))
        where["f"] = _line()
        return em.grad(y, k)

    @em.compile
    def g(x: em.f32[3], k: em.i32[3], n: em.i32):
        y = em.sum(x * em.f32(n))
        where["g"] = _line()
        return em.grad(y, [x, n])

    @em.compile
    def h(x: em.f32[3], k: em.i32[3], n: em.i32, m: em.bool[3]):
        y = em.sum(em.where(m, x, 0.0))
        where["h"] = _line()
        return em.grad(y, m)

    args = (np.ones(3, np.float32), np.arange(3, dtype=np.int32), 2)
    _raises_at(f, args, where, "f", "i32[3]", "f32[]")     # x (i32[3]) and y (f32[])
    _raises_at(g, args, where, "g", "i32[]", "f32[]")
    _raises_at(h, args + (np.array([True, False, True]),), where, "h", "bool[3]", "f32[]")


def test_grad_with_respect_to_a_python_number_or_numpy_array_is_a_type_error():
    """x must be a traced value: a Python float or a NumPy array is an em.TypeError naming what
    it got and the line."""
    where = {}

    @em.compile
    def f(x: em.f32[3]):
        y = em.sum(x * 1.5)
        where["f"] = _line()
        return em.grad(y, 1.5)

    @em.compile
    def g(x: em.f32[3]):
        y = em.sum(x * 1.5)
        where["g"] = _line()
        return em.grad(y, np.ones(3, np.float32))

    x = np.ones(3, np.float32)
    _raises_at(f, (x,), where, "f", "float")
    _raises_at(g, (x,), where, "g", ("ndarray", "numpy"))


def test_full_reduction_of_a_broadcast_scalar(backend):
    """Gradient fuzzer G9: em.mean / em.sum over all of em.broadcast_to(s, shape) gave the
    gradient of one element (the uniform adjoint reached the scalar once, not once per element)."""
    @em.compile
    def f(a: em.f32, w: em.f32, s: em.f32):
        return (em.grad(em.mean(em.broadcast_to(a, (2,))), a),
                em.grad(em.sum(w * em.sum(em.broadcast_to(s, (3,)))), s))
    g1, g2 = run(f, np.float32(1), np.float32(2), np.float32(3))
    assert float(g1) == 1.0 and float(g2) == 6.0
