"""Scale-out with MPI (Debian python3-mpi4py + Open MPI): em.Tensor's zero-copy views (DLPack,
view_numpy), tensors handed to mpi4py as they are under `mpirun -n 2`, and the two examples:
examples/distributed_fluid.py equal bit for bit to the single-process fluid with 1, 2 and 4 ranks
and examples/distributed_train.py equal to one process on the whole batch. mpirun runs on this
machine only (shared memory between the ranks: --mca btl self,vader)."""
import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember as em

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BUILD_PYTHON = str(Path(em.__file__).resolve().parents[1])


def test_dlpack_and_view_numpy_alias_the_tensor(rng):
    a = rng.standard_normal((5, 9)).astype(np.float32)
    t = em.tensor(a)
    d = np.from_dlpack(t)
    assert t.__dlpack_device__() == (1, 0)
    assert d.ctypes.data == t._data_ptr and d.dtype == np.float32 and d.shape == (5, 9)
    v = t.view_numpy()
    assert v.ctypes.data == t._data_ptr and v.flags.writeable
    v[2, 3] = 42.0
    assert t.numpy()[2, 3] == 42.0 and d[2, 3] == 42.0
    # The view keeps the tensor's memory alive.
    w = em.tensor(a).view_numpy()
    gc.collect()
    np.testing.assert_array_equal(w, a)
    # i32 and bool (exported as its uint32 words).
    i = em.tensor(rng.integers(-9, 9, 11).astype(np.int32))
    assert np.from_dlpack(i).dtype == np.int32
    np.testing.assert_array_equal(np.from_dlpack(i), i.numpy())
    m = rng.random(12) > 0.5
    bv = em.tensor(m).view_numpy()
    assert bv.dtype == np.uint32
    np.testing.assert_array_equal(bv, m.astype(np.uint32))
    # np.asarray stays a copy (no buffer protocol), with bool as bool.
    assert np.asarray(em.tensor(m)).dtype == np.bool_
    c = np.asarray(t)
    c[0, 0] = -1.0
    assert t.numpy()[0, 0] != -1.0


def test_program_outputs_and_inputs_alias_through_views(rng):
    @em.compile
    def bump(x: em.f32["N"]):  # noqa: F821
        x[...] = x + 1.0
        return x * 2.0

    x = em.tensor(rng.standard_normal(64).astype(np.float32))
    view = x.view_numpy()
    before = view.copy()
    y = bump(x)
    np.testing.assert_array_equal(view, before + 1)  # the in-place write shows through the view
    np.testing.assert_array_equal(np.from_dlpack(y), (before + 1) * 2)


def mpi_env():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([BUILD_PYTHON, os.environ.get("PYTHONPATH", "")]),
               OMPI_MCA_btl="self,vader", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    if os.geteuid() == 0:  # Open MPI refuses root without both
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def mpirun(n, script, *args, timeout=300):
    """Runs `script` with n ranks (n == 1: plain python, MPI initialised as a singleton); stdout."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (Debian: python3-mpi4py; see tools/bootstrap)")
    cmd = [sys.executable, str(script), *args]
    if n > 1:
        exe = shutil.which("mpirun")
        if not exe:
            pytest.skip("mpirun is not installed (Debian: openmpi-bin; see tools/bootstrap)")
        cmd = [exe, "-n", str(n), "--oversubscribe", "--bind-to", "none"] + cmd
    r = subprocess.run(cmd, cwd=Path(script).parent, env=mpi_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_tensors_go_to_mpi4py_without_copies():
    out = mpirun(2, HERE / "mpi_buffers_check.py")
    assert "ok 0" in out and "ok 1" in out


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_distributed_fluid_equals_one_process(ranks):
    out = mpirun(ranks, REPO / "examples" / "distributed_fluid.py", "--size", "64", "--steps", "12", "--iters", "8",
                 "--check")
    assert f"{ranks} rank(s), 64x64" in out and "bitwise equal" in out and "NOT" not in out, out


def test_distributed_train_equals_whole_batch():
    out = mpirun(2, REPO / "examples" / "distributed_train.py", "--steps", "8", "--batch", "64", "--check",
                 "--tol", "1e-5")
    assert "2 rank(s): 8 steps of batch 64" in out, out
    diff = float(out.split("max |parameter difference| ")[1].split()[0])
    assert diff <= 1e-5, out
