"""DLPack both ways on the CPU (python/ember/_dlpack.py, python/src/bind_dlpack.cpp): em.from_dlpack
over NumPy arrays and PyTorch CPU tensors without a copy, em.Tensor.__dlpack__ with the current
specification's max_version / copy / dl_device, aliasing (a write on one side is seen on the
other), lifetime (either side outlives the other), and the errors for what cannot be shared.
PyTorch runs in a child Python that has it (this one, .venv-bench/bin/python at the repository
root, or $EMBER_TORCH_PYTHON); the test is skipped where none has it."""
import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember as em
from gpu_test_helpers import BUILD_PYTHON

_C = em._ember


@pytest.fixture(autouse=True)
def _cpu():
    em.init("cpu")


def test_from_numpy_aliases_both_ways(rng):
    a = rng.normal(size=(3, 5)).astype(np.float32)
    t = em.from_dlpack(a)
    assert t.shape == (3, 5) and t.dtype == em.f32 and t._data_ptr == a.ctypes.data
    a[1, 2] = 42.5
    assert t.numpy()[1, 2] == 42.5
    t.view_numpy()[2, 4] = -3.25
    assert a[2, 4] == -3.25
    np.testing.assert_array_equal(t.numpy(), a)


@pytest.mark.parametrize("dt,em_dt", [(np.int32, em.i32), (np.uint32, em.u32)])
def test_from_numpy_integer_dtypes(rng, dt, em_dt):
    a = rng.integers(0, 1000, size=7).astype(dt)
    t = em.from_dlpack(a)
    assert t.dtype == em_dt and t._data_ptr == a.ctypes.data
    np.testing.assert_array_equal(t.numpy(), a)


def test_from_dlpack_tensor_runs_in_a_program_and_writes_land_in_numpy(rng):
    @em.compile
    def scale(x: em.f32["N"], s: em.f32):  # noqa: F821
        with em.kernel(x.shape) as i:
            x[i] = x[i] * s

    a = rng.normal(size=100).astype(np.float32)
    want = a * np.float32(1.5)
    scale(em.from_dlpack(a), 1.5)
    np.testing.assert_allclose(a, want, rtol=1e-6)


def test_lifetime_the_tensor_keeps_the_producer_alive(rng):
    def make():
        a = rng.normal(size=4096).astype(np.float32)
        return em.from_dlpack(a), a.copy()

    t, want = make()
    gc.collect()
    junk = [np.full(4096, 7.0, np.float32) for _ in range(64)]  # would reuse freed memory
    np.testing.assert_array_equal(t.numpy(), want)
    del junk


def test_lifetime_an_export_keeps_the_tensor_alive(rng):
    a = rng.normal(size=(64, 64)).astype(np.float32)
    t = em.tensor(a)
    v = np.from_dlpack(t)
    del t
    gc.collect()
    junk = [em.tensor(np.full((64, 64), 9.0, np.float32)) for _ in range(32)]
    np.testing.assert_array_equal(v, a)
    del junk


