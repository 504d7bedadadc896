"""The cuda dialect without a GPU (codegen/dialect_cuda.cpp, backends/cuda/cuda_nvrtc.cpp): every
kernel of every example program, of the module-level programs of the test modules and of a
bounded set of fuzzer programs, lowered as the cuda backend lowers them (native workgroups), is
printed in the cuda dialect and compiled by NVRTC to PTX for sm_80 and sm_90. Distinct kernels
(by symbol, a hash of their text) are compiled once, batched into one NVRTC program per source
module. Also: prog.source("cuda") of a cpu-lowered program, NVRTC's errors, and the cuda backend
reporting itself unavailable without a driver. Nothing here runs a kernel."""
import importlib
import os
import re
import subprocess
import sys
import textwrap

import pytest

import ember as em
from gpu_test_helpers import BUILD_PYTHON, EXAMPLE_PROGRAMS, _takes_objects

_C = em._ember
ARCHS = (80, 90)
# Test modules whose module-level programs join the corpus (workgroups, atomics, index modes...).
TEST_MODULES = ("test_group", "test_programs", "test_algorithms", "test_elementwise", "test_index_modes",
                "test_shape_ops", "test_regressions", "test_dependence", "test_hoist_invariants", "test_matmul_packed")
FUZZ_SEEDS = range(40)

pytestmark = pytest.mark.skipif(not _C._nvrtc_built(), reason="this Ember was built without NVRTC (EMBER_WITH_CUDA)")


def _traced(prog):
    """The tracer of `prog`'s program (traced again when a compile took the last one)."""
    prog._trace()
    if prog._tracer is None:
        prog._traced_text = None
        prog._trace()
    return prog._tracer


def _module_programs(mod):
    return [(name, p) for name, p in sorted(vars(mod).items()) if isinstance(p, em.Program) and not _takes_objects(p)]


def _collect(programs, kernels, label):
    """Adds the distinct cuda kernels of `programs` [(name, prog)] to `kernels` {symbol: text};
    returns how many programs were printed."""
    n = 0
    for name, prog in programs:
        for symbol, text in _C._cuda_kernels(_traced(prog)):
            assert text.startswith("// kernel ["), f"{label}.{name}: {text[:200]}"
            assert 'extern "C" __global__ void __launch_bounds__(' in text and f") {symbol}(const EmberArgs<" in text
            kernels.setdefault(symbol, text)
        n += 1
    return n


def _nvrtc(kernels, label):
    """Compiles {symbol: text} as one translation unit for every arch; checks each kernel is a
    PTX entry. Returns the number of kernels compiled."""
    if not kernels:
        return 0
    unit = _C._cuda_translation_unit(list(kernels.values()))
    for arch in ARCHS:
        ptx, log, _ = _C._nvrtc_compile(unit, f"{label}.cu", arch)
        text = ptx.decode(errors="replace")
        assert f".target sm_{arch}" in text, text[:400]
        entries = set(re.findall(r"\.entry\s+(ember_[0-9a-f]{16})\b", text))
        assert entries == set(kernels), f"{label} sm_{arch}: entries {sorted(entries ^ set(kernels))} differ\n{log}"
    return len(kernels)


def test_every_example_kernel_compiles_with_nvrtc():
    from test_examples import example
    seen, total, programs = set(), 0, 0
    for name in EXAMPLE_PROGRAMS:
        kernels = {}
        programs += _collect(_module_programs(example(name)), kernels, name)
        fresh = {s: t for s, t in kernels.items() if s not in seen}
        total += _nvrtc(fresh, f"example_{name}")
        seen |= set(fresh)
    assert programs >= len(EXAMPLE_PROGRAMS) and total >= len(EXAMPLE_PROGRAMS)
    print(f"\nexamples: {programs} programs, {total} distinct kernels compiled for sm_80 and sm_90")


def test_every_test_program_kernel_compiles_with_nvrtc():
    total = grouped = 0
    for modname in TEST_MODULES:
        mod = importlib.import_module(modname)
        kernels = {}
        _collect(_module_programs(mod), kernels, modname)
        grouped += sum("__syncthreads();" in t for t in kernels.values())
        total += _nvrtc(kernels, modname)
    assert total > 0 and grouped > 0  # test_group's workgroups are native: shared memory and barriers
    print(f"\ntest modules: {total} distinct kernels ({grouped} with barriers) compiled for sm_80 and sm_90")


def test_fuzzer_program_kernels_compile_with_nvrtc():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests.fuzz import gen, run
    kernels = {}
    for seed in FUZZ_SEEDS:
        prog = run.load(gen.generate(seed))
        try:
            _traced(prog)
        except em.Error:
            continue  # a program the generator meant to fail at trace time
        _collect([(f"seed{seed}", prog)], kernels, "fuzz")
    n = _nvrtc(kernels, "fuzz")
    assert n >= len(FUZZ_SEEDS) // 2
    print(f"\nfuzz seeds {FUZZ_SEEDS.start}-{FUZZ_SEEDS.stop - 1}: {n} distinct kernels compiled for sm_80 and sm_90")


def test_source_cuda_of_a_cpu_program_compiles_and_shows_the_dialect():
    em.init("cpu")

    @em.compile
    def hist(x: em.f32["N"], lo: em.f32):  # noqa: F821
        h = em.zeros(16, em.f32)
        m = em.zeros(1, em.f32)
        c = em.zeros(4, em.i32)
        with em.kernel(x.shape) as i:
            b = em.cast(em.clamp(x[i] * 16.0, 0.0, 15.0), em.i32)
            em.atomic_add(h[b], 1.0)
            em.atomic_max(m[0], x[i])
            em.atomic_min(c[b % 4], b)
        return h, m, c, em.sqrt(em.abs(x)) + em.sin(x) * lo

    src = hist.source("cuda")
    assert src.startswith("// Generated by Ember (cuda dialect)")
    assert "atomicAdd(&" in src and "ember_atomic_cas_f32(" in src and "EmberFmax()" in src and "atomicMin(&" in src
    assert "long long" in src and "blockIdx.x" in src
    ptx, _, _ = _C._nvrtc_compile(src, "hist.cu", 90)
    assert b".entry" in ptx


def test_nvrtc_reports_compile_errors_and_unknown_archs():
    with pytest.raises(em.CompileError, match="NVRTC could not compile bad.cu for sm_80"):
        _C._nvrtc_compile('extern "C" __global__ void k() { undeclared(); }', "bad.cu", 80)
    with pytest.raises(em.BackendError, match="cannot compile for sm_11"):
        _C._nvrtc_compile('extern "C" __global__ void k() {}', "k.cu", 11)
    assert 80 in _C._nvrtc_archs() and 90 in _C._nvrtc_archs()
    assert re.fullmatch(r"\d+\.\d+", _C._nvrtc_version())


def test_cuda_backend_without_a_driver_raises_backend_error():
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import ember as em
        try:
            em.init("cuda")
        except em.BackendError as e:
            print("BackendError:", e)
        print("auto ->", em._ember.resolve_backend("auto"))
    """)
    env = dict(os.environ, EMBER_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    r = subprocess.run([sys.executable, "-c", code, BUILD_PYTHON], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "BackendError: ember: CUDA is not available: the NVIDIA driver library /nonexistent/libcuda.so.1 could " \
           "not be loaded" in r.stdout, r.stdout
    assert "auto -> cuda" not in r.stdout
