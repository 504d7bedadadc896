"""Tracing only (no compiling): the traced IR, dtype rules, shapes, and user errors that name the
user's file and line. Runs on any build, including one without the runtime."""
import os
import re
import sys

import numpy as np
import pytest

import ember as em

HERE = os.path.basename(__file__)


def traced(fn):
    """The traced IR text of fn."""
    return em.compile(fn).ir("traced")


def ops(text):
    """The op names in an IR text (one node per line, `%n = op dtype[...]` or `op[...]`)."""
    return re.findall(r"^\s*(?:%\d+ = )?(\w+)[ \[]", text, re.M)


def test_traced_ir_has_the_ops():
    def f(X: em.f32["N", 3], V: em.f32["N", 3], dt: em.f32):
        return em.sqrt(X * X + 1.0) + V * dt
    text = traced(f)
    for op in ("input", "scalar_arg", "mul", "add", "sqrt", "output"):
        assert op in ops(text), (op, text)
    assert "'X'" in text and "'dt'" in text and "shape_arg i32 N" in text


def test_annotations_forms():
    def f(A: em.f32["N", 3], B: em.i32[None, 4], C: em.u32[2], s: float, k: int, b: em.bool, u: em.u32):
        return A, B, C, s, k, b, u
    text = traced(f)
    assert "input f32[N, 3] 'A'" in text
    assert re.search(r"input i32\[\S+, 4\] 'B'", text)
    assert "input u32[2] 'C'" in text
    for line in ("scalar_arg f32 's'", "scalar_arg i32 'k'", "scalar_arg bool 'b'", "scalar_arg u32 'u'"):
        assert line in text
    assert text.count("output") == 7


def test_missing_annotation_names_the_parameter():
    def f(X: em.f32["N"], Y):
        return X
    with pytest.raises(em.TypeError, match="'Y'"):
        traced(f)


def test_bad_annotation():
    def f(X: list):
        return X
    with pytest.raises(em.TypeError, match="'X'"):
        traced(f)


def record(**annotations):
    """Traces a function of the given annotations whose body stores results in a dict. The
    program is kept alive in the dict: traced values must not outlive their trace."""
    def deco(body):
        seen = {}

        def f(*args):
            body(seen, *args)
        f.__annotations__ = annotations
        import inspect
        f.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in annotations])
        seen["_program"] = em.compile(f)
        seen["_program"].ir("traced")
        return seen
    return deco


