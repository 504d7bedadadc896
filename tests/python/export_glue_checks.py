"""Independent checkers for the engine glue of em.export (python/ember/export/unity.py, godot.py):
C# compiled by Debian's `mcs` against tests/export_stubs/UnityEngine.cs (a syntax and type check,
not a Unity run), the .compute file's kernels by glslang's HLSL front end then spirv-val, GDScript
parsed by gdtoolkit's `gdparse`, the Godot #[compute] shaders by glslangValidator -V then spirv-val.
Each check skips, naming what is missing, when its tool is not installed; none passes by doing nothing."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from export_runner_helpers import REPO, need_tool

STUB = REPO / "tests" / "export_stubs" / "UnityEngine.cs"


def gdparse_path():
    """gdparse on PATH, or in tools/bootstrap-checkers' venv; skip otherwise."""
    venv = Path(os.environ.get("EMBER_TOOLS_VENV") or Path.home() / ".cache" / "ember" / "tools-venv")
    for p in (shutil.which("gdparse"), venv / "bin" / "gdparse"):
        if p and Path(p).exists():
            return str(p)
    pytest.skip("gdparse (PyPI gdtoolkit) is not installed: run tools/bootstrap-checkers")


def _run(cmd, what):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{what} failed ({p.returncode}):\n{' '.join(map(str, cmd))}\n{p.stdout}{p.stderr}"
    return p


def compute_kernels(compute_path):
    """[(entry, macro)] from the `#pragma kernel ENTRY MACRO` lines of a Unity .compute file."""
    return re.findall(r"^#pragma kernel (\w+) (\w+)\s*$", Path(compute_path).read_text(), re.M)


def check_hlsl_compute(compute_path, tmp):
    """Each kernel of a .compute file through glslang's HLSL front end (its macro defined) and spirv-val."""
    glslang = need_tool("glslangValidator", "glslang-tools")
    spirv_val = need_tool("spirv-val", "spirv-tools")
    kernels = compute_kernels(compute_path)
    assert kernels, f"{compute_path} has no #pragma kernel line"
    for entry, macro in kernels:
        spv = Path(tmp) / f"{entry}.spv"
        _run([glslang, "-D", "-S", "comp", "-e", entry, f"-D{macro}", "-V", compute_path, "-o", spv],
             f"glslangValidator -D (HLSL) on kernel {entry} of {compute_path}")
        _run([spirv_val, spv], f"spirv-val on kernel {entry}")
    return kernels


def check_csharp(cs_files, tmp):
    """Compiles the C# files with mcs against the UnityEngine stub, warnings as errors."""
    mcs = need_tool("mcs", "mono-mcs")
    out = Path(tmp) / "unity_glue.dll"
    _run([mcs, "-warnaserror", "-target:library", f"-out:{out}", STUB, *cs_files], "mcs (C# against the UnityEngine stub)")
    return out


def check_unity_folder(folder, tmp):
    """Every file of write_unity's output through its checker; returns the file names."""
    folder = Path(folder)
    names = sorted(p.name for p in folder.iterdir())
    computes = list(folder.glob("*.compute"))
    assert len(computes) == 1, names
    check_hlsl_compute(computes[0], tmp)
    check_csharp(sorted(folder.glob("*.cs")), tmp)
    shader = (folder / "EmberPoints.shader").read_text()
    assert "StructuredBuffer<float> _EmberPositions" in shader and shader.count("{") == shader.count("}")
    return names


def check_godot_shader(glsl_path, tmp):
    """A Godot #[compute] file: the GLSL after the #[compute] line through glslangValidator -V and spirv-val."""
    glslang = need_tool("glslangValidator", "glslang-tools")
    spirv_val = need_tool("spirv-val", "spirv-tools")
    text = Path(glsl_path).read_text()
    assert text.startswith("#[compute]\n"), f"{glsl_path}: no #[compute] line"
    src = Path(tmp) / (Path(glsl_path).stem + ".comp")
    src.write_text(text[len("#[compute]\n"):])
    spv = src.with_suffix(".spv")
    _run([glslang, "-V", "-S", "comp", src, "-o", spv], f"glslangValidator -V on {glsl_path}")
    _run([spirv_val, spv], f"spirv-val on {glsl_path}")
    return text


def check_godot_project(folder, tmp):
    """Every file of write_godot's output through its checker; returns the relative file names."""
    folder = Path(folder)
    gdparse = gdparse_path()
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    scripts = sorted(folder.rglob("*.gd"))
    assert len(scripts) >= 2, names
    for s in scripts:
        _run([gdparse, s], f"gdparse {s}")
    shaders = sorted(folder.glob("ember/*.glsl"))
    assert shaders, names
    for g in shaders:
        check_godot_shader(g, tmp)
    project = (folder / "project.godot").read_text()
    main_scene = re.search(r'run/main_scene="res://([^"]+)"', project).group(1)
    scene = (folder / main_scene).read_text()
    for path in re.findall(r'path="res://([^"]+)"', scene):
        assert (folder / path).exists(), f"{main_scene} refers to missing res://{path}"
    for path in re.findall(r'"res://([^"]+)"', "\n".join(s.read_text() for s in scripts)):
        if not path.endswith("/"):
            assert (folder / path).exists(), f"a script refers to missing res://{path}"
    return names


