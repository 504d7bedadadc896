"""Control flow and memory inside a traced function: em.loop, em.if_/else_, em.break_/continue_,
em.var, em.kernel (with workgroups: em.group_buffer, em.barrier, em.local_index, em.group_index),
atomics and in-program allocation (em.zeros, em.buffer)."""
from . import _ember as _C
from . import _dtypes as D
from . import _tracing as T
from ._value import Value, Var

AK = _C.AtomicKind


class _Scope:
    """A `with` block that opens an IR scope on entry and closes it on a normal exit."""

    __slots__ = ("_open", "_tr")

    def __init__(self, open_fn):
        self._open = open_fn
        self._tr = None

    def __enter__(self):
        self._tr = T.tracer()
        return self._open(self._tr)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:  # after an error the whole trace is abandoned
            self._tr.end_scope()
        return False


def _int_node(tr, x, what):
    if isinstance(x, Value):
        return x.node
    if isinstance(x, T._BOOL_TYPES) or not isinstance(x, T._INT_TYPES):
        raise T.error(_C.TypeError, f"{what} must be an int or an integer traced value, got {x!r}")
    return T.const(tr, x)


def loop(*args):
    """loop(stop) / loop(start, stop, step=1) -> context manager yielding an i32 em.Value

    ``with em.loop(n) as k:`` runs the block for k in range(n), and ``em.loop(a, b)`` /
    ``em.loop(a, b, s)`` as range(a, b, s). The bounds are ints or integer traced values (so one
    compiled program serves any count); k is an i32 value. Inside the block, em.var values carry
    state from one iteration to the next; ``em.break_`` and ``em.continue_`` work as in Python.

    >>> @em.compile
    ... def powers(x: em.f32["N"], n: em.i32):
    ...     acc = em.var(x)
    ...     with em.loop(1, n):
    ...         acc.val = acc * x
    ...     return acc.val
    >>> x = np.random.default_rng(0).uniform(0.5, 1.5, 4).astype(np.float32)
    >>> bool(np.allclose(powers(x, 5).numpy(), x ** 5, rtol=1e-5))
    True
    """
    if not 1 <= len(args) <= 3:
        raise T.error(_C.TypeError, f"em.loop takes 1 to 3 arguments (like range), got {len(args)}")
    if len(args) == 1:
        args = (0, args[0], 1)
    elif len(args) == 2:
        args = (args[0], args[1], 1)

    def open_(tr):
        b, e, s = (_int_node(tr, a, "a loop bound") for a in args)
        return Value(tr.begin_loop(b, e, s))
    return _Scope(open_)


def if_(cond):
    """if_(cond) -> context manager

    ``with em.if_(c):`` runs the block only where c is true: per element when c is a tensor (the
    block's assignments to em.var values and scatters happen there only), as a branch when c is a
    scalar. An ``with em.else_():`` block may follow directly.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     y = em.var(x)
    ...     with em.if_(x < 0):
    ...         y.val = -2.0 * x
    ...     return y.val
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), np.where(x < 0, -2 * x, x)))
    True
    """
    def open_(tr):
        tr.begin_if(T.node_of(tr, cond))
    return _Scope(open_)


def else_():
    """else_() -> context manager

    ``with em.else_():`` directly after an ``em.if_`` block runs where its condition was false.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     y = em.var(x)
    ...     with em.if_(x > 0):
    ...         y.val = em.sqrt(x)
    ...     with em.else_():
    ...         y.val = x * x
    ...     return y.val
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), np.where(x > 0, np.sqrt(np.abs(x)), x * x), rtol=1e-6))
    True
    """
    return _Scope(lambda tr: tr.begin_else())


def break_():
    """break_() -> None

    Leaves the innermost em.loop (for the current element, inside a kernel or an elementwise loop),
    like Python's ``break``; usually under an ``em.if_``.

    >>> @em.compile
    ... def first_above(x: em.f32["N"], t: em.f32):
    ...     found = em.var(-1)
    ...     with em.loop(x.shape[0]) as k:
    ...         with em.if_(x[k] > t):
    ...             found.val = k
    ...             em.break_()
    ...     return found.val
    >>> x = np.random.default_rng(0).normal(size=8).astype(np.float32)
    >>> first_above(x, 0.5).item() == int(np.argmax(x > 0.5))
    True
    """
    T.tracer("em.break_").break_()