def test_weak_scalar_typing_and_promotion():
    @record(F=em.f32["N"], I=em.i32["N"], U=em.u32["N"], B=em.bool["N"])
    def seen(s, F, I, U, B):
        s["f+int"] = (F + 1).dtype
        s["i+int"] = (I + 1).dtype
        s["u+int"] = (U + 1).dtype
        s["i+float"] = (I + 1.5).dtype
        s["b+int"] = (B + 1).dtype
        s["i/i"] = (I / I).dtype
        s["i//i"] = (I // 2).dtype
        s["f//f"] = (F // 2.0).dtype
        s["i<f"] = (I < F).dtype
        s["b&b"] = (B & B).dtype
        s["~b"] = (~B).dtype
        s["i+u"] = (I + U).dtype
        s["f**2"] = (F ** 2).dtype
        s["sqrt(i)"] = em.sqrt(I).dtype
        s["cast"] = em.f32(I).dtype
        s["bitcast"] = em.bitcast(F, em.u32).dtype
        s["sum(b)"] = em.sum(B).dtype
        s["mean(i)"] = em.mean(I).dtype
    expected = {"f+int": em.f32, "i+int": em.i32, "u+int": em.u32, "i+float": em.f32, "b+int": em.i32,
                "i/i": em.f32, "i//i": em.i32, "f//f": em.f32, "i<f": em.bool, "b&b": em.bool, "~b": em.bool,
                "i+u": em.i32, "f**2": em.f32, "sqrt(i)": em.f32, "cast": em.f32, "bitcast": em.u32,
                "sum(b)": em.i32, "mean(i)": em.f32}
    del seen["_program"]
    assert seen == expected


def test_value_shape_and_symbolic_dims():
    @record(X=em.f32["N", 3], Y=em.f32[None])
    def seen(s, X, Y):
        s["shape"] = X.shape
        s["ndim"] = X.ndim
        s["slice"] = X[:, None, ::2].shape
        s["T"] = X.T.shape
        s["row"] = X[0].shape
        s["last"] = X[-1, -1].shape
        s["ell"] = X[..., 1].shape
        s["sum"] = em.sum(X, axis=0, keepdims=True).shape
        s["sum2"] = em.sum(X, axis=(0, 1)).shape
        s["unsq"] = em.unsqueeze(Y, 0).shape
        s["zeros"] = em.zeros(X.shape, em.i32).shape
        s["ind"] = [i.shape for i in em.indices((X.shape[0], 4))]
        s["bc"] = em.broadcast_to(Y[None, :], (3, Y.shape[0])).shape
    n = seen["shape"][0]
    assert isinstance(n, em.Value) and n.dtype == em.i32 and n.shape == ()
    assert seen["shape"][1] == 3 and seen["ndim"] == 2
    assert seen["slice"][0].node is n.node and seen["slice"][1:] == (1, 2)
    assert seen["T"][0] == 3 and seen["row"] == (3,) and seen["last"] == ()
    assert seen["ell"][0].node is n.node
    assert seen["sum"][0] == 1 and seen["sum"][1] == 3 and seen["sum2"] == ()
    assert seen["unsq"][0] == 1 and seen["zeros"][1] == 3
    assert [len(s) for s in seen["ind"]] == [2, 2] and seen["ind"][0][1] == 4
    assert seen["bc"][0] == 3


def test_slicing_a_symbolic_dim_with_bounds_is_a_shape_error():
    def f(X: em.f32["N"]):
        return X[1:]
    with pytest.raises(em.ShapeError, match="symbolic"):
        traced(f)


def test_broadcast_mismatch_names_file_and_line():
    lines = {}

    def f(A: em.f32[4, 3], B: em.f32[5]):
        lines["bad"] = sys._getframe().f_lineno + 1
        return A + B  # the offending line
    with pytest.raises(em.ShapeError) as ei:
        traced(f)
    msg = str(ei.value)
    assert f"{HERE}:{lines['bad']}" in msg, msg
    assert "broadcast" in msg


def test_shape_error_in_a_helper_names_the_helper_line():
    lines = {}

    def helper(a, b):
        lines["bad"] = sys._getframe().f_lineno + 1
        return em.where(a > 0, a, b)

    def f(A: em.f32["N", 2], B: em.f32["N", 3]):
        return helper(A, B)
    with pytest.raises(em.ShapeError, match=f"{HERE}:{lines.get('bad', '')}") as ei:
        traced(f)
    assert f"{HERE}:{lines['bad']}" in str(ei.value)


def test_float_index_is_a_type_error():
    lines = {}

    def f(A: em.f32["N"], x: em.f32):
        lines["bad"] = sys._getframe().f_lineno + 1
        return A[x]
    with pytest.raises(em.TypeError) as ei:
        traced(f)
    assert "f32" in str(ei.value) and f"{HERE}:{lines['bad']}" in str(ei.value)

    def g(A: em.f32["N"]):
        return A[1.5]
    with pytest.raises(em.TypeError, match="float"):
        traced(g)


def test_python_if_on_a_value_is_a_type_error():
    lines = {}

    def f(A: em.f32["N"]):
        lines["bad"] = sys._getframe().f_lineno + 1
        if A > 0:
            return A
        return -A
    with pytest.raises(em.TypeError, match="em.if_") as ei:
        traced(f)
    assert f"{HERE}:{lines['bad']}" in str(ei.value)
    with pytest.raises(TypeError):  # a generic handler catches it too
        traced(f)


def test_iterating_or_converting_a_value_fails_clearly():
    def f(A: em.f32[3]):
        a, b, c = A
        return a
    with pytest.raises(em.TypeError, match="em.loop"):
        traced(f)

    def g(A: em.f32[3]):
        return float(A[0])
    with pytest.raises(em.TypeError):
        traced(g)


def test_constant_index_out_of_range():
    def f(A: em.f32[3]):
        return A[3]
    with pytest.raises(em.ShapeError, match="out of range"):
        traced(f)


def test_ops_outside_a_trace_raise():
    with pytest.raises(em.Error, match="@em.compile"):
        em.sqrt(2.0)
    with pytest.raises(em.Error):
        with em.loop(3):
            pass


def test_returns_none_constants_and_tuples():
    def f(X: em.f32["N"]):
        return X, 2, 0.5, True
    text = traced(f)
    assert text.count("output") == 4
    assert "output slot=3" in text

    def g(X: em.f32["N"]):
        X[0] = 1.0
    assert "output" not in traced(g) and "store" in traced(g)

    def h(X: em.f32["N"]):
        return [1, 2], X
    with pytest.raises(em.TypeError, match="list"):
        traced(h)


def test_control_flow_ir():
    def f(X: em.f32["N"], n: em.i32):
        out = em.zeros(X.shape, em.f32)
        with em.kernel(X.shape[0]) as i:
            acc = em.var(0.0)
            with em.loop(n) as k:
                with em.if_(k % 2 == 0):
                    acc.val += X[i] * k
                with em.else_():
                    em.continue_()
                with em.if_(acc > 100.0):
                    em.break_()
            out[i] = acc.val
        return out
    text = traced(f)
    for op in ("kernel", "loop", "if_", "else_", "var", "set", "break_", "continue_", "store", "buffer"):
        assert op in ops(text), (op, text)


def test_else_without_if_and_break_outside_loop():
    def f(X: em.f32["N"]):
        with em.else_():
            pass
        return X
    with pytest.raises(em.Error, match="else_"):
        traced(f)

    def g(X: em.f32["N"]):
        em.break_()
        return X
    with pytest.raises(em.Error, match="outside a loop"):
        traced(g)


def test_atomics_and_scatter_ir():
    def f(B: em.i32["N"], V: em.f32["N"]):
        H = em.zeros((16,), em.i32)
        S = em.zeros((16,), em.f32)
        with em.kernel(B.shape) as (i,):
            em.atomic_add(H[B[i]], 1)
            em.atomic_max(S[B[i]], V[i])
        return H, S
    text = traced(f)
    assert text.count("atomic") >= 2 and "add" in text and "max" in text


def test_atomic_target_must_be_an_element():
    def f(V: em.f32["N"]):
        em.atomic_add(V * 2.0, 1.0)
        return V
    with pytest.raises(em.TypeError, match="atomic"):
        traced(f)


def test_scatter_into_a_computed_value_is_a_type_error():
    def f(V: em.f32["N"]):
        W = V * 2.0
        W[0] = 1.0
        return W
    with pytest.raises(em.TypeError, match="assign"):
        traced(f)


def test_loop_float_bound_is_a_type_error():
    def f(V: em.f32["N"]):
        with em.loop(2.5):
            pass
        return V
    with pytest.raises(em.TypeError, match="loop bound"):
        traced(f)


def test_numpy_capture_is_a_type_error():
    table = np.ones(3, np.float32)

    def f(V: em.f32[3]):
        return V + table
    with pytest.raises(em.TypeError, match="argument"):
        traced(f)


def test_reflected_operators_and_numpy_scalars():
    def f(X: em.f32["N"], I: em.i32["N"]):
        return (2.0 - X, 3 / X, 2 ** X, 1 + X, 5 * X, 7 // I, 7 % I, 1 << I, 256 >> I,
                6 & I, 6 | I, 6 ^ I, np.float32(2) * X, abs(-X), +X)
    assert traced(f).count("output") == 15


def test_trace_is_lazy_and_happens_once():
    calls = []

    @em.compile
    def f(X: em.f32["N"]):
        calls.append(1)
        return X + 1
    assert calls == [] and isinstance(f, em.Program)
    f.ir("traced")
    f.ir("traced")
    assert calls == [1]
    assert f.__name__ == "f"


def test_kernel_index_forms():
    @record(X=em.f32["N", 4])
    def seen(s, X):
        with em.kernel(X.shape) as (i, j):
            s["two"] = (i.shape[1], j.dtype)  # values inside a kernel have its shape
        with em.kernel(X.shape[0]) as i:
            s["one"] = isinstance(i, em.Value)
    assert seen["two"] == (4, em.i32) and seen["one"]


def test_var_reassignment_dtype_rules():
    def f(X: em.f32["N"]):
        v = em.var(0)
        v.val = X[0]
        return v
    with pytest.raises(em.TypeError, match="cast"):
        traced(f)
