"""em.nn.Module and em.nn.Parameter (PyTorch-like), and em.save / em.load (.npz state dicts).

A Module's attributes that are Parameters, em.Tensors (buffers) or Modules are its registered
members, in assignment order (the order of its __dict__). A Module passed to a compiled function
becomes program inputs (one per tensor, python/ember/_objargs.py); inside the trace the function
sees a structural copy whose tensors are the traced Values, so `model(x)` runs `forward` on them.
Outside a trace `model(x)` compiles (once per class, structure and input signature) a program
calling forward with the module as argument, and returns em.Tensor."""
import numpy as np

from .. import _ember as _C
from .. import _tracing as T
from .._dtypes import f32
from .._tensor import Tensor, tensor

_TRACED = "_em_traced"  # set in the __dict__ of a traced structural copy


class Parameter:
    """Parameter(data)

    A trainable f32 tensor of a Module, which the optimizers update in place. It wraps an em.Tensor
    (``.data``), converts with ``np.asarray(p)`` or ``p.numpy()``, and passes to compiled functions
    as a tensor. Floating-point data converts to f32; anything else is an ember.TypeError.

    >>> p = em.nn.Parameter(np.random.default_rng(0).normal(size=(3, 2)))
    >>> p.shape, p.dtype, isinstance(p.data, em.Tensor)
    ((3, 2), em.f32, True)
    """

    __slots__ = ("data", "__weakref__")

    def __init__(self, data):
        if isinstance(data, Parameter):
            data = data.data
        if isinstance(data, Tensor):
            if data._dtype_name != "f32":
                raise _C.TypeError(f"em.nn.Parameter must be f32, got an em.Tensor of dtype {data._dtype_name}")
            self.data = data
            return
        a = np.asarray(data)
        if a.dtype.kind != "f":
            raise _C.TypeError(f"em.nn.Parameter must be floating point (stored as f32), got NumPy dtype {a.dtype}")
        self.data = tensor(a.astype(np.float32), f32)

    @property
    def shape(self):
        """The shape, a tuple of ints.

        >>> em.nn.Parameter(np.zeros((2, 5))).shape
        (2, 5)
        """
        return self.data.shape

    @property
    def dtype(self):
        """The element type: always em.f32.

        >>> em.nn.Parameter(np.zeros(3)).dtype
        em.f32
        """
        return f32

    @property
    def ndim(self):
        """The number of axes.

        >>> em.nn.Parameter(np.zeros((2, 5))).ndim
        2
        """
        return self.data.ndim

    @property
    def size(self):
        """The number of elements.

        >>> em.nn.Parameter(np.zeros((2, 5))).size
        10
        """
        return self.data.size

    def numpy(self):
        """numpy() -> numpy.ndarray

        A host copy as a NumPy array (float32).

        >>> a = np.random.default_rng(0).normal(size=4).astype(np.float32)
        >>> bool(np.array_equal(em.nn.Parameter(a).numpy(), a))
        True
        """
        return self.data.numpy()

    def __array__(self, dtype=None, copy=None):
        a = self.data.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self):
        return "em.nn.Parameter(" + repr(self.data)[len("em.Tensor("):]


def _is_tensor(v):
    return isinstance(v, (Parameter, Tensor))