def continue_():
    """continue_() -> None

    Skips the rest of the block to the next iteration of the innermost em.loop, like Python's
    ``continue``.

    >>> @em.compile
    ... def sum_positive(x: em.f32["N"]):
    ...     s = em.var(0.0)
    ...     with em.loop(x.shape[0]) as k:
    ...         with em.if_(x[k] < 0):
    ...             em.continue_()
    ...         s.val = s + x[k]
    ...     return s.val
    >>> x = np.random.default_rng(0).normal(size=8).astype(np.float32)
    >>> bool(np.isclose(sum_positive(x).item(), x[x > 0].sum(), atol=1e-5))
    True
    """
    T.tracer("em.continue_").continue_()


def var(init, dtype=None):
    """var(init, dtype=None) -> em.Var

    A mutable traced value initialized to `init` (a number or a value; its shape is init's): read
    ``v.val`` (or use v directly in expressions), assign ``v.val = x`` / ``v.val += x``. It is how
    state crosses em.loop iterations and ``em.if_`` blocks. A Python int gives i32, a float f32, unless
    `dtype` is given.

    >>> @em.compile
    ... def collatz_steps(n: em.i32["N"]):
    ...     out = em.zeros(n.shape, em.i32)
    ...     with em.kernel(n.shape) as (i,):
    ...         x, steps = em.var(n[i]), em.var(0)
    ...         with em.loop(1000):
    ...             with em.if_(x == 1):
    ...                 em.break_()
    ...             x.val = em.where(x % 2 == 0, x // 2, 3 * x + 1)
    ...             steps.val += 1
    ...         out[i] = steps.val
    ...     return out
    >>> collatz_steps(np.array([1, 6, 7, 27], np.int32)).numpy().tolist()
    [0, 8, 16, 111]
    """
    tr = T.tracer("em.var")
    if isinstance(init, Value):
        n = init.node
        if dtype is not None and D.as_dtype(dtype).name != n.dtype:
            n = tr.cast(n, D.as_dtype(dtype)._c)
    elif dtype is not None:
        from ._ops import cast
        n = cast(init, dtype).node
    else:
        n = T.const(tr, init)
    return Var(tr.var(n))


def kernel(shape, group=None):
    """kernel(shape, group=None) -> context manager yielding the index value(s)

    ``with em.kernel((H, W)) as (i, j):`` runs the block once per index of `shape`, in parallel (an
    explicit kernel, like a compute shader); with a single int or value as shape it yields one
    index. Write results with ``A[i, j] = v`` into arguments or em.zeros/em.buffer tensors.
    ``group=(16, 16)`` (ints, one per axis; an int for 1-D) splits it into workgroups that share
    em.group_buffer memory and meet at em.barrier(); threads of the last groups that fall outside
    `shape` only join the barriers.

    >>> @em.compile
    ... def blur(x: em.f32["N"]):
    ...     out = em.zeros(x.shape)
    ...     with em.kernel(x.shape) as (i,):
    ...         out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0   # indices clamp at the edges
    ...     return out
    >>> x = np.random.default_rng(0).normal(size=6).astype(np.float32)
    >>> p = np.pad(x, 1, mode="edge")
    >>> bool(np.allclose(blur(x).numpy(), (p[:-2] + p[1:-1] + p[2:]) / 3, atol=1e-6))
    True
    """
    def open_(tr):
        idx = [Value(n) for n in tr.begin_kernel(T.shape_nodes(tr, shape), _group_shape(group))]
        return tuple(idx) if isinstance(shape, (tuple, list)) else idx[0]
    return _Scope(open_)


def _group_shape(group):
    if group is None:
        return []
    dims = group if isinstance(group, (tuple, list)) else (group,)
    for d in dims:
        if isinstance(d, T._BOOL_TYPES) or not isinstance(d, T._INT_TYPES):
            raise T.error(_C.TypeError, f"a workgroup dimension must be a Python int, got {d!r}")
    return [int(d) for d in dims]


def _group_tracer(what):
    if T.active() is None:
        raise T.error(_C.CompileError, f"{what} outside an em.kernel: it can only be used in a kernel with a group "
                                       "inside a function compiled with @em.compile")
    return T.tracer(what)


