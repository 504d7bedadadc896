"""Indexing with an explicit out-of-range policy: em.gather and em.scatter.

`A[i, j]` and `A[i, j] = v` clamp out-of-range coordinates into the tensor (mode "clamp"). These
two functions take the same index expressions (ints, slices, None, ..., integer traced values)
and a `mode`, as numpy.take / numpy.put do::

    "clamp" (or NumPy's name "clip")  each coordinate is brought into [0, dim - 1] (the default)
    "wrap"                            each coordinate is taken modulo dim (-1 is the last element)
    "unsafe"                          no check: the caller promises every coordinate is in range;
                                      an out-of-range access is undefined behaviour

The mode applies to every indexed axis. A gather made with a mode can also be the target of an
atomic: `em.atomic_add(em.gather(H, k, mode="wrap"), 1)`.
"""
from . import _ember as _C
from . import _tracing as T
from ._value import Value, _index_items

_MODES = {"clamp": _C.IndexMode.clamp, "clip": _C.IndexMode.clamp, "wrap": _C.IndexMode.wrap,
          "unsafe": _C.IndexMode.unsafe}


def _mode(mode, what):
    if isinstance(mode, str) and mode in _MODES:
        return _MODES[mode]
    raise T.error(_C.TypeError, f"{what}: unknown index mode {mode!r}; expected one of "
                                "'clamp', 'clip' (the same as 'clamp'), 'wrap', 'unsafe'")


def _target(x, what):
    if not isinstance(x, Value):
        raise T.error(_C.TypeError, f"{what} needs a traced tensor (an argument or a value computed from one), "
                                    f"got {type(x).__name__}")
    return x


def gather(x, index, mode="clamp"):
    """gather(x, index, mode="clamp") -> em.Value

    ``x[index]`` with an explicit out-of-range policy: mode "clamp" (the default of ``x[i]``; "clip"
    is a synonym), "wrap" (modulo the dimension: -1 is the last element) or "unsafe" (no check; the
    caller promises every coordinate is in range). `index` is what goes between the brackets: one
    item or a tuple (ints, slices, None, ..., integer traced values).

    >>> @em.compile
    ... def shift(x: em.f32["N"]):
    ...     (i,) = em.indices(x.shape)
    ...     return em.gather(x, i + 2, mode="wrap")
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.array_equal(shift(x).numpy(), np.roll(x, -2)))
    True
    """
    tr = T.tracer("em.gather")
    m = _mode(mode, "em.gather")
    x = _target(x, "em.gather")
    return Value(tr.gather(x.node, _index_items(tr, x, index), m))


def scatter(x, index, value, mode="clamp"):
    """scatter(x, index, value, mode="clamp") -> None

    ``x[index] = value`` with an out-of-range policy (see em.gather); x is an argument or a tensor
    made by em.zeros/em.buffer. With "clamp", writes past an edge land on the edge element; with
    "wrap" they wrap around.

    >>> @em.compile
    ... def rotate(x: em.f32["N"]):
    ...     out = em.zeros(x.shape)
    ...     (i,) = em.indices(x.shape)
    ...     em.scatter(out, i + 1, x, mode="wrap")
    ...     return out
    >>> x = np.random.default_rng(0).normal(size=5).astype(np.float32)
    >>> bool(np.array_equal(rotate(x).numpy(), np.roll(x, 1)))
    True
    """
    tr = T.tracer("em.scatter")
    m = _mode(mode, "em.scatter")
    x = _target(x, "em.scatter")
    tr.scatter(x.node, _index_items(tr, x, index), T.node_of(tr, value, x.node.dtype), m)
