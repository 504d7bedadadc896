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
    """`with em.loop(n) as k:` runs the block for k in range(n); em.loop(a, b) and em.loop(a, b, s)
    as range(a, b, s). Bounds are ints or integer values; k is an i32 Value."""
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
    """`with em.if_(c):` runs the block where c is true (per element when c is a tensor)."""
    def open_(tr):
        tr.begin_if(T.node_of(tr, cond))
    return _Scope(open_)


def else_():
    """`with em.else_():` directly after an em.if_ block runs where its condition was false."""
    return _Scope(lambda tr: tr.begin_else())


def break_():
    """Leaves the innermost em.loop (for the current element, inside a kernel)."""
    T.tracer("em.break_").break_()


def continue_():
    """Skips to the next iteration of the innermost em.loop."""
    T.tracer("em.continue_").continue_()


def var(init, dtype=None):
    """A mutable value initialized to `init`: read `v.val` (or use v directly), assign `v.val = x`.
    A Python int gives i32, a float f32, unless `dtype` is given."""
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
    """`with em.kernel((H, W)) as (i, j):` runs the block once per index of `shape` (an explicit
    kernel); with a single int or value as shape it yields one index value. `group=(16, 16)`
    (ints, one per axis; an int for 1-D) splits it into workgroups that share em.group_buffer
    memory and meet at em.barrier(); threads of the last groups outside `shape` only join barriers."""
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
    """Memory shared by the threads of a workgroup (CUDA __shared__, GLSL shared); each group has
    its own. `shape` is an int or a tuple of ints; use it one element at a time: buf[i], buf[i] = v."""
    tr = _group_tracer("em.group_buffer()")
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    for d in dims:
        if isinstance(d, T._BOOL_TYPES) or not isinstance(d, T._INT_TYPES):
            raise T.error(_C.TypeError, f"a group buffer dimension must be a Python int, got {d!r}")
    return Value(tr.group_buffer([int(d) for d in dims], D.as_dtype(dtype)._c))


def barrier():
    """Waits until every thread of the workgroup gets here (CUDA __syncthreads, GLSL barrier()); group
    buffer writes before it are seen by the whole group after it. Not under per-thread em.if_/em.loop."""
    _group_tracer("em.barrier()").barrier()


def local_index():
    """The thread's coordinate within its workgroup (CUDA threadIdx, GLSL gl_LocalInvocationID): an
    i32 value for a 1-D kernel, else a tuple. The kernel index is group_index() * group + local_index()."""
    idx = [Value(n) for n in _group_tracer("em.local_index()").local_index()]
    return idx[0] if len(idx) == 1 else tuple(idx)


def group_index():
    """The coordinate of the thread's workgroup (CUDA blockIdx, GLSL gl_WorkGroupID): an i32 value
    for a 1-D kernel, else a tuple. It is the same on every thread of the group."""
    idx = [Value(n) for n in _group_tracer("em.group_index()").group_index()]
    return idx[0] if len(idx) == 1 else tuple(idx)


def _atomic(kind, name):
    def fn(target, value):
        tr = T.tracer(f"em.{name}")
        if not isinstance(target, Value):
            raise T.error(_C.TypeError, f"em.{name} needs an element of a tensor as target, e.g. em.{name}(A[i], v)")
        return Value(tr.atomic(kind, target.node, T.node_of(tr, value, target.node.dtype)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Atomically updates target (an indexed tensor, A[i]) with value ({name[7:]}); "
                  "returns the old value.")
    return fn


atomic_add = _atomic(AK.add, "atomic_add")
atomic_min = _atomic(AK.min, "atomic_min")
atomic_max = _atomic(AK.max, "atomic_max")
atomic_and = _atomic(AK.band, "atomic_and")
atomic_or = _atomic(AK.bor, "atomic_or")
atomic_xor = _atomic(AK.bxor, "atomic_xor")
atomic_exchange = _atomic(AK.exchange, "atomic_exchange")


def zeros(shape, dtype=D.f32):
    """A tensor of zeros. Inside a traced function: a new writable buffer (a traced Value);
    outside: a runtime em.Tensor."""
    dt = D.as_dtype(dtype)
    if T.active() is None:
        from ._tensor import zeros_tensor
        return zeros_tensor(shape, dt)
    tr = T.tracer("em.zeros")
    return Value(tr.zeros(T.shape_nodes(tr, shape), dt._c))


def buffer(shape, dtype=D.f32):
    """An uninitialized writable tensor inside a traced function (fill it before reading)."""
    tr = T.tracer("em.buffer")
    return Value(tr.buffer(T.shape_nodes(tr, shape), D.as_dtype(dtype)._c))
