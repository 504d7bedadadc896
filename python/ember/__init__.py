"""Ember: a graphics-oriented tensor compiler. Write NumPy-like tensor code with shader-like
control flow in a function annotated with em.f32["N", 3]-style types, compile it with
@em.compile, and call it with NumPy arrays or em.Tensor.

    import ember as em

    @em.compile
    def step(X: em.f32["N", 3], V: em.f32["N", 3], dt: em.f32):
        return X + V * dt

See DESIGN.md section 5 for the whole API.
"""
from . import _ember
from . import _log  # noqa: F401  (the `ember` logger; EMBER_LOG)
# Names left out of __all__ (they shadow built-ins) are still em.<name>; hence the noqa marks.
from ._ember import BackendError, CompileError, Error, InternalError, ShapeError, TypeError  # noqa: F401
from ._dtypes import DType, TensorType, bool, f32, i32, u32  # noqa: F401
from ._tensor import Tensor, tensor
from ._value import Value, Var
from ._ops import (  # noqa: F401
    abs, acos, all, any, asin, atan, atan2, bitcast, broadcast_to, cast, ceil, clamp, cos, cosh, exp, exp2, floor,
    fma, frac, indices, isinf, isnan, lerp, log, log2, max, mean, min, pow, prod, round, rsqrt, sign, sin, sinh,
    smoothstep, sqrt, squeeze, step, sum, tan, tanh, transpose, trunc, unsqueeze, where)
from ._ops import concat, flip, repeat, reshape, stack  # noqa: F401
from ._ops import argmax, argmin, dot, matmul, norm, prefix_sum  # noqa: F401
from ._control import (atomic_add, atomic_and, atomic_exchange, atomic_max, atomic_min, atomic_or, atomic_xor,
                       break_, buffer, continue_, else_, if_, kernel, loop, var, zeros)
from ._control import barrier, group_buffer, group_index, local_index
from ._indexing import gather, scatter
from ._autodiff import grad, jvp
from ._program import Program, backend, compile, device_info, init
from . import _schedule as schedule  # noqa: F401  (em.schedule.interchange/tile/parallelize/fuse)
from . import _random as random  # noqa: F401  (em.random; not in __all__: the stdlib has a random)
from ._window import Window, WindowError
from ._dlpack import from_dlpack  # (and em.Tensor.__dlpack__ / view_numpy: zero-copy views for NumPy, PyTorch, mpi4py)
from ._display import to_png  # (and em.Tensor._repr_png_ / _repr_html_ for Jupyter)
from . import ui  # noqa: F401  (em.ui: immediate-mode widgets of the open window frame)
from . import data, nn, optim  # noqa: F401  (em.data minibatches on the device, em.nn modules, em.optim)
from .nn.module import load, save
from .export import export  # noqa: E402  (em.export(prog, out_dir, target); the package is ember.export)

__version__ = getattr(_ember, "__version__", "0.0.0")

# `from ember import *` leaves out the names that would shadow Python built-ins (abs, all, any,
# bool, max, min, pow, round, sum, TypeError); use them as em.max etc.
__all__ = [
    "BackendError", "CompileError", "Error", "InternalError", "ShapeError", "WindowError", "Window", "ui",
    "DType", "TensorType", "f32", "i32", "u32", "Tensor", "tensor", "from_dlpack", "Value", "Var",
    "acos", "asin", "atan", "atan2", "bitcast", "broadcast_to", "cast", "ceil", "clamp",
    "cos", "cosh", "exp", "exp2", "floor", "fma", "frac", "indices", "isinf", "isnan", "lerp", "log", "log2",
    "mean", "prod", "rsqrt", "sign", "sin", "sinh", "smoothstep", "sqrt",
    "squeeze", "step", "tan", "tanh", "transpose", "trunc", "unsqueeze", "where",
    "concat", "flip", "repeat", "reshape", "stack",
    "argmax", "argmin", "dot", "matmul", "norm", "prefix_sum",
    "atomic_add", "atomic_and", "atomic_exchange", "atomic_max", "atomic_min", "atomic_or", "atomic_xor",
    "break_", "buffer", "continue_", "else_", "if_", "kernel", "loop", "var", "zeros",
    "barrier", "group_buffer", "group_index", "local_index",
    "gather", "scatter", "grad", "jvp",
    "Program", "backend", "compile", "device_info", "init", "schedule", "data", "nn", "optim", "save", "load", "export",
    "to_png",
]
