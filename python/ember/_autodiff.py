"""Derivatives inside traced functions: em.grad (reverse mode), em.jvp (forward mode) and
Value.detach(). The transforms run on the traced IR (core/autodiff); the derivative code they
emit is ordinary traced code, fused and compiled with the rest of the program."""
from . import _ember as _C
from . import _tracing as T
from ._value import Value, Var


def _x_nodes(what, x):
    """(nodes, rebuild): the nodes of x (a Value/Var or a list/tuple of them) and a function that
    puts results back into x's structure."""
    if isinstance(x, (list, tuple)):
        if not x:
            raise T.error(_C.TypeError, f"{what}: x is an empty {type(x).__name__}")
        nodes = []
        for k, v in enumerate(x):
            if not isinstance(v, Value):
                raise T.error(_C.TypeError, f"{what}: x[{k}] is a {type(v).__name__}, not a traced value; "
                                            "differentiate with respect to arguments or values of this function")
            nodes.append(v.node)
        return nodes, lambda rs: type(x)(Value(r) for r in rs)
    if not isinstance(x, Value):
        raise T.error(_C.TypeError, f"{what}: x is a {type(x).__name__}, not a traced value; differentiate with "
                                    "respect to arguments or values of this function")
    return [x.node], lambda rs: Value(rs[0])


def grad(y, x, dy=None):
    """The vector-Jacobian product of `y` with `dy` (ones when None; for a scalar y the gradient)
    with respect to `x`: a value, an em.var (its value where the current scope began) or a
    list/tuple of them; the result has x's structure. Example: ``g = em.grad(em.sum(x * x), x)``."""
    tr = T.tracer("em.grad")
    if not isinstance(y, Value):
        raise T.error(_C.TypeError, f"em.grad: y is a {type(y).__name__}, not a traced value")
    nodes, rebuild = _x_nodes("em.grad", x)
    dy_node = None if dy is None else T.node_of(tr, dy, "f32")
    return rebuild(tr.grad(y.node, nodes, dy_node))


def jvp(y, x, dx):
    """Forward mode: the derivative of `y` at `x` along the tangent `dx` (same structure as x).
    Example: ``dy = em.jvp(em.sin(x), x, em.ones_like(x))`` is cos(x)."""
    tr = T.tracer("em.jvp")
    if not isinstance(y, Value):
        raise T.error(_C.TypeError, f"em.jvp: y is a {type(y).__name__}, not a traced value")
    nodes, _ = _x_nodes("em.jvp", x)
    dxs = list(dx) if isinstance(dx, (list, tuple)) else [dx]
    if len(dxs) != len(nodes):
        raise T.error(_C.TypeError, f"em.jvp: {len(nodes)} x values but {len(dxs)} tangents")
    return Value(tr.jvp(y.node, nodes, [T.node_of(tr, d, "f32") for d in dxs]))


def detach(x):
    """`x` as a value that gradients do not flow through (em.grad treats it as a constant)."""
    tr = T.tracer("detach")
    return Value(tr.detach(T.node_of(tr, x)))


Value.detach = detach
Var.detach = detach
