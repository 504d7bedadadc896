"""`model(x)` outside a traced function: a compiled program calling the module's forward with
the module as argument, made once per (class, structure, input dtypes and shapes) and reused."""
import numpy as np

from .. import _dtypes as D
from .. import _ember as _C
from .._objargs import Context
from .._tensor import Tensor
from .module import Parameter

_PROGRAMS = {}  # (class, structure, input signature) -> Program


def _forward_fn(cls, sig):
    """def forward(module: cls, x0: em.f32[...], ...): return module(x0, ...)."""
    names = [f"x{i}" for i in range(len(sig))]
    ns = {"__name__": __name__}
    exec(f"def forward(module, {', '.join(names)}):\n    return module({', '.join(names)})\n", ns)
    fn = ns["forward"]
    fn.__qualname__ = f"{cls.__qualname__}.forward"
    fn.__annotations__ = {"module": cls, **{n: D.TensorType(D.from_name(d), s) for n, (d, s) in zip(names, sig)}}
    return fn


def eager_call(module, args, kwargs):
    """Runs module.forward(*args) (em.Tensor / NumPy inputs) as a compiled program; em.Tensor out."""
    from .._program import Program
    cls = type(module)
    if kwargs:
        raise _C.TypeError(f"{cls.__name__}(...) outside a compiled function takes tensors as positional "
                           f"arguments only, got keywords {sorted(kwargs)}")
    sig, xs = [], []
    for i, a in enumerate(args):
        if isinstance(a, Parameter):
            a = a.data
        if isinstance(a, Tensor):
            dt = a._dtype_name
        elif isinstance(a, np.ndarray) and a.dtype in D._BY_NP:
            dt = D._BY_NP[a.dtype].name
        else:
            raise _C.TypeError(f"{cls.__name__}(...) outside a compiled function: argument {i} is a "
                               f"{type(a).__name__}{' of dtype ' + str(a.dtype) if isinstance(a, np.ndarray) else ''}"
                               "; pass em.Tensor or NumPy arrays of float32, int32, uint32 or bool")
        sig.append((dt, tuple(int(s) for s in a.shape)))
        xs.append(a)
    structure = module._em_describe("module", Context())[0]
    key = (cls, structure, tuple(sig))
    prog = _PROGRAMS.get(key)
    if prog is None:
        prog = _PROGRAMS[key] = Program(_forward_fn(cls, sig), name=f"{cls.__name__}_forward")
    return prog(module, *xs)