def _plain(v):
    """A hashable description of a plain (non-tensor) attribute, or None when it has none."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        items = [_plain(x) for x in v]
        return None if any(i is None and x is not None for i, x in zip(items, v)) else (type(v).__name__, tuple(items))
    return None


class Module:
    """Module()

    The base class of layers and models (as torch.nn.Module): assign Parameters, em.Tensors
    (buffers) and sub-Modules as attributes, define forward(), and call the module to run it. Inside
    a compiled function that takes the module as an argument (annotated with its class), its tensors
    are program inputs and ``model(x)`` traces forward; outside, ``model(x)`` compiles (once per
    class, structure and input shapes) and runs a program, returning em.Tensor.

    >>> class Affine(em.nn.Module):
    ...     def __init__(self, n):
    ...         self.scale = em.nn.Parameter(np.full(n, 2.0, np.float32))
    ...         self.shift = em.nn.Parameter(np.ones(n, np.float32))
    ...     def forward(self, x):
    ...         return x * self.scale + self.shift
    >>> m = Affine(3)
    >>> @em.compile
    ... def run(m: Affine, x: em.f32["B", 3]):
    ...     return m(x)
    >>> x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    >>> bool(np.allclose(run(m, x).numpy(), 2 * x + 1)), bool(np.allclose(m(x).numpy(), 2 * x + 1))
    (True, True)
    """

    def __init__(self):
        pass  # members live in __dict__; nothing to set up (calling it is optional, as a courtesy)

    def forward(self, *args):
        """forward(*args) -> em.Value

        The module's computation on traced values; subclasses define it (calling the module runs it).

        >>> class Double(em.nn.Module):
        ...     def forward(self, x):
        ...         return 2.0 * x
        >>> x = np.random.default_rng(0).normal(size=3).astype(np.float32)
        >>> bool(np.allclose(Double()(x).numpy(), 2 * x))
        True
        """
        raise _C.TypeError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        """Runs forward: on traced values inside a compiled function, eagerly (compiled) outside."""
        if T.active() is None:
            from ._eager import eager_call
            return eager_call(self, args, kwargs)
        if not self.__dict__.get(_TRACED) and any(True for _ in self._tensors()):
            raise T.error(_C.TypeError, f"a {type(self).__name__} holding em.Tensors is called inside a traced "
                                        f"function; pass it as an argument annotated with {type(self).__name__} "
                                        "(its tensors become program inputs)")
        return self.forward(*args, **kwargs)

    # Members.
    def _members(self):
        for k, v in self.__dict__.items():
            if not k.startswith("_em_") and (_is_tensor(v) or isinstance(v, Module)):
                yield k, v

    def _tensors(self, prefix="", seen=None):
        """(dotted name, Parameter or em.Tensor) of every tensor, depth first, each object once."""
        seen = set() if seen is None else seen
        for k, v in self._members():
            if id(v) in seen:
                continue
            seen.add(id(v))
            if isinstance(v, Module):
                yield from v._tensors(prefix + k + ".", seen)
            else:
                yield prefix + k, v

    def named_parameters(self):
        """named_parameters() -> list of (str, em.nn.Parameter)

        (dotted name, Parameter) pairs in registration (assignment) order, depth first; a Parameter
        shared by two members appears once.

        >>> mlp = em.nn.Sequential(em.nn.Linear(2, 3, seed=0), em.nn.Linear(3, 1, bias=False, seed=1))
        >>> [(n, p.shape) for n, p in mlp.named_parameters()]
        [('0.weight', (3, 2)), ('0.bias', (3,)), ('1.weight', (1, 3))]
        """
        return [(n, v) for n, v in self._tensors() if isinstance(v, Parameter)]

    def parameters(self):
        """parameters() -> list of em.nn.Parameter

        The Parameters, in registration order (what an optimizer made from the module trains).

        >>> sum(p.size for p in em.nn.Linear(4, 3, seed=0).parameters())
        15
        """
        return [v for _, v in self.named_parameters()]

    def named_buffers(self):
        """named_buffers() -> list of (str, em.Tensor)

        (dotted name, em.Tensor) of the buffers: tensor attributes that are not Parameters (state a
        program may read and update, such as running statistics).

        >>> class Counter(em.nn.Module):
        ...     def __init__(self):
        ...         self.count = em.zeros((), em.i32)
        >>> [(n, t.dtype) for n, t in Counter().named_buffers()]
        [('count', em.i32)]
        """
        return [(n, v) for n, v in self._tensors() if not isinstance(v, Parameter)]

    def buffers(self):
        """buffers() -> list of em.Tensor

        The buffers (em.Tensor attributes that are not Parameters), in registration order.

        >>> class Stats(em.nn.Module):
        ...     def __init__(self):
        ...         self.mean = em.zeros((4,))
        ...         self.w = em.nn.Parameter(np.ones(4, np.float32))
        >>> [t.shape for t in Stats().buffers()]
        [(4,)]
        """
        return [v for _, v in self.named_buffers()]

    def children(self):
        """children() -> list of em.nn.Module

        The direct sub-Modules, in registration order.

        >>> seq = em.nn.Sequential(em.nn.Linear(2, 2, seed=0), em.nn.ReLU())
        >>> [type(m).__name__ for m in seq.children()]
        ['Linear', 'ReLU']
        """
        return [v for _, v in self._members() if isinstance(v, Module)]

    def state_dict(self):
        """state_dict() -> dict of str to numpy.ndarray

        {dotted name: NumPy array} of every parameter and buffer (host copies); em.save writes it.

        >>> sd = em.nn.Linear(3, 2, seed=0).state_dict()
        >>> sorted(sd), sd["weight"].shape
        (['bias', 'weight'], (2, 3))
        """
        return {n: v.numpy() for n, v in self._tensors()}

    def load_state_dict(self, state):
        """load_state_dict(state) -> None

        Sets every parameter and buffer from {dotted name: array}: ember.Error on a missing or extra
        key, ember.ShapeError / ember.TypeError on a shape or dtype mismatch (then nothing changes).

        >>> a, b = em.nn.Linear(3, 2, seed=0), em.nn.Linear(3, 2, seed=1)
        >>> b.load_state_dict(a.state_dict())
        >>> bool(np.array_equal(a.weight.numpy(), b.weight.numpy()))
        True
        """
        own = dict(self._tensors())
        missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or extra:
            raise _C.Error(f"{type(self).__name__}.load_state_dict: "
                           + "; ".join(s for s in (f"missing keys {missing}" if missing else "",
                                                   f"unexpected keys {extra}" if extra else "") if s))
        new = {}
        for n, v in own.items():
            a = np.asarray(state[n])
            if tuple(a.shape) != tuple(v.shape):
                raise _C.ShapeError(f"{type(self).__name__}.load_state_dict: '{n}' has shape {tuple(a.shape)}, "
                                    f"expected {tuple(v.shape)}")
            want = v.dtype.np if v.dtype.name != "bool" else np.bool_
            if a.dtype != want:
                raise _C.TypeError(f"{type(self).__name__}.load_state_dict: '{n}' has dtype {a.dtype}, expected "
                                   f"{np.dtype(want)}")
            new[n] = tensor(a, v.dtype)
        for n, v in own.items():
            if isinstance(v, Parameter):
                v.data = new[n]
            else:
                *path, last = n.split(".")
                owner = self
                for p in path:
                    owner = owner.__dict__[p]
                owner.__dict__[last] = new[n]

    def __repr__(self):
        inner = "".join(f"\n  ({k}): " + repr(v).replace("\n", "\n  ") for k, v in self._members()
                        if isinstance(v, Module))
        return f"{type(self).__name__}({self.extra_repr()}{inner}{chr(10) if inner else ''})"

    def extra_repr(self):
        """extra_repr() -> str

        The constructor's arguments shown by repr(module); layers override it.

        >>> em.nn.Linear(3, 2, seed=0).extra_repr()
        'in_features=3, out_features=2, bias=True'
        """
        return ""

    # Program arguments (python/ember/_objargs.py).
    def _em_describe(self, argname, ctx):
        """(structure, leaves): a hashable description (classes, tensor names, shapes, dtypes, plain
        attributes) and [(input name, em.Tensor)] in input order. Registers the Parameters in ctx."""
        leaves, parts = [], []
        seen = {}

        def walk(m, prefix):
            parts.append(("module", prefix, type(m)))
            for k, v in m.__dict__.items():
                if k.startswith("_em_"):
                    continue
                if isinstance(v, Module) or _is_tensor(v):
                    if id(v) in seen:
                        parts.append(("alias", prefix + k, seen[id(v)]))
                        continue
                    seen[id(v)] = prefix + k
                    if isinstance(v, Module):
                        walk(v, prefix + k + ".")
                        continue
                    t = v.data if isinstance(v, Parameter) else v
                    parts.append(("param" if isinstance(v, Parameter) else "buffer", prefix + k,
                                  tuple(t.shape), t._dtype_name))
                    leaves.append((f"{argname}.{prefix}{k}", t))
                    if isinstance(v, Parameter):
                        ctx.params[id(v)] = (argname, prefix + k)
                else:
                    p = _plain(v)
                    parts.append(("attr", prefix + k, p if p is not None or v is None else ctx.opaque(v)))
        walk(self, "")
        return tuple(parts), leaves

    def _em_snapshot(self):
        """Identity checks standing for _em_describe (python/ember/_objargs.py): every module's
        __dict__ and every Parameter's data; None when a plain attribute could change in place."""
        from .._objargs import immutable, mapping_check
        checks, seen = [], set()

        def walk(m):
            checks.append(mapping_check(m.__dict__))
            for k, v in m.__dict__.items():
                if k.startswith("_em_") or id(v) in seen:
                    continue
                seen.add(id(v))
                if isinstance(v, Module):
                    if not walk(v):
                        return False
                elif isinstance(v, Parameter):
                    checks.append((v, "data", v.data))
                elif not isinstance(v, Tensor) and not immutable(v):
                    return False
            return True
        return checks if walk(self) else None

    def _em_rebuild(self, values, ctx):
        """The structural copy seen inside a trace: same classes and plain attributes, every tensor
        replaced by the next Value of the iterator `values` (input order of _em_describe)."""
        made = {}

        def copy(m):
            c = object.__new__(type(m))
            d = {}
            for k, v in m.__dict__.items():
                if not k.startswith("_em_") and (isinstance(v, Module) or _is_tensor(v)):
                    if id(v) not in made:
                        made[id(v)] = copy(v) if isinstance(v, Module) else next(values)
                        if isinstance(v, Parameter):
                            ctx.values[id(v)] = made[id(v)]
                    v = made[id(v)]
                d[k] = v
            d[_TRACED] = True
            c.__dict__.update(d)
            return c
        return copy(self)


