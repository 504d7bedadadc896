"""The OpenGL backend from Python: em.init / em.device_info naming the GL renderer, both context
paths (EGL surfaceless without a display; a hidden GLFW window under Xvfb), a clear error without
a driver, program binaries in the disk cache (and nothing cached when the driver has no binary
format), EMBER_DEBUG=time, memory semantics, every example kernel as the backend prints it
through glslangValidator, and N-body and fluid agreeing with cpu within 1e-4 relative. The whole
suite also runs on opengl through the `backend` fixture."""
import re
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember as em
from gpu_test_helpers import (BUILD_PYTHON, check_example_kernels,  # noqa: F401 (imported by others)
                              check_inputs_written_back_and_results_stay_on_the_device, nbody_and_fluid, need,
                              rel_close, run_child, run_debug_time_child)


@pytest.fixture
def gl():
    need("opengl")
    em.init(backend="opengl")
    yield em._ember.opengl_info()


_SAXPY = """
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np, ember as em
    em.init(backend="opengl")

    @em.compile
    def f(X: em.f32["N"], a: em.f32):
        return em.sin(X) * a
    X = np.linspace(-3, 3, 1000).astype(np.float32)
    err = float(np.abs(f(X, 2.0).numpy() - np.sin(X) * 2).max())
    print(em.device_info())
    print("max error", err)
"""


def test_init_and_device_info(gl):
    assert em.backend() == "opengl"
    info = em.device_info()
    assert info.startswith(gl["renderer"] + " via OpenGL 4."), info
    assert info.endswith(", EGL surfaceless" if gl["context"] == "egl" else ", GLFW hidden window"), info
    em.init(backend="cpu")
    assert "threads" in em.device_info()


def test_egl_surfaceless_without_a_display(gl, tmp_path):
    # No C++ compiler runs on the OpenGL path: one that always fails changes nothing.
    proc = run_child(_SAXPY, env={"EMBER_CXX": "/bin/false", "EMBER_CACHE_DIR": str(tmp_path)},
                     unset=("DISPLAY", "WAYLAND_DISPLAY", "EMBER_OPENGL_CONTEXT"))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r" via OpenGL 4\.\d.*, EGL surfaceless\n", proc.stdout), proc.stdout
    assert float(proc.stdout.split("max error")[1]) < 1e-5, proc.stdout


def test_hidden_glfw_window_under_xvfb(gl):
    if not shutil.which("xvfb-run"):
        pytest.skip("xvfb-run is not installed (Debian: xvfb, xauth)")
    proc = run_child(_SAXPY, unset=("EMBER_OPENGL_CONTEXT",),
                     prefix=("xvfb-run", "-a", "-s", "-screen 0 1280x720x24"))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r" via OpenGL 4\.\d.*, GLFW hidden window\n", proc.stdout), proc.stdout
    assert float(proc.stdout.split("max error")[1]) < 1e-5, proc.stdout


def test_no_gl_driver_is_a_clear_backend_error(gl):
    proc = run_child("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import ember as em
        for _ in range(2):  # the reason is kept, not retried
            try:
                em.init(backend="opengl")
                print("no error")
            except em.BackendError as e:
                print("BackendError:", e)
        print(em.backend())
    """, env={"__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/ember.json"}, unset=("DISPLAY", "WAYLAND_DISPLAY"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("BackendError: ember: OpenGL via EGL") and lines[1] == lines[0], proc.stdout
    assert lines[2] == "cpu", proc.stdout
    # Forcing GLFW without a display says so.
    proc = run_child(_SAXPY, env={"EMBER_OPENGL_CONTEXT": "glfw"}, unset=("DISPLAY", "WAYLAND_DISPLAY"))
    assert proc.returncode != 0 and "ember.BackendError: ember: OpenGL via GLFW" in proc.stderr, proc.stderr


_NBODY_CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import ember as em
    em.init(backend="opengl")
    sys.path.insert(0, sys.argv[2])
    from test_acceptance import nbody_step
    X = np.random.default_rng(0).uniform(-1, 1, (256, 3)).astype(np.float32)
    t = time.perf_counter()
    Y, V = nbody_step(X, X * 0.5, 0.01)
    Y.numpy()
    s = nbody_step.stats
    print(json.dumps({"cache_hit": s["cache_hit"], "compile_ms": s["compile_ms"],
                      "first_call_ms": 1e3 * (time.perf_counter() - t)}))
""")


