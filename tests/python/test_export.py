"""em.export (docs/export.md): the manifest validated against the shipped JSON Schema, every
exported file checked by an independent compiler (glslangValidator for GLSL and, through its HLSL
front end, HLSL; spirv-val for SPIR-V; g++ -fopenmp -c for C++), byte-identical re-exports,
golden manifests and shaders for the N-body and fluid steps (EMBER_UPDATE_GOLDEN=1 rewrites
them), and the error cases. The exported C++ kernels are also run through the manifest's plan by
a small independent plan runner (export_plan_runner.py) and compared with Ember's own results."""
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember.export import SCHEMA_PATH

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GOLDEN = REPO / "tests" / "golden" / "export"
TARGETS = ("spirv", "glsl", "hlsl", "cpp")


@functools.lru_cache(maxsize=None)
def example(name):
    """Imports examples/<name>.py as a module."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"ember_export_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


G = 64  # threads per group of the grouped kernel


@em.compile
def block_sum(X: em.f32["N"]):  # noqa: F821
    """Sums of blocks of G elements: group shared memory and barriers."""
    n = X.shape[0]
    out = em.zeros(((n + G - 1) // G,), em.f32)
    with em.kernel(n, group=G) as i:
        buf = em.group_buffer(G, em.f32)
        l = em.local_index()
        buf[l] = X[i]
        em.barrier()
        with em.loop(6) as k:
            s = (G // 2) >> k
            with em.if_((l < s) & (i + s < n)):
                buf[l] = buf[l] + buf[l + s]
            em.barrier()
        with em.if_(l == 0):
            out[em.group_index()] = buf[0]
    return out


def programs():
    """name -> (program, example args (for fixing dims), a function of rng giving call args)."""
    nbody, fluid, bitonic = example("nbody"), example("fluid"), example("bitonic_sort")
    return {
        "nbody": (nbody.step, lambda r: (r.uniform(-4, 4, (96, 3)).astype(np.float32),
                                         r.normal(0, 1, (96, 3)).astype(np.float32), 0.01)),
        "fluid": (fluid.fluid_step, lambda r: (r.uniform(-1, 1, (16, 24)).astype(np.float32),
                                               r.uniform(-1, 1, (16, 24)).astype(np.float32),
                                               r.uniform(0, 1, (16, 24)).astype(np.float32), 0.5, 7)),
        "bitonic": (bitonic.bitonic_sort, lambda r: (r.integers(-1000, 1000, 256).astype(np.int32),)),
        "block_sum": (block_sum, lambda r: (r.uniform(-1, 1, 1000).astype(np.float32),)),
    }


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}"
    return r


def validate(manifest):
    import jsonschema
    schema = json.loads(Path(SCHEMA_PATH).read_text())
    jsonschema.Draft202012Validator(schema).validate(manifest)


def check_files(out, manifest, tmp_path):
    """Every exported kernel file through its independent checker."""
    target = manifest["target"]
    checked = set()
    for k in manifest["kernels"]:
        if k["file"] in checked:
            continue
        checked.add(k["file"])
        f, src = out / k["file"], out / k["source"]
        if target == "spirv":
            run(["spirv-val", "--target-env", "vulkan1.1", str(f)])
            run(["glslangValidator", "-V", "--target-env", "vulkan1.1", "-S", "comp", "-o", str(tmp_path / "v.spv"), str(src)])
        elif target == "glsl":
            run(["glslangValidator", "-S", "comp", str(f)])  # OpenGL GLSL front end
            run(["glslangValidator", "-G", "-S", "comp", "-o", str(tmp_path / "g.spv"), str(f)])
        elif target == "hlsl":
            spv = tmp_path / (k["name"] + ".spv")
            run(["glslangValidator", "-D", "-V", "-S", "comp", "-e", k["entry"], "-o", str(spv), str(f)])
            run(["spirv-val", str(spv)])
        else:
            run(["g++", "-std=c++17", "-fopenmp", "-O1", "-c", "-I", str(out), str(f), "-o", str(tmp_path / "k.o")])
    return checked


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["nbody", "fluid", "bitonic", "block_sum"])
def test_export_checks(name, target, tmp_path, rng):
    prog, args = programs()[name]
    out = tmp_path / "out"
    m = em.export(prog, out, target, example_args=args(rng))
    validate(m)
    assert json.loads((out / "manifest.json").read_text()) == m
    assert m["program"] == prog.name and m["target"] == target and m["version"] == 1
    files = check_files(out, m, tmp_path)
    assert files and all(f.startswith(prog.name + "_k") for f in files)
    # Every buffer a binding or step names exists; every dispatch gives each field of its kernel.
    buffers = {b["name"] for b in m["buffers"]}
    kernels = {k["name"]: k for k in m["kernels"]}
    for k in m["kernels"]:
        assert {b["buffer"] for b in k["bindings"]} <= buffers
        assert [b["binding"] for b in k["bindings"]] == list(range(len(k["bindings"])))

    def walk(steps):
        for s in steps:
            if s["op"] == "dispatch":
                assert list(s["params"]) == [f["name"] for f in kernels[s["kernel"]]["params"]["fields"]]
            for key in ("body", "then", "else"):
                walk(s.get(key, []))
    walk(m["plan"])


def test_nbody_stays_symbolic(tmp_path, rng):
    m = em.export(example("nbody").step, tmp_path, "spirv")
    assert m["dims"] == [{"name": "N", "from": {"input": "X", "axis": 0}}]
    assert {b["name"]: b["count"] for b in m["buffers"]}["X"] == "N*3"
    (d,) = [s for s in m["plan"] if s["op"] == "dispatch"]
    assert d["threads"] == "N" and d["groups"] == ["min((N+63)/64,65535)", "((N+63)/64+65534)/65535", "1"]
    assert d["params"] == {"threads": "N", "row": "min((N+63)/64,65535)*64", "p0": "N", "p1": "dt"}


def test_fluid_plan_has_host_loop(tmp_path):
    m = em.export(example("fluid").fluid_step, tmp_path, "glsl")
    loops = [s for s in m["plan"] if s["op"] == "loop"]
    assert loops and loops[0]["end"] == "iters" and any(s["op"] == "dispatch" for s in loops[0]["body"])


def test_bitonic_fixes_only_what_it_must(tmp_path, rng):
    """log2(f32(N)) on the host has no manifest form: without example args it is a CompileError naming
    the step and the user's line; with them N is fixed (and only then)."""
    prog = example("bitonic_sort").bitonic_sort
    with pytest.raises(em.CompileError) as e:
        em.export(prog, tmp_path / "a", "spirv")
    assert "cannot export bitonic_sort" in str(e.value) and "bitonic_sort.py:" in str(e.value)
    assert "--dim" in str(e.value)
    m = em.export(prog, tmp_path / "b", "spirv", dims={"N": 256})
    assert m["dims"][0]["value"] == 256
    assert any(s["op"] == "loop" and any(t["op"] == "loop" for t in s["body"]) for s in m["plan"])  # nested loops