def _cs_literal(value, dtype):
    import numpy as np
    if dtype == "f32":
        return repr(float(np.float32(value))) + "f"
    if dtype == "bool":
        return "true" if value else "false"
    return f"{int(value)}u" if dtype == "u32" else str(int(value))


def run_unity_plan(unity_dir, cls, dims, scalars, readbacks, tmp):
    """Runs the generated C# class `cls` with `mono` against the recording stub: constructs it with
    `dims` (ints), calls Run(`scalars`: [(value, dtype)]) with GetData answering `readbacks` (words),
    and returns the stub's log (one dispatch, copy, fill or readback per line)."""
    mcs = need_tool("mcs", "mono-mcs")
    mono = need_tool("mono", "mono-runtime")
    driver = Path(tmp) / "EmberDriver.cs"
    enqueue = "".join(f"        EmberStub.Readbacks.Enqueue(0x{w:08X}u);\n" for w in readbacks)
    args = ", ".join(["shader"] + [f"{int(d)}L" for d in dims])
    driver.write_text(
        "using System;\nusing UnityEngine;\n\npublic static class EmberDriver\n{\n"
        "    public static void Main()\n    {\n        var shader = new ComputeShader();\n"
        f"        var sim = new {cls}({args});\n        EmberStub.NameBuffers(sim);\n{enqueue}"
        f"        sim.Run({', '.join(_cs_literal(v, t) for v, t in scalars)});\n"
        "        Console.Write(EmberStub.Log.ToString());\n    }\n}\n")
    exe = Path(tmp) / "ember_driver.exe"
    cs = [p for p in sorted(Path(unity_dir).glob("*.cs")) if not p.stem.endswith("Sample")]
    _run([mcs, "-warnaserror", f"-out:{exe}", STUB, *cs, driver], "mcs (the C# plan and a driver)")
    return _run([mono, exe], "mono (the generated C# plan against the recording stub)").stdout


def run_godot_plan(godot_dir, init_args, run_args, readbacks):
    """Runs the generated GDScript class of a Godot project with gd_plan_run.py (a GDScript-subset
    interpreter on gdtoolkit's parser, with a recording RenderingDevice): _init(rd, *init_args),
    run(*run_args) with buffer_get_data answering `readbacks`; returns its log."""
    import json
    python = Path(gdparse_path()).parent / "python"
    if not python.exists() or subprocess.run([python, "-c", "import gdtoolkit"], capture_output=True).returncode:
        pytest.skip(f"no Python with gdtoolkit next to {gdparse_path()} (tools/bootstrap-checkers installs one)")
    script = next(Path(godot_dir).glob("ember/*_ember.gd"))
    return _run([python, Path(__file__).parent / "gd_plan_run.py", script, json.dumps(list(init_args)),
                 json.dumps(list(run_args)), json.dumps(list(readbacks))], f"gd_plan_run.py {script}").stdout


def field_offsets(manifest):
    """{kernel file stem: {field: "@<byte offset>"}}: how the Godot log names parameter words."""
    out = {}
    for k in manifest["kernels"]:
        stem = Path(k["file"]).name.split(".")[0]
        out[stem] = {f["name"]: f"@{f['offset']}" for f in (k.get("params") or {}).get("fields", [])}
    return out


def compare_plan_logs(runner_trace, unity_log, offsets=None):
    """Asserts that an engine plan (the C# or GDScript log) asked for what the runner did: the same
    steps in order; dispatches with the same kernel and groups and, for every parameter field the
    runner wrote, the same word (found by name, or by byte offset through `offsets`)."""
    a, b = runner_trace.strip().splitlines(), unity_log.strip().splitlines()
    assert len(a) == len(b), f"runner: {len(a)} steps, C#: {len(b)}\n" + "\n".join(a[:20]) + "\n---\n" + "\n".join(b[:20])
    for i, (x, y) in enumerate(zip(a, b)):
        if x.startswith("dispatch "):
            xs, ys = x.split(), y.split()
            assert ys[:5] == xs[:5], f"step {i}: runner {x!r}, C# {y!r}"
            words = dict(f.split("=") for f in ys[5:])
            for f in xs[5:]:
                name, word = f.split("=")
                key = offsets[xs[1]][name] if offsets else name
                assert words.get(key) == word, f"step {i} ({xs[1]}): field {name} runner {word}, engine {words.get(key)}"
        else:
            assert x == y, f"step {i}: runner {x!r}, C# {y!r}"
    return len(a)
