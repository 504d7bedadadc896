"""The Vulkan backends from Python: em.init / em.device_info, "auto", a clear error without a
driver, GLSL and HLSL sources (every kernel of the examples through glslangValidator), memory
semantics (inputs written back, results fed back without a copy), EMBER_DEBUG=time, and the
N-body and fluid examples agreeing across cpu, vulkan and vulkan-hlsl."""
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import ember as em
from conftest import _unavailable
from gpu_test_helpers import (BUILD_PYTHON, EXAMPLE_PROGRAMS, check_example_kernels,  # noqa: F401 (imported by others)
                              check_inputs_written_back_and_results_stay_on_the_device, nbody_and_fluid, need,
                              rel_close, run_child, run_debug_time_child)
from gpu_test_helpers import shaders as _shaders  # noqa: F401 (imported by others)

GPU_BACKENDS = ("vulkan", "vulkan-hlsl")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(params=GPU_BACKENDS)
def gpu(request):
    need(request.param)
    em.init(backend=request.param)
    yield request.param


def test_init_and_device_info(gpu):
    assert em.backend() == gpu
    info = em.device_info()
    assert re.search(r" via Vulkan \d+\.\d+$", info), info
    em.init(backend="cpu")
    assert "threads" in em.device_info()


def test_auto_prefers_a_gpu_vulkan_device_only():
    need("vulkan")
    em.init(backend="vulkan")
    info = em.device_info()
    em.init(backend="auto")
    cpu_device = any(k in info for k in ("llvmpipe", "lavapipe", "SwiftShader"))
    assert em.backend() == ("cpu" if cpu_device else "vulkan"), (em.backend(), info)


def test_no_vulkan_driver_is_a_clear_backend_error():
    need("vulkan")
    proc = run_child("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import ember as em
        try:
            em.init(backend="vulkan")
            print("no error")
        except em.BackendError as e:
            print("BackendError:", e)
    """, env={"VK_ICD_FILENAMES": "/nonexistent/ember.json", "VK_DRIVER_FILES": "/nonexistent/ember.json"})
    assert proc.returncode == 0, proc.stderr
    assert "BackendError: ember: no Vulkan" in proc.stdout, proc.stdout


@em.compile
def _saxpy_hist(X: em.f32["N"], Y: em.f32["N"], a: em.f32):  # noqa: F821
    H = em.zeros(8, em.i32)
    with em.kernel(X.shape[0]) as i:
        em.atomic_add(H[em.i32(em.abs(X[i]) * 7.99)], 1)
    return a * X + Y, H


def test_sources(gpu):
    X = np.linspace(-1, 1, 100).astype(np.float32)
    out, H = _saxpy_hist(X, X, 2.0)
    np.testing.assert_allclose(out.numpy(), 3 * X, rtol=1e-6)
    np.testing.assert_array_equal(H.numpy(), np.bincount((np.abs(X) * 7.99).astype(np.int32), minlength=8))
    glsl, hlsl = _saxpy_hist.source("glsl"), _saxpy_hist.source("hlsl")
    assert glsl.count("#version 450") == _saxpy_hist.kernel_count == glsl.count("void main()")
    assert "layout(push_constant) uniform EmberPush" in glsl and "atomicAdd(" in glsl
    assert hlsl.count("[numthreads(64, 1, 1)]") == _saxpy_hist.kernel_count
    assert "[[vk::binding(0, 0)]] RWStructuredBuffer<uint> m0;" in hlsl and "[[vk::push_constant]]" in hlsl
    assert "InterlockedAdd(" in hlsl
    assert _saxpy_hist.source() == (glsl if gpu == "vulkan" else hlsl)
    assert "#pragma omp" in _saxpy_hist.source("cpp")


@pytest.mark.parametrize("lang", ["glsl", "hlsl"])
def test_every_example_kernel_passes_glslang_validator(lang, tmp_path):
    def commands(files):
        if lang == "hlsl":  # the entry point is each kernel's own symbol: one process per file
            return [["glslangValidator", "-V", "-D", "-S", "comp", "-e", symbol, path, "-o", f"{path}.spv"]
                    for path, symbol in files]
        if shutil.which("glslc"):  # each file its own module, its SPIR-V beside it
            return [["glslc", "-c", *(path for path, _ in files)]]
        return [["glslangValidator", "-V", path, "-o", f"{path}.spv"] for path, _ in files]  # -V links several

    check_example_kernels(tmp_path, lambda prog: prog.source(lang), "comp" if lang == "glsl" else "hlsl", commands)


def test_inputs_written_back_and_results_stay_on_the_device(gpu):
    check_inputs_written_back_and_results_stay_on_the_device()


def test_debug_time_shows_per_shader_compile_times(tmp_path):
    need("vulkan")
    stderr = run_debug_time_child("vulkan", tmp_path)
    assert re.search(r"ember: shader ember_[0-9a-f]{16} +glsl->spirv +[0-9.]+ ms \(compiled\), pipeline +[0-9.]+ ms "
                     r"\[\+[0-9.]+ -> \+[0-9.]+ ms\], 1 kernel\n", stderr), stderr


def test_nbody_and_fluid_agree_across_backends(rng):
    backends = ["cpu"] + [b for b in GPU_BACKENDS if not _unavailable(b)]
    if len(backends) == 1:
        pytest.skip(f"no Vulkan device: {_unavailable('vulkan')}")
    results = nbody_and_fluid(rng, backends)
    for b in backends[1:]:
        for what, got, want in zip(("X", "V", "U", "V(fluid)", "D"), results[b], results["cpu"]):
            rel_close(got, want)
