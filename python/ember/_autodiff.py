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
    """grad(y, x, dy=None) -> em.Value (or x's list/tuple structure)

    Reverse-mode differentiation inside a traced function: the vector-Jacobian product of `y` with
    `dy` (ones when None, so for a scalar y the gradient) with respect to `x`, a value, an em.var
    (its value where the current scope began) or a list/tuple of them; the result has x's
    structure. The derivative code is ordinary traced code, fused with the rest; gradients of
    gradients work.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.grad(em.sum(em.sin(x) * x), x)
    >>> x = np.random.default_rng(0).normal(size=5).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), np.cos(x) * x + np.sin(x), atol=1e-5))
    True
    """
    tr = T.tracer("em.grad")
    if not isinstance(y, Value):
        raise T.error(_C.TypeError, f"em.grad: y is a {type(y).__name__}, not a traced value")
    nodes, rebuild = _x_nodes("em.grad", x)
    dy_node = None if dy is None else T.node_of(tr, dy, "f32")
    return rebuild(tr.grad(y.node, nodes, dy_node))


def jvp(y, x, dx):
    """jvp(y, x, dx) -> em.Value

    Forward-mode differentiation: the derivative of `y` at `x` along the tangent `dx` (the same
    structure as x: a value or a list/tuple of them), i.e. the Jacobian-vector product J dx.

    >>> @em.compile
    ... def f(x: em.f32["N"], dx: em.f32["N"]):
    ...     return em.jvp(x * x * x, x, dx)
    >>> x, dx = np.random.default_rng(0).normal(size=(2, 5)).astype(np.float32)
    >>> bool(np.allclose(f(x, dx).numpy(), 3 * x * x * dx, atol=1e-5))
    True
    """
    tr = T.tracer("em.jvp")
    if not isinstance(y, Value):
        raise T.error(_C.TypeError, f"em.jvp: y is a {type(y).__name__}, not a traced value")
    nodes, _ = _x_nodes("em.jvp", x)
    dxs = list(dx) if isinstance(dx, (list, tuple)) else [dx]
    if len(dxs) != len(nodes):
        raise T.error(_C.TypeError, f"em.jvp: {len(nodes)} x values but {len(dxs)} tangents")
    return Value(tr.jvp(y.node, nodes, [T.node_of(tr, d, "f32") for d in dxs]))


def detach(x):
    """detach() -> em.Value

    ``x.detach()``: x as a value that gradients do not flow through (em.grad and em.jvp treat it as
    a constant), like torch's detach.

    >>> @em.compile
    ... def f(x: em.f32["N"]):
    ...     return em.grad(em.sum(x * x.detach()), x)
    >>> x = np.random.default_rng(0).normal(size=4).astype(np.float32)
    >>> bool(np.allclose(f(x).numpy(), x))
    True
    """
    tr = T.tracer("detach")
    return Value(tr.detach(T.node_of(tr, x)))


Value.detach = detach
Var.detach = detach
