"""Trace state, source locations and conversions of Python values into IR nodes.

While a function compiled with @em.compile is traced, a Tracer is current for the thread; every
traced op first stamps the first stack frame outside the ember package as the source location,
so user errors name the user's file and line.
"""
import os
import sys
import threading

import numpy as np

from . import _ember as _C
from . import _dtypes as D

_PKG_DIR = os.path.dirname(__file__) + os.sep
_local = threading.local()


def _stack():
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def push(tracer):
    """Makes `tracer` the current one for this thread (a trace begins)."""
    _stack().append(tracer)


def pop():
    """Ends the innermost trace of this thread."""
    _stack().pop()


def active():
    """The current tracer, or None outside a traced function."""
    s = _stack()
    return s[-1] if s else None


def user_frame():
    """The innermost stack frame whose code is not in the ember package (the user's line)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back
    return f


def where():
    """' (at file:line)' for the user's current line, as C++ errors append it."""
    f = user_frame()
    return f" (at {f.f_code.co_filename}:{f.f_lineno})" if f is not None else ""


def error(cls, msg):
    """A user error of class `cls` whose message ends with the user's file and line."""
    return cls(msg + where())


def tracer(what="this function"):
    """The current tracer with its source location set to the user's line; raises outside a trace."""
    s = _stack()
    if not s:
        raise error(_C.Error, f"{what} can only be used inside a function compiled with @em.compile")
    tr = s[-1]
    f = user_frame()
    if f is not None:
        tr.set_loc(f.f_code.co_filename, f.f_lineno)
    return tr


_INT_TYPES = (int, np.integer)
_FLOAT_TYPES = (float, np.floating)
_BOOL_TYPES = (bool, np.bool_)


def is_scalar(x):
    """Whether `x` is a Python (or NumPy) number that becomes a constant in a trace."""
    return isinstance(x, _BOOL_TYPES + _INT_TYPES + _FLOAT_TYPES)


def _int_const(tr, x, dtype):
    x = int(x)
    if dtype == "u32" and 0 <= x < 2 ** 32:
        return tr.constant(float(x), D.u32._c)
    if not -2 ** 31 <= x < 2 ** 31:
        raise error(_C.TypeError, f"integer constant {x} does not fit in 32 bits")
    return tr.constant(float(x), D.f32._c if dtype == "f32" else D.i32._c)


def const(tr, x, like=None):
    """A constant node for Python number `x`. With `like` (a dtype name) the number is weakly typed
    as in NumPy: an int takes the other operand's dtype (i32 for bool), a float makes f32."""
    if isinstance(x, _BOOL_TYPES):
        return tr.constant(1.0 if x else 0.0, D.bool._c)
    if isinstance(x, _INT_TYPES):
        return _int_const(tr, x, like if like in ("f32", "u32") else "i32")
    if isinstance(x, _FLOAT_TYPES):
        return tr.constant(float(x), D.f32._c)
    if isinstance(x, (np.ndarray, _C.Tensor)):
        raise error(_C.TypeError, "a NumPy array or em.Tensor cannot be captured by a traced function; "
                                  "pass it as an argument")
    raise error(_C.TypeError, f"cannot use a value of type {type(x).__name__} in a traced expression")


class Traced:
    """A handle to an IR node of the current trace. em.Value (_value.py) subclasses it with the
    operators; the conversions below recognize traced values by this class, so this module does
    not depend on _value (which depends on it)."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node


def node_of(tr, x, like=None):
    """The node of a Value, or a constant for a Python number (weakly typed against `like`)."""
    if isinstance(x, Traced):
        return x.node
    return const(tr, x, like)


def nodes(tr, *xs):
    """Nodes for several operands: Python numbers are typed after the strongest Value among them."""
    like = None
    for x in xs:
        if isinstance(x, Traced):
            like = x.node.dtype if like is None else D.promote(like, x.node.dtype)
    return [node_of(tr, x, like) for x in xs]


def shape_nodes(tr, shape):
    """Dimension nodes for a shape: an int, a scalar integer Value, or a tuple/list of them."""
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    out = []
    for d in shape:
        if isinstance(d, Traced):
            n = d.node
            if n.rank != 0:
                raise error(_C.ShapeError, f"a dimension must be a scalar, got a value of shape {d.shape}")
            if n.dtype == "f32" or n.dtype == "bool":
                raise error(_C.TypeError, f"a dimension must be an integer, got {n.dtype}")
            out.append(n if n.dtype == "i32" else tr.cast(n, D.i32._c))
        elif isinstance(d, _INT_TYPES) and not isinstance(d, _BOOL_TYPES):
            out.append(tr.dim_const(int(d)))
        else:
            raise error(_C.TypeError, f"a dimension must be an int or a scalar integer value, got {d!r}")
    return out
