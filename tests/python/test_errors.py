"""User errors found while tracing (issue 3 acceptance): each names the problem, the offending
value and the user's file:line, and has the documented class (ember.ShapeError is also a
ValueError, ember.TypeError also a TypeError). Errors at call time are in test_programs.py."""
import os
import sys

import numpy as np
import pytest

import ember as em

HERE = os.path.basename(__file__)


def line_after():
    """The line number just after the caller's line (where the offending statement is)."""
    return sys._getframe(1).f_lineno + 1


def run(fn):
    """Compiles fn and calls it with ones of the shapes its annotations give (symbolic dims: 4)."""
    from ember._program import _signature
    vals = []
    for _, spec in _signature(fn)[1]:
        if isinstance(spec, em.TensorType):
            vals.append(np.ones([d if isinstance(d, int) else 4 for d in spec.dims], spec.dtype.np))
        else:
            vals.append(spec.np.type(1))
    return em.compile(fn)(*vals)


def check(ei, cls, line, *parts):
    msg = str(ei.value)
    assert type(ei.value) is cls, (type(ei.value), msg)
    assert f"{HERE}:{line}" in msg, msg
    for p in parts:
        assert p in msg, (p, msg)


# Shape mismatch at trace time -----------------------------------------------------------------------

def test_broadcast_mismatch_names_the_users_line():
    def f(A: em.f32["N", 3], B: em.f32["N", 4]):  # noqa: F821
        line["at"] = line_after()
        return A * 2.0 + B
    line = {}
    with pytest.raises(em.ShapeError) as ei:
        run(f)
    check(ei, em.ShapeError, line["at"], "broadcast", "3", "4")
    assert isinstance(ei.value, ValueError)


def test_matmul_mismatch_names_the_users_line():
    def f(A: em.f32[3, 5], B: em.f32[4, 2]):
        line["at"] = line_after()
        return A @ B
    line = {}
    with pytest.raises(em.ShapeError) as ei:
        run(f)
    check(ei, em.ShapeError, line["at"])


def test_scatter_value_mismatch_names_the_users_line():
    def f(A: em.f32[6], V: em.f32[5]):
        line["at"] = line_after()
        A[:] = V
    line = {}
    with pytest.raises(em.ShapeError) as ei:
        run(f)
    check(ei, em.ShapeError, line["at"])


def test_shape_error_in_a_loop_body_names_the_users_line():
    def f(A: em.f32["N"], B: em.f32[2, 3], n: em.i32):  # noqa: F821
        acc = em.var(A)
        with em.loop(n):
            line["at"] = line_after()
            acc.val = acc + B
        return acc.val
    line = {}
    with pytest.raises(em.ShapeError) as ei:
        run(f)
    check(ei, em.ShapeError, line["at"])


# Index dtype not integer ----------------------------------------------------------------------------

def test_float_tensor_index_is_a_type_error():
    def f(A: em.f32["N"], X: em.f32["M"]):  # noqa: F821
        line["at"] = line_after()
        return A[X]
    line = {}
    with pytest.raises(em.TypeError) as ei:
        run(f)
    check(ei, em.TypeError, line["at"], "f32", "integer")
    assert isinstance(ei.value, TypeError)


def test_float_index_in_a_store_and_in_em_gather():
    def store(A: em.f32["N"], X: em.f32["N"]):  # noqa: F821
        line["at"] = line_after()
        A[X * 2.0] = 1.0
    line = {}
    with pytest.raises(em.TypeError) as ei:
        run(store)
    check(ei, em.TypeError, line["at"], "f32", "integer")

    def gather(A: em.f32["N", "N"], X: em.f32["N"], I: em.i32["N"]):  # noqa: F821
        line["at"] = line_after()
        return em.gather(A, (I, X), mode="wrap")
    with pytest.raises(em.TypeError) as ei:
        run(gather)
    check(ei, em.TypeError, line["at"], "index 1", "f32", "integer")


def test_float_index_inside_a_kernel():
    def f(A: em.f32["N"], X: em.f32["N"]):  # noqa: F821
        out = em.zeros(A.shape, em.f32)
        with em.kernel(A.shape[0]) as i:
            line["at"] = line_after()
            out[i] = A[X[i]]
        return out
    line = {}
    with pytest.raises(em.TypeError) as ei:
        run(f)
    check(ei, em.TypeError, line["at"], "f32", "integer")


def test_python_float_index_is_a_type_error():
    def f(A: em.f32["N"]):  # noqa: F821
        line["at"] = line_after()
        return A[0.5]
    line = {}
    with pytest.raises(em.TypeError) as ei:
        run(f)
    check(ei, em.TypeError, line["at"], "float", "integer")


# break_ / continue_ outside a loop -------------------------------------------------------------------

def test_break_outside_a_loop_is_a_compile_error():
    def f(A: em.f32["N"]):  # noqa: F821
        line["at"] = line_after()
        em.break_()
        return A
    line = {}
    with pytest.raises(em.CompileError) as ei:
        run(f)
    check(ei, em.CompileError, line["at"], "em.break_()", "outside a loop")


def test_break_in_a_kernel_or_if_but_not_a_loop():
    def in_kernel(A: em.f32["N"]):  # noqa: F821
        with em.kernel(A.shape[0]) as i:
            with em.if_(A[i] > 0):
                line["at"] = line_after()
                em.break_()
        return A
    line = {}
    with pytest.raises(em.CompileError) as ei:
        run(in_kernel)
    check(ei, em.CompileError, line["at"], "outside a loop")

    def loop_outside_the_kernel(A: em.f32["N"], n: em.i32):  # noqa: F821
        with em.loop(n):
            with em.kernel(A.shape[0]):
                line["at"] = line_after()
                em.break_()  # a kernel thread cannot leave the host loop around its kernel
        return A
    with pytest.raises(em.CompileError) as ei:
        run(loop_outside_the_kernel)
    check(ei, em.CompileError, line["at"], "outside a loop")


def test_continue_outside_a_loop_is_a_compile_error():
    def f(A: em.f32["N"]):  # noqa: F821
        with em.if_(A[0] > 0):
            line["at"] = line_after()
            em.continue_()
        return A
    line = {}
    with pytest.raises(em.CompileError) as ei:
        run(f)
    check(ei, em.CompileError, line["at"], "em.continue_()", "outside a loop")


def test_break_outside_a_trace():
    with pytest.raises(em.Error, match="em.break_ can only be used inside a function compiled with @em.compile"):
        em.break_()


def test_a_failed_trace_can_be_traced_again():
    """After an error the program is not left half-traced: a second call raises the same error."""
    def f(A: em.f32["N"]):  # noqa: F821
        em.break_()
        return A
    prog = em.compile(f)
    for _ in range(2):
        with pytest.raises(em.CompileError, match="outside a loop"):
            prog(np.ones(3, np.float32))
