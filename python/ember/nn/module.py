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
    """A trainable f32 tensor of a Module (the optimizers update it in place). Wraps an em.Tensor
    (`.data`); converts with np.asarray(p) or p.numpy() and passes to compiled functions as a tensor."""

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

    shape = property(lambda self: self.data.shape, doc="The shape, a tuple of ints.")
    dtype = property(lambda self: f32, doc="Always em.f32.")
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)

    def numpy(self):
        """A host copy as a NumPy array."""
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
    """Base class of layers and models (as torch.nn.Module): assign Parameters, em.Tensors (buffers)
    and sub-Modules as attributes, define forward(); call the module to run it."""

    def __init__(self):
        pass  # members live in __dict__; nothing to set up (calling it is optional, as a courtesy)

    def forward(self, *args):
        """The module's computation on traced values; subclasses define it."""
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
        """(dotted name, Parameter) pairs in registration order (a shared Parameter once)."""
        return [(n, v) for n, v in self._tensors() if isinstance(v, Parameter)]

    def parameters(self):
        """The Parameters, in registration order."""
        return [v for _, v in self.named_parameters()]

    def named_buffers(self):
        """(dotted name, em.Tensor) of the buffers: tensor attributes that are not Parameters."""
        return [(n, v) for n, v in self._tensors() if not isinstance(v, Parameter)]

    def buffers(self):
        """The buffers (em.Tensor attributes that are not Parameters)."""
        return [v for _, v in self.named_buffers()]

    def children(self):
        """The direct sub-Modules."""
        return [v for _, v in self._members() if isinstance(v, Module)]

    def state_dict(self):
        """{dotted name: NumPy array} of every parameter and buffer (host copies)."""
        return {n: v.numpy() for n, v in self._tensors()}

    def load_state_dict(self, state):
        """Sets every parameter and buffer from {dotted name: array}; ember.Error on a missing or
        extra key, ember.ShapeError / ember.TypeError on a shape or dtype mismatch (nothing changes)."""
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
        """The constructor's arguments shown by repr (layers override it)."""
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
    """Saves a Module's or optimizer's state_dict, or a dict of arrays, as a .npz file at `path`."""
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
    """The dict of NumPy arrays saved by em.save (give it to load_state_dict)."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