def save(path, obj):
    """save(path, obj) -> None

    Saves a Module's or optimizer's state_dict, or a dict of arrays, as a .npz file at `path`
    (exactly that path: no suffix is added). Read it back with em.load.

    >>> import os, tempfile
    >>> model = em.nn.Linear(3, 2, seed=0)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> em.save(path, model)
    >>> sorted(em.load(path))
    ['bias', 'weight']
    """
    state = obj.state_dict() if hasattr(obj, "state_dict") else obj
    if not isinstance(state, dict):
        raise _C.TypeError(f"em.save: expected a Module, an optimizer or a dict of arrays, got {type(obj).__name__}")
    arrays = {}
    for k, v in state.items():
        if not isinstance(k, str):
            raise _C.TypeError(f"em.save: key {k!r} is not a string")
        arrays[k] = np.asarray(v.numpy() if isinstance(v, (Tensor, Parameter)) else v)
    with open(path, "wb") as f:  # a file object: np.savez would append .npz to a str path
        np.savez(f, **arrays)


def load(path):
    """load(path) -> dict of str to numpy.ndarray

    The dict of NumPy arrays saved by em.save (give it to load_state_dict).

    >>> import os, tempfile
    >>> a, b = em.nn.Linear(3, 2, seed=0), em.nn.Linear(3, 2, seed=1)
    >>> path = os.path.join(tempfile.mkdtemp(), "a.npz")
    >>> em.save(path, a)
    >>> b.load_state_dict(em.load(path))
    >>> bool(np.array_equal(a.bias.numpy(), b.bias.numpy()))
    True
    """
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