def group_buffer(shape, dtype=D.f32):
    """group_buffer(shape, dtype=em.f32) -> em.Value

    Memory shared by the threads of one workgroup of an ``em.kernel(..., group=...)`` (CUDA
    ``__shared__``, GLSL ``shared``); each group has its own. `shape` is an int or a tuple of ints;
    use it one element at a time (``buf[i]``, ``buf[i] = v``), with em.barrier() between writes and
    reads of other threads.

    >>> @em.compile
    ... def reverse_blocks(x: em.f32["N"]):
    ...     out = em.zeros(x.shape)
    ...     with em.kernel(x.shape, group=4) as i:
    ...         buf = em.group_buffer(4)
    ...         t = em.local_index()
    ...         buf[t] = x[i]
    ...         em.barrier()
    ...         out[i] = buf[3 - t]
    ...     return out
    >>> x = np.arange(8, dtype=np.float32)
    >>> reverse_blocks(x).numpy().tolist()
    [3.0, 2.0, 1.0, 0.0, 7.0, 6.0, 5.0, 4.0]
    """
    tr = _group_tracer("em.group_buffer()")
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    for d in dims:
        if isinstance(d, T._BOOL_TYPES) or not isinstance(d, T._INT_TYPES):
            raise T.error(_C.TypeError, f"a group buffer dimension must be a Python int, got {d!r}")
    return Value(tr.group_buffer([int(d) for d in dims], D.as_dtype(dtype)._c))


def barrier():
    """barrier() -> None

    Waits until every thread of the workgroup gets here (CUDA ``__syncthreads``, GLSL
    ``barrier()``): em.group_buffer writes before it are seen by the whole group after it. Not
    allowed under per-thread ``em.if_`` / em.loop (every thread must reach it).

    >>> @em.compile
    ... def block_sums(x: em.f32[8]):
    ...     out = em.zeros((8,))
    ...     with em.kernel(8, group=4) as i:
    ...         buf = em.group_buffer(4)
    ...         t = em.local_index()
    ...         buf[t] = x[i]
    ...         em.barrier()
    ...         out[i] = buf[0] + buf[1] + buf[2] + buf[3]
    ...     return out
    >>> x = np.random.default_rng(0).normal(size=8).astype(np.float32)
    >>> bool(np.allclose(block_sums(x).numpy(), np.repeat(x.reshape(2, 4).sum(1), 4), atol=1e-6))
    True
    """
    _group_tracer("em.barrier()").barrier()


def local_index():
    """local_index() -> em.Value or tuple of em.Value

    The thread's coordinate within its workgroup (CUDA threadIdx, GLSL gl_LocalInvocationID): an i32
    value for a 1-D kernel, else a tuple. The kernel index is group_index() * group + local_index().

    >>> @em.compile
    ... def f(x: em.i32[6]):
    ...     out = em.zeros((6,), em.i32)
    ...     with em.kernel(6, group=3) as i:
    ...         out[i] = em.local_index()
    ...     return out
    >>> f(np.zeros(6, np.int32)).numpy().tolist()
    [0, 1, 2, 0, 1, 2]
    """
    idx = [Value(n) for n in _group_tracer("em.local_index()").local_index()]
    return idx[0] if len(idx) == 1 else tuple(idx)


def group_index():
    """group_index() -> em.Value or tuple of em.Value

    The coordinate of the thread's workgroup (CUDA blockIdx, GLSL gl_WorkGroupID): an i32 value for
    a 1-D kernel, else a tuple; the same on every thread of the group.

    >>> @em.compile
    ... def f(x: em.i32[6]):
    ...     out = em.zeros((6,), em.i32)
    ...     with em.kernel(6, group=2) as i:
    ...         out[i] = em.group_index()
    ...     return out
    >>> f(np.zeros(6, np.int32)).numpy().tolist()
    [0, 0, 1, 1, 2, 2]
    """
    idx = [Value(n) for n in _group_tracer("em.group_index()").group_index()]
    return idx[0] if len(idx) == 1 else tuple(idx)


