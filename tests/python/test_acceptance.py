"""The foundation's acceptance checks: the DESIGN §5 N-body step at N=2048 matches NumPy in one
kernel, and a new process finds the compiled kernels in the disk cache."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import ember as em
from conftest import SANITIZED


@em.compile
def nbody_step(X: em.f32["N", 3], V: em.f32["N", 3], dt: em.f32):  # noqa: F821
    d = X[:, None, :] - X[None, :, :]
    r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-4
    F = em.sum(-d / (r2 * em.sqrt(r2)), axis=1)
    V2 = V + F * dt
    return X + V2 * dt, V2


def numpy_step(X, V, dt):
    """The same step in float64 NumPy, as the reference."""
    X, V = X.astype(np.float64), V.astype(np.float64)
    d = X[:, None, :] - X[None, :, :]
    r2 = np.sum(d * d, axis=-1, keepdims=True) + 1e-4
    F = np.sum(-d / (r2 * np.sqrt(r2)), axis=1)
    V2 = V + F * dt
    return X + V2 * dt, V2


def test_nbody_2048_matches_numpy_in_one_kernel(rng, backend):
    n = 2048
    X = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    V = rng.uniform(-0.1, 0.1, (n, 3)).astype(np.float32)
    X2, V2 = nbody_step(X, V, 0.01)
    wantX, wantV = numpy_step(X, V, 0.01)
    assert nbody_step.kernel_count == 1
    np.testing.assert_allclose(V2.numpy(), wantV, rtol=1e-4, atol=1e-4 * np.abs(wantV).max())
    np.testing.assert_allclose(X2.numpy(), wantX, rtol=1e-4, atol=1e-4 * np.abs(wantX).max())


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import ember as em
    em.init(backend=sys.argv[2])

    @em.compile
    def step(X: em.f32["N", 3], V: em.f32["N", 3], dt: em.f32):
        d = X[:, None, :] - X[None, :, :]
        r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-4
        F = em.sum(-d / (r2 * em.sqrt(r2)), axis=1)
        V2 = V + F * dt
        return X + V2 * dt, V2

    X = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    step(X, X * 0.5, 0.01)
    s = step.stats
    print(json.dumps({"cache_hit": s["cache_hit"], "compile_ms": s["compile_ms"]}))
""")


def test_new_process_hits_the_disk_cache(tmp_path, backend):
    build_python = str(Path(em.__file__).resolve().parents[1])
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))

    def child():
        out = subprocess.run([sys.executable, "-c", _CHILD, build_python, backend], env=env, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    first = child()
    second = child()
    assert first["cache_hit"] is False
    if backend == "opengl" and not em._ember.opengl_info()["program_binaries"]:
        assert second["cache_hit"] is False  # a driver with no program binary format: nothing cached
        return
    assert second["cache_hit"] is True
    assert second["compile_ms"] <= (200.0 if SANITIZED else 50.0), second
