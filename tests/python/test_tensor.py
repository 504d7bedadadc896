"""ember.Tensor, em.tensor / em.zeros outside a trace, the error classes and em.init."""
import numpy as np
import pytest

import ember as em


@pytest.mark.parametrize("kind", ["ShapeError", "TypeError", "CompileError", "BackendError", "InternalError"])
def test_cpp_errors_become_ember_classes(kind):
    cls = getattr(em, kind)
    assert issubclass(cls, em.Error)
    with pytest.raises(cls, match="boom"):
        em._ember._throw(kind, "boom")


def test_error_hierarchy_lets_generic_handlers_catch():
    assert issubclass(em.ShapeError, ValueError)
    assert issubclass(em.TypeError, TypeError)
    assert em.ShapeError.__module__ == "ember" and em.ShapeError.__name__ == "ShapeError"
    with pytest.raises(ValueError):
        em._ember._throw("ShapeError", "x")
    with pytest.raises(TypeError):
        em._ember._throw("TypeError", "x")
    with pytest.raises(em.Error):
        em._ember._throw("Error", "x")


def test_init_backends():
    em.init("auto")
    assert em.backend() == "cpu"
    em.init(backend="cpu")
    if em._ember.backend_unavailable("cuda"):  # cuda: not built, or no driver/device (test_cuda_codegen.py)
        with pytest.raises(em.BackendError, match="not built|CUDA is not available"):
            em.init(backend="cuda")
    with pytest.raises(em.BackendError, match="unknown backend"):
        em.init(backend="metal")
    assert em.backend() == "cpu"


@pytest.mark.parametrize("np_dtype,em_dtype", [(np.float32, em.f32), (np.int32, em.i32), (np.uint32, em.u32)])
def test_tensor_roundtrip(rng, np_dtype, em_dtype):
    a = (rng.uniform(1, 100, size=(3, 4, 5))).astype(np_dtype)
    t = em.tensor(a)
    assert isinstance(t, em.Tensor)
    assert t.shape == (3, 4, 5) and t.ndim == 3 and t.size == 60 and len(t) == 3
    assert t.dtype == em_dtype and t.dtype == em_dtype.name and t.dtype is em_dtype
    b = t.numpy()
    assert b.dtype == np_dtype and np.array_equal(a, b)
    assert np.array_equal(np.asarray(t), a)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    a[0, 0, 0] += 1  # em.tensor copied
    assert not np.array_equal(a, t.numpy())
    assert t.numpy() is not t.numpy()


def test_bool_tensor_is_one_word_per_element(rng):
    a = rng.uniform(size=(7, 3)) > 0.5
    t = em.tensor(a)
    assert t.dtype == em.bool and t.numpy().dtype == np.bool_
    assert np.array_equal(t.numpy(), a)


def test_explicit_conversions(rng):
    f64 = rng.normal(size=(5,))
    t = em.tensor(f64)
    assert t.dtype == em.f32 and np.allclose(t.numpy(), f64.astype(np.float32))
    i64 = rng.integers(-1000, 1000, size=(4, 2))
    t = em.tensor(i64)
    assert t.dtype == em.i32 and np.array_equal(t.numpy(), i64)
    assert em.tensor([1.5, 2.5]).dtype == em.f32
    assert em.tensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert em.tensor(np.arange(4, dtype=np.uint8)).dtype == em.i32
    assert em.tensor(np.array([3, 4], dtype=np.uint64)).dtype == em.u32
    assert em.tensor(np.arange(3), dtype=em.f32).dtype == em.f32
    with pytest.raises(em.TypeError, match="do not fit"):
        em.tensor(np.array([2 ** 40, 1], dtype=np.int64))
    with pytest.raises(em.TypeError, match="overflow"):
        em.tensor(np.array([1e300]))
    with pytest.raises(em.TypeError):
        em.tensor(np.array(["a", "b"]))


def test_scalar_tensor_and_repr():
    t = em.tensor(np.float32(2.5))
    assert t.shape == () and float(t) == 2.5 and t.item() == 2.5
    r = repr(em.tensor(np.array([1, 2], dtype=np.int32)))
    assert r.startswith("em.Tensor(") and "i32" in r and "1, 2" in r


def test_zeros_outside_trace():
    z = em.zeros((2, 3), em.i32)
    assert isinstance(z, em.Tensor) and z.dtype == em.i32 and z.shape == (2, 3)
    assert np.array_equal(z.numpy(), np.zeros((2, 3), np.int32))
    assert em.zeros(4).dtype == em.f32 and em.zeros(4).shape == (4,)
    with pytest.raises(em.ShapeError):
        em.zeros((-1,))


def test_dtype_objects():
    assert repr(em.f32) == "em.f32" and str(em.u32) == "u32"
    assert em.f32 != em.i32 and em.bool == "bool"
    assert em.f32["N", 3].dims == ("N", 3) and em.f32[None, 3].dims == (None, 3)
    assert em.i32[5].dims == (5,)
    with pytest.raises(em.TypeError):
        em.f32[1.5]
    with pytest.raises(em.TypeError):
        em.f32[-1]
    assert em.f32(3) == 3.0 and em.i32(2.7) == 2


def test_traced_node_reads_its_attributes():
    """The binding's Node reads every attribute it exposes (its name is a ThinString in C++:
    returned as a str, not an unconvertible C++ type)."""
    t = em._ember.Tracer("p")
    n = t.input(em._ember.DType.f32, [4, 3], "xin")
    assert n.name == "xin" and n.op == "input" and n.dtype == "f32" and n.rank == 2
    assert n.shape == (4, 3) and n.is_memory and n.const_value is None  # (an input is a memory)
    assert repr(n).startswith("<ember.Node %")