def _atomic(kind, name, what, dtype, init, check):
    """The atomic em.<name>; its docstring's example reduces random `dtype` values into one element
    initialized to `init` and checks the result with the expression `check`."""
    np_dtype = {"i32": "int32", "u32": "uint32"}[dtype]

    def fn(target, value):
        tr = T.tracer(f"em.{name}")
        if not isinstance(target, Value):
            raise T.error(_C.TypeError, f"em.{name} needs an element of a tensor as target, e.g. em.{name}(A[i], v)")
        return Value(tr.atomic(kind, target.node, T.node_of(tr, value, target.node.dtype)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"""{name}(target, value) -> em.Value

Atomically {what} (target is one element of a tensor, ``A[i]``, or an em.gather with a mode)
and returns the element's old value. Many threads of a kernel may update the same element: no
update is lost. target is an argument or an em.zeros/em.buffer tensor.

>>> @em.compile
... def f(x: em.{dtype}["N"]):
...     out = em.zeros((1,), em.{dtype})
...     out[0] = {init}
...     with em.kernel(x.shape) as (i,):
...         em.{name}(out[0], x[i])
...     return out
>>> x = np.random.default_rng(0).integers(0, 1000, 16).astype(np.{np_dtype})
>>> {check}
True
"""
    return fn


# (kind, name, what it does, dtype of the example, initial value, check of its result)
atomic_add = _atomic(AK.add, "atomic_add", "adds value to target", "i32", 0, "f(x).item() == int(x.sum())")
atomic_min = _atomic(AK.min, "atomic_min", "sets target to min(target, value)", "i32", 5000,
                     "f(x).item() == int(x.min())")
atomic_max = _atomic(AK.max, "atomic_max", "sets target to max(target, value)", "i32", -1,
                     "f(x).item() == int(x.max())")
atomic_and = _atomic(AK.band, "atomic_and", "sets target to target & value (bitwise and)", "u32", "0xFFFFFFFF",
                     "f(x).item() == int(np.bitwise_and.reduce(x))")
atomic_or = _atomic(AK.bor, "atomic_or", "sets target to target | value (bitwise or)", "u32", 0,
                    "f(x).item() == int(np.bitwise_or.reduce(x))")
atomic_xor = _atomic(AK.bxor, "atomic_xor", "sets target to target ^ value (bitwise xor)", "u32", 0,
                     "f(x).item() == int(np.bitwise_xor.reduce(x))")
atomic_exchange = _atomic(AK.exchange, "atomic_exchange", "replaces target with value (the last writer wins)", "i32",
                          -1, "f(x).item() in x")


def zeros(shape, dtype=D.f32):
    """zeros(shape, dtype=em.f32) -> em.Value (inside a traced function) or em.Tensor (outside)

    A tensor of zeros. Inside a traced function it is a new writable buffer (a traced value that
    ``A[i] = v`` and the atomics may write); outside, a runtime em.Tensor. `shape` is an int or a
    tuple of ints (or scalar integer values, inside).

    >>> em.zeros((2, 3), em.i32).numpy().tolist()
    [[0, 0, 0], [0, 0, 0]]
    >>> @em.compile
    ... def onehot(label: em.i32["N"]):
    ...     out = em.zeros((label.shape[0], 4))
    ...     (k,) = em.indices(label.shape)
    ...     out[k, label] = 1.0
    ...     return out
    >>> onehot(np.array([2, 0, 3], np.int32)).numpy().argmax(1).tolist()
    [2, 0, 3]
    """
    dt = D.as_dtype(dtype)
    if T.active() is None:
        from ._tensor import zeros_tensor
        return zeros_tensor(shape, dt)
    tr = T.tracer("em.zeros")
    return Value(tr.zeros(T.shape_nodes(tr, shape), dt._c))


def buffer(shape, dtype=D.f32):
    """buffer(shape, dtype=em.f32) -> em.Value

    An uninitialized writable tensor inside a traced function: cheaper than em.zeros when every
    element is written before it is read.

    >>> @em.compile
    ... def squares(n: em.i32):
    ...     out = em.buffer((n,), em.i32)
    ...     with em.kernel(n) as i:
    ...         out[i] = i * i
    ...     return out
    >>> squares(5).numpy().tolist()
    [0, 1, 4, 9, 16]
    """
    tr = T.tracer("em.buffer")
    return Value(tr.buffer(T.shape_nodes(tr, shape), D.as_dtype(dtype)._c))