def test_shaders_carry_source_lines_and_names(tmp_path):
    em.export(example("nbody").step, tmp_path, "hlsl")
    text = (tmp_path / "step_k0.hlsl").read_text()
    assert "// nbody.py:" in text and "em.sum(d * d, axis=-1, keepdims=True)" in text
    assert "RWStructuredBuffer<uint> m0 : register(u0);" in text and "cbuffer EmberParams : register(b0)" in text
    assert "vk::" not in text and "void step_k0(" in text


@pytest.mark.parametrize("target", TARGETS)
def test_reexport_is_byte_identical(target, tmp_path):
    prog = example("fluid").fluid_step
    em.export(prog, tmp_path / "a", target)
    em.export(prog, tmp_path / "b", target)
    a, b = sorted(os.listdir(tmp_path / "a")), sorted(os.listdir(tmp_path / "b"))
    assert a == b
    for f in a:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


@pytest.mark.parametrize("name,prog_name", [("nbody", "nbody"), ("fluid", "fluid")])
@pytest.mark.parametrize("target", ["spirv", "hlsl"])
def test_golden(name, prog_name, target, tmp_path):
    prog = example("nbody").step if name == "nbody" else example("fluid").fluid_step
    em.export(prog, tmp_path, target)
    golden = GOLDEN / name / target
    produced = sorted(f for f in os.listdir(tmp_path) if not f.endswith(".spv"))
    if os.environ.get("EMBER_UPDATE_GOLDEN"):
        shutil.rmtree(golden, ignore_errors=True)
        golden.mkdir(parents=True)
        for f in produced:
            shutil.copy(tmp_path / f, golden / f)
    assert produced == sorted(os.listdir(golden))
    for f in produced:
        assert (tmp_path / f).read_text() == (golden / f).read_text(), f"{f} differs from {golden / f}"


