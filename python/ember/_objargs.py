"""Module and optimizer arguments of compiled programs (`model: MLP`, `opt: em.optim.Adam`).

An object argument is flattened into program inputs: every tensor it holds (a module's
parameters and buffers, an optimizer's state and step counter) becomes a tensor input and every
optimizer hyperparameter a runtime scalar input, named `<argument>.<dotted name>`. Its *structure*
(classes, tensor names, shapes, dtypes, plain attributes) is recorded at the first call; the trace
depends on it, so a later call must match it (ember.TypeError / ember.ShapeError naming the
difference) and the trace cache keys on it. Classes opt in by defining `_em_describe(argname, ctx)`
-> (structure, leaves) and `_em_rebuild(values, ctx)` -> the object seen inside the trace.

A class may also define `_em_snapshot()` -> identity checks (see `holds`) that stand for its last
_em_describe while they hold, or None: then a call passing the same objects, unchanged, reuses
the last call's flattened arguments instead of describing them again (the per-call cost of a
train step's Python side)."""
import operator
import types

from . import _ember as _C
from . import _dtypes as D


class ObjSpec:
    """The spec of a parameter annotated with a Module or optimizer class."""

    __slots__ = ("cls",)

    def __init__(self, cls):
        self.cls = cls

    def __repr__(self):
        return f"{self.cls.__module__}.{self.cls.__qualname__}"


def is_object_class(ann):
    """Whether annotation `ann` is a class whose instances can be program arguments."""
    return isinstance(ann, type) and hasattr(ann, "_em_describe") and hasattr(ann, "_em_rebuild")


class _Opaque:
    """Stands for a plain attribute without a content description: equal by type name, and it
    makes the trace uncacheable (the trace cache's fingerprint has no content for it)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, o):
        return isinstance(o, _Opaque) and o.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"<a {self.name}>"


class Context:
    """Per call: which argument owns each Parameter (params: id -> (argname, name)) and, while
    tracing, the traced Value of each Parameter (values: id -> Value)."""

    def __init__(self):
        self.params = {}
        self.values = {}
        self.uncacheable = False

    def opaque(self, v):
        if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type)):
            return v  # compared by identity, fingerprinted by the trace cache
        self.uncacheable = True
        return _Opaque(type(v).__qualname__)


def describe(prog_name, params, args):
    """(ctx, structures {position: structure}, leaves {position: [(name, leaf)]}) of the object
    arguments among `args` (in parameter order); modules first, so optimizers find their parameters."""
    ctx, structs, leaves = Context(), {}, {}
    objs = [(k, pname, spec, v) for k, ((pname, spec), v) in enumerate(zip(params, args)) if isinstance(spec, ObjSpec)]
    objs.sort(key=lambda o: getattr(o[2].cls, "_em_order", 0))
    for k, pname, spec, v in objs:
        if not isinstance(v, spec.cls):
            raise _C.TypeError(f"argument '{pname}' of {prog_name} expects a {spec.cls.__qualname__}, got "
                               f"{type(v).__qualname__}")
        structs[k], leaves[k] = v._em_describe(pname, ctx)
    return ctx, structs, leaves


def check(prog_name, params, recorded, structs):
    """Raises ember.TypeError / ember.ShapeError naming the first difference between the
    structures the program was traced with and this call's."""
    for k, new in structs.items():
        old = recorded[k]
        if old != new:
            _difference(prog_name, params[k][0], old, new)


def _difference(prog, arg, old, new):
    o, n = {p[1]: p for p in old}, {p[1]: p for p in new}
    if old[0] != new[0]:  # the argument's own class
        raise _C.TypeError(f"argument '{arg}' of {prog} is a {new[0][2].__qualname__}, but {prog} was traced "
                           f"with a {old[0][2].__qualname__}")
    for name, p in sorted(o.items(), key=lambda kv: kv[1][0] == "attr"):  # tensors before plain attributes
        q = n.get(name)
        what = f"{_KIND.get(p[0], p[0])} '{name.rstrip('.')}'" if name else "the argument"
        if p == q:
            continue
        if q is None or q[0] != p[0] and p[0] in ("param", "buffer"):
            now = "" if q is None else f" (it is {'a ' + _KIND.get(q[0], q[0]) if q[0] != 'attr' else q[2]!r})"
            raise _C.TypeError(f"argument '{arg}' of {prog} has no {what}{now}, which {prog} was traced with "
                               f"({_show(p)})")
        if p[0] == q[0] == "module":
            raise _C.TypeError(f"argument '{arg}' of {prog}: sub-module '{name.rstrip('.')}' is a "
                               f"{q[2].__qualname__}, but {prog} was traced with a {p[2].__qualname__}")
        if p[0] == q[0] and p[0] in ("param", "buffer", "state") and p[2] != q[2]:
            raise _C.ShapeError(f"argument '{arg}' of {prog}: {what} has shape {q[2]}, but {prog} was traced "
                                f"with shape {p[2]}")
        raise _C.TypeError(f"argument '{arg}' of {prog}: {what} is {_show(q)}, but {prog} was traced with "
                           f"{_show(p)}")
    for name, q in n.items():
        if name not in o:
            raise _C.TypeError(f"argument '{arg}' of {prog} has {_KIND.get(q[0], q[0])} '{name.rstrip('.')}' ({_show(q)}), which "
                               f"{prog} was not traced with")
    raise _C.TypeError(f"argument '{arg}' of {prog} has another structure than {prog} was traced with")


_KIND = {"param": "parameter", "attr": "attribute", "state": "state tensor"}


def _show(p):
    kind = p[0]
    if kind == "module":
        return f"a {p[2].__qualname__}"
    if kind in ("param", "buffer", "state"):
        return f"{p[3]}{list(p[2])}"
    return ", ".join(repr(x) for x in p[2:])


_IMMUTABLE = (type(None), bool, int, float, str, types.FunctionType, types.BuiltinFunctionType, type)


def immutable(v):
    """Whether plain attribute `v` cannot change without being replaced (so an identity check
    of it stands for its description)."""
    if isinstance(v, tuple):
        return all(immutable(x) for x in v)
    return isinstance(v, _IMMUTABLE)


def mapping_check(d):
    """An identity check of dict `d`: the same keys in the same order, each bound to the same object."""
    return (d, tuple(d), tuple(d.values()))


def sequence_check(s):
    """An identity check of list `s`: the same objects in the same order."""
    return (s, None, tuple(s))


def holds(checks):
    """Whether every check of a snapshot still holds: (dict, keys, values) from mapping_check,
    (list, None, items) from sequence_check, or (object, attribute name, value) for an attribute
    held in a slot."""
    for c, keys, vals in checks:
        if keys is None:
            if len(c) != len(vals) or not all(map(operator.is_, c, vals)):
                return False
        elif type(keys) is str:
            if getattr(c, keys) is not vals:
                return False
        elif tuple(c) != keys or not all(map(operator.is_, c.values(), vals)):  # keys and vals: equal lengths
            return False
    return True


def leaf_specs(leaves):
    """[(input name, TensorType or DType)] of a list of leaves."""
    out = []
    for name, leaf in leaves:
        if isinstance(leaf, tuple):  # (dtype, Python value): a runtime scalar
            out.append((name, leaf[0]))
        else:
            out.append((name, D.TensorType(D.from_name(leaf._dtype_name), tuple(leaf.shape))))
    return out