def test_export_alias_and_versioned_capsule(rng):
    t = em.tensor(rng.normal(size=6).astype(np.float32))
    v = np.from_dlpack(t)
    assert t.__dlpack_device__() == (1, 0)
    t.view_numpy()[3] = 11.0
    assert v[3] == 11.0
    legacy = t.__dlpack__()
    versioned = t.__dlpack__(max_version=(1, 1))
    assert "dltensor" in repr(legacy) and "dltensor_versioned" in repr(versioned)
    # A versioned capsule round-trips through em.from_dlpack without a copy.
    back = _C._dlpack_import(t.__dlpack__(max_version=(1, 0)), 0)
    assert back._data_ptr == t._data_ptr
    copied = _C._dlpack_import(t.__dlpack__(max_version=(1, 0), copy=True), -1)
    assert copied._data_ptr != t._data_ptr
    np.testing.assert_array_equal(copied.numpy(), t.numpy())
    with pytest.raises(BufferError, match="not \\(2, 0\\)"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream must be None"):
        t.__dlpack__(stream=1)


def test_em_tensor_through_from_dlpack_aliases(rng):
    t = em.tensor(rng.normal(size=5).astype(np.float32))
    u = em.from_dlpack(t)
    assert u._data_ptr == t._data_ptr
    assert em.from_dlpack(t, copy=True)._data_ptr != t._data_ptr


def test_copies_and_refusals(rng):
    b = rng.random(9) > 0.5
    try:
        b.__dlpack__()
    except BufferError:  # NumPy 1.x exports no bool arrays (PyTorch's bool: the test below)
        with pytest.raises(em.TypeError, match="cannot export this tensor through DLPack"):
            em.from_dlpack(b)
    else:
        tb = em.from_dlpack(b)  # bool bytes become words: a copy
        assert tb.dtype == em.bool
        np.testing.assert_array_equal(tb.numpy(), b)
        with pytest.raises(em.TypeError, match="bool elements are bytes"):
            em.from_dlpack(b, copy=False)
    s = rng.normal(size=(4, 6)).astype(np.float32)[:, ::2]
    ts = em.from_dlpack(s)
    np.testing.assert_array_equal(ts.numpy(), s)
    with pytest.raises(em.TypeError, match="not row-major contiguous"):
        em.from_dlpack(s, copy=False)
    with pytest.raises(em.TypeError, match="float64 has no em dtype"):
        em.from_dlpack(rng.normal(size=3))
    with pytest.raises(em.TypeError, match="has no __dlpack__"):
        em.from_dlpack([1.0, 2.0])
    with pytest.raises(em.TypeError, match="copy must be None, True or False"):
        em.from_dlpack(s, copy="yes")
    c = rng.normal(size=3).astype(np.float32)
    tc = em.from_dlpack(c, copy=True)
    c[0] = 5.0
    assert tc.numpy()[0] != 5.0


def _torch_python():
    try:
        import torch  # noqa: F401
        return sys.executable
    except ImportError:
        pass
    for p in (os.environ.get("EMBER_TORCH_PYTHON", ""), str(Path(__file__).resolve().parents[2] / ".venv-bench/bin/python")):
        if p and os.path.exists(p):
            return p
    return None


def test_pytorch_cpu_tensors_alias_both_ways():
    py = _torch_python()
    if not py:
        pytest.skip("no Python with PyTorch here (tools/bootstrap-bench makes .venv-bench; or set EMBER_TORCH_PYTHON)")
    code = textwrap.dedent("""
        import gc, sys
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        try:
            import torch
        except ImportError:
            print("NO TORCH"); sys.exit(0)
        import ember as em
        em.init("cpu")
        g = torch.Generator().manual_seed(1)
        x = torch.randn(4, 8, generator=g)
        t = em.from_dlpack(x)                     # torch -> em, zero-copy (versioned capsule)
        assert t._data_ptr == x.data_ptr()
        x[1, 3] = 123.0
        assert t.numpy()[1, 3] == 123.0
        t.view_numpy()[0, 0] = -7.0
        assert float(x[0, 0]) == -7.0
        y = torch.from_dlpack(t)                  # em -> torch, zero-copy
        assert y.data_ptr() == t._data_ptr
        y[2, 2] = 5.5
        assert t.numpy()[2, 2] == 5.5
        want = x.clone()
        del x; gc.collect()                        # the em tensor keeps torch's storage alive
        junk = [torch.full((4, 8), 3.0) for _ in range(64)]
        assert np.array_equal(t.numpy(), want.numpy())
        u = em.tensor(np.arange(6, dtype=np.int32))
        z = torch.from_dlpack(u); del u; gc.collect()
        junk2 = [em.tensor(np.full(6, 9, np.int32)) for _ in range(32)]
        assert z.tolist() == [0, 1, 2, 3, 4, 5] and z.dtype == torch.int32
        try:
            em.from_dlpack(torch.randn(3, dtype=torch.float64))
        except em.TypeError as e:
            assert "float64 has no em dtype" in str(e)
        else:
            raise AssertionError("float64 was accepted")
        tb = em.from_dlpack(torch.tensor([True, False, True]))   # bool bytes: copied into words
        assert tb.dtype == em.bool and tb.numpy().tolist() == [True, False, True]
        try:
            em.from_dlpack(torch.tensor([True]), copy=False)
        except em.TypeError as e:
            assert "bool elements are bytes" in str(e)
        else:
            raise AssertionError("a bool tensor was shared without a copy")
        tt = em.from_dlpack(torch.arange(12, dtype=torch.float32).reshape(3, 4).t())  # strided: copied
        assert tt.numpy().tolist() == torch.arange(12.).reshape(3, 4).t().tolist()
        print("OK", torch.__version__)
    """)
    r = subprocess.run([py, "-c", code, BUILD_PYTHON], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if "NO TORCH" in r.stdout:
        pytest.skip(f"{py} has no PyTorch")
    assert "OK" in r.stdout, r.stdout + r.stderr


def test_pytorch_cuda_tensors_alias_both_ways():
    """On a CUDA machine: a cuda-backend result exported to PyTorch as kDLCUDA without a copy, each
    side's writes seen by the other, PyTorch's tensor outliving Ember's; a PyTorch device tensor
    (plain device memory, not host-addressable) is refused by em.from_dlpack with BackendError."""
    reason = _C.backend_unavailable("cuda") if "cuda" in em._program._BUILT_BACKENDS else "not built"
    if reason:
        pytest.skip(f"backend cuda unavailable: {reason}")
    py = _torch_python()
    if not py:
        pytest.skip("no Python with PyTorch here (or set EMBER_TORCH_PYTHON)")
    code = textwrap.dedent("""
        import gc, sys
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        import torch
        if not torch.cuda.is_available():
            print("NO TORCH CUDA"); sys.exit(0)
        import ember as em
        em.init("cuda")

        @em.compile
        def twice(x: em.f32["N"]):  # noqa: F821
            return x * 2.0

        @em.compile
        def bump(x: em.f32["N"]):  # noqa: F821
            with em.kernel(x.shape) as i:
                x[i] = x[i] + 1.0

        a = np.random.default_rng(3).integers(-1000, 1000, size=1000).astype(np.float32)  # sums stay exact
        t = twice(a)
        assert t.__dlpack_device__() == (2, 0), t.__dlpack_device__()
        y = torch.from_dlpack(t)                       # em -> torch, zero-copy on the GPU
        assert y.device.type == "cuda" and y.data_ptr() == t._data_ptr
        assert np.array_equal(y.cpu().numpy(), a * 2)
        y.add_(1.0); torch.cuda.synchronize()          # torch writes, Ember sees
        assert np.array_equal(t.numpy(), a * 2 + 1)
        bump(t)                                        # Ember writes (its run ends synchronized), torch sees
        assert np.array_equal(y.cpu().numpy(), a * 2 + 2)
        del t; gc.collect()                            # torch's tensor keeps Ember's buffer alive
        junk = [twice(a) for _ in range(16)]
        assert np.array_equal(y.cpu().numpy(), a * 2 + 2)
        try:
            em.from_dlpack(torch.ones(4, device="cuda"))
        except em.BackendError as e:
            assert "kDLCUDA" in str(e), e
        else:
            raise AssertionError("a CUDA device tensor was accepted")
        print("OK", torch.__version__, torch.cuda.get_device_name())
    """)
    r = subprocess.run([py, "-c", code, BUILD_PYTHON], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if "NO TORCH CUDA" in r.stdout:
        pytest.skip(f"{py}'s PyTorch has no CUDA device")
    assert "OK" in r.stdout, r.stdout + r.stderr
