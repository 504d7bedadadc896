"""A kernel heavy in transcendental functions (issue 39): per element of N, twelve calls of sin,
cos, tan, exp, exp2, log, log2, sinh, cosh, tanh, atan and pow on arguments in their usual
ranges (|x| <= 8), summed. `ember` prints Ember's float-only functions on the GPU backends
(codegen/shader_math.h), `ember_fast` the shading language's builtins (em.compile(fast_math=True):
what Ember printed before); on cpu both are the CPU's functions. The reference is NumPy in float64.
(No `from __future__ import annotations` here: em.compile must see real annotation objects.)
"""
import numpy as np

from common import import_ember

NAME = "transcendentals"
DEFAULT_N = 1 << 20


def make_inputs(n, seed=0):
    """x uniform in [-8, 8] (float32)."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(-8.0, 8.0, n).astype(np.float32),)


def _formula(m, x):
    """The same sum in Ember or NumPy (m: the module with sin, cos, ...; NumPy's names differ)."""
    a = m.abs(x) + 0.5
    return (m.sin(x) + m.cos(2.0 * x) + 0.01 * m.tan(0.1 * x) + m.exp(-0.5 * x) + m.exp2(0.25 * x)
            + m.log(a) + m.log2(a) + 0.01 * m.sinh(x) + 0.01 * m.cosh(x) + m.tanh(x) + m.atan(x)
            + m.pow(a, 0.75))


class _Np:
    sin, cos, tan, exp, exp2, log, log2 = np.sin, np.cos, np.tan, np.exp, np.exp2, np.log, np.log2
    sinh, cosh, tanh, atan, pow, abs = np.sinh, np.cosh, np.tanh, np.arctan, np.power, np.abs


def reference(inputs):
    """The sum in float64, rounded to float32."""
    (x,) = inputs
    return (_formula(_Np, x.astype(np.float64)).astype(np.float32),)


def _setup(fast):
    def setup(inputs, opts):
        em = import_ember()
        em.init(backend=opts.get("backend", "cpu"))

        def f(x: em.f32["N"]):  # noqa: F821
            return _formula(em, x)
        kw = {"fast_math": True} if fast else {}  # (an Ember from before the switch takes `ember`)
        prog = em.compile(f, name="transcendentals", **kw)
        (x,) = inputs
        xt = em.tensor(x)  # on the device: the timing is the kernel's, not the upload's
        return lambda: (prog(xt).numpy(),)
    setup.__doc__ = "Ember, " + ("the builtins (fast_math=True)" if fast else "Ember's float-only math") + "."
    return setup


def setup_numpy(inputs, opts):
    """NumPy in float32."""
    (x,) = inputs
    return lambda: (_formula(_Np, x),)


IMPLS = {
    "ember": _setup(False),
    "ember_fast": _setup(True),
    "numpy": setup_numpy,
}