def test_program_binaries_cached_or_nothing(gl, tmp_path):
    """A new process loads the program binaries the first one wrote; with binaries off (as on a
    driver with no binary format) nothing is written and the second process compiles again."""
    tests_dir = str(Path(__file__).resolve().parent)

    def child(cache, **env):
        proc = run_child(_NBODY_CHILD, tests_dir, env=dict(env, EMBER_CACHE_DIR=str(cache), EMBER_LOG="info"))
        assert proc.returncode == 0, proc.stderr
        return __import__("json").loads(proc.stdout.strip().splitlines()[-1]), proc.stderr

    if gl["program_binaries"]:
        first, _ = child(tmp_path / "on")
        second, _ = child(tmp_path / "on")
        assert (first["cache_hit"], second["cache_hit"]) == (False, True)
        assert list((tmp_path / "on").glob("gl-*.glbin"))
    first, log = child(tmp_path / "off", EMBER_OPENGL_PROGRAM_BINARY="0")
    second, _ = child(tmp_path / "off", EMBER_OPENGL_PROGRAM_BINARY="0")
    assert (first["cache_hit"], second["cache_hit"]) == (False, False)
    assert "compiled programs are not cached on disk" in log, log
    # No shader artifact (the lowered program, `prog-*`, and the trace entry, `trace-*`, belong to
    # the program and trace caches and are kept either way).
    left = [p for p in (tmp_path / "off").glob("*") if not p.name.startswith(("prog-", "trace-"))]
    assert not left, left


def test_debug_time_shows_per_shader_times(gl, tmp_path):
    stderr = run_debug_time_child("opengl", tmp_path)
    assert re.search(r"ember: shader ember_[0-9a-f]{16} +glsl->program +[0-9.]+ ms \(compiled\) "
                     r"\[\+[0-9.]+ -> \+[0-9.]+ ms\], 1 kernel\n", stderr), stderr
    assert re.search(r"ember: shader ember_[0-9a-f]{16} +first dispatch +[0-9.]+ ms \(10 threads\)", stderr), stderr


def test_inputs_written_back_and_results_stay_on_the_device(gl):
    check_inputs_written_back_and_results_stay_on_the_device()


def test_float_atomics_native_and_compare_and_swap(gl):
    @em.compile
    def hist(X: em.f32["N"]):  # noqa: F821
        H = em.zeros(16, em.f32)
        with em.kernel(X.shape[0]) as i:
            em.atomic_add(H[em.i32(em.abs(X[i]) * 15.99)], em.floor(X[i] * 4.0))
        return H

    X = np.linspace(-1, 1, 4001).astype(np.float32)
    want = np.zeros(16, np.float32)
    np.add.at(want, (np.abs(X) * 15.99).astype(np.int32), np.floor(X * 4))
    np.testing.assert_array_equal(hist(X).numpy(), want)
    src = hist.source()
    assert ("GL_NV_shader_atomic_float" in src) == gl["float_atomic_add"], src[:300]
    assert "layout(std140, binding = 0) uniform EmberParams" in src


def test_every_example_kernel_passes_glslang_validator(gl, tmp_path):
    """Each example's kernels exactly as the OpenGL backend gives them to the driver."""
    check_example_kernels(tmp_path, lambda prog: prog.source(), "comp",
                          lambda files: [["glslangValidator", *(path for path, _ in files)]], first_line="dialect, OpenGL",
                          validator_lacks=("GL_NV_shader_atomic_float",))


def test_nbody_and_fluid_agree_with_cpu(gl, rng):
    results = nbody_and_fluid(rng, ("cpu", "opengl"))
    for what, got, want in zip(("X", "V", "U", "V(fluid)", "D"), results["opengl"], results["cpu"]):
        rel_close(got, want)


def test_programs_from_several_threads(gl):
    """Runs hold the context one at a time (made current on the calling thread, released after),
    so Python threads may run programs and drop tensors concurrently."""
    import threading

    @em.compile
    def axpy(X: em.f32["N"], a: em.f32):  # noqa: F821
        return X * a + 1.0

    X = np.arange(1000, dtype=np.float32)
    errors = []

    def work(k):
        try:
            for i in range(40):
                Y = axpy(X, float(k + i))
                np.testing.assert_array_equal(Y.numpy(), X * np.float32(k + i) + 1)
                del Y  # freed on this thread, maybe while another one runs
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