def test_error_cuda_target(tmp_path):
    with pytest.raises(em.BackendError, match="target 'cuda' is not available yet: the manifest has no CUDA kernel"):
        em.export(example("nbody").step, tmp_path, "cuda")


def test_error_bad_target_and_engine(tmp_path):
    with pytest.raises(em.BackendError, match=r"unknown target 'metal' \(expected spirv, glsl, hlsl or cpp\)"):
        em.export(example("nbody").step, tmp_path, "metal")
    with pytest.raises(em.BackendError, match=r"unknown engine 'unreal' \(expected None, 'unity' or 'godot'\)"):
        em.export(example("nbody").step, tmp_path, "hlsl", engine="unreal")
    with pytest.raises(em.TypeError, match="expected a compiled program"):
        em.export(lambda x: x, tmp_path, "hlsl")


@em.compile
def host_float_math(X: em.f32["N"], s: em.f32):  # noqa: F821
    k = em.i32(em.sqrt(em.f32(X.shape[0]) * s))  # f32 math on the host: no manifest expression
    return em.zeros((k,), em.f32) + 1.0


def test_error_unexportable_program(tmp_path):
    line = host_float_math.fn.__code__.co_firstlineno + 2  # after the decorator and the def
    with pytest.raises(em.CompileError) as e:
        em.export(host_float_math, tmp_path, "glsl")
    msg = str(e.value)
    assert "cannot export host_float_math" in msg and f"test_export.py:{line}" in msg, msg
    assert "float math on the host" in msg


def test_command_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(em.__file__).parents[1]))
    out = tmp_path / "cli"
    r = run([sys.executable, "-m", "ember", "export", f"{EXAMPLES / 'bitonic_sort.py'}:bitonic_sort", "--target", "glsl",
             "--out", str(out), "--dim", "N=1024"], env=env)
    assert "exported bitonic_sort (glsl)" in r.stdout
    m = json.loads((out / "manifest.json").read_text())
    validate(m)
    assert m["dims"][0]["value"] == 1024
    bad = subprocess.run([sys.executable, "-m", "ember", "export", f"{EXAMPLES / 'nbody.py'}:step", "--target", "cuda",
                          "--out", str(out)], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and "BackendError" in bad.stderr and "no CUDA kernel interface" in bad.stderr


@pytest.mark.parametrize("name", ["nbody", "fluid", "bitonic", "block_sum"])
def test_cpp_export_runs_like_ember(name, tmp_path, rng):
    """The exported C++ kernels run through the manifest's plan by an independent runner give Ember's results."""
    from export_plan_runner import run_cpp_export
    prog, make_args = programs()[name]
    args = make_args(rng)
    em.export(prog, tmp_path / "out", "cpp", example_args=args)
    want = prog(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
    got = run_cpp_export(tmp_path / "out", [a.copy() if isinstance(a, np.ndarray) else a for a in args], tmp_path)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
