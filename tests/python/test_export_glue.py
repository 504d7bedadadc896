"""Engine glue (python/ember/export/unity.py, godot.py) on the hand-written export of
tests/export_fixtures/axpy (no exporter involved): every generated file passes its independent
checker (export_glue_checks.py), the plan's steps appear as the engine API calls they stand for,
and the plan expressions translate with C's semantics."""
import json
import re

import numpy as np
import pytest

from export_glue_checks import check_godot_project, check_unity_folder
from export_runner_helpers import REPO

from ember.export import _glue_expr as E
from ember.export import godot, unity

FIXTURE = REPO / "tests" / "export_fixtures" / "axpy"


def manifest(target):
    return json.loads((FIXTURE / f"manifest_{target}.json").read_text())


def test_unity_fixture(tmp_path):
    files = unity.write_unity(manifest("hlsl"), str(FIXTURE), str(tmp_path / "unity"))
    names = check_unity_folder(tmp_path / "unity", tmp_path)
    assert names == ["AxpyFixture.cs", "AxpyFixtureSample.cs", "EmberPoints.shader", "axpy_fixture.compute"]
    assert len(files) == 4
    cs = (tmp_path / "unity" / "AxpyFixture.cs").read_text()
    # The plan: a host loop of dispatches, a readback, an if on it, fills and copies.
    assert "for (long i = 0L; i < iters; i++)" in cs
    assert 'Shader.SetBuffer(_kaxpy, "m1", y);' in cs
    assert 'Shader.SetFloat("a", (float)a);' in cs  # the fixture's cbuffer declares `float a`
    assert 'Shader.SetInt("step", unchecked((int)i));' in cs
    assert "npos = (long)unchecked((int)ReadWord(cnt, 0L));" in cs
    assert "if ((((npos * 2L) > N) && (iters >= 0L)))" in cs
    assert "Fill(verdict, 0L, 2L, 0xFFFFFFFFu);" in cs and "Copy(y, 0L, ycopy, N, N);" in cs
    assert "Fill(cnt, 0L, 1L, 0u);" in cs  # zero_init, each run
    compute = (tmp_path / "unity" / "axpy_fixture.compute").read_text()
    assert re.findall(r"^#pragma kernel .*$", compute, re.M) == [
        "#pragma kernel axpy EMBER_KERNEL_0", "#pragma kernel count_pos EMBER_KERNEL_1",
        "#pragma kernel ember_copy EMBER_COPY", "#pragma kernel ember_fill EMBER_FILL"]
    sample = (tmp_path / "unity" / "AxpyFixtureSample.cs").read_text()
    assert "sim.Run(a, iters);" in sample and "Graphics.DrawProcedural" in sample


def test_godot_fixture(tmp_path):
    files = godot.write_godot(manifest("spirv"), str(FIXTURE), str(tmp_path / "godot"))
    names = check_godot_project(tmp_path / "godot", tmp_path)
    assert names == ["ember/axpy.glsl", "ember/axpy_fixture_ember.gd", "ember/count_pos.glsl", "main.gd", "main.tscn",
                     "project.godot"]
    assert len(files) == 6
    gd = (tmp_path / "godot" / "ember" / "axpy_fixture_ember.gd").read_text()
    assert "class_name AxpyFixtureEmber" in gd
    assert "\tfor i in range(iters):\n\t\t_dispatch(\"axpy\", \"axpy.glsl\", ((N + 63) / 64), 1, 1, " \
           "_params(16, [[0, false, N], [4, true, a], [8, false, i]]))" in gd
    assert 'npos = _read_word("cnt", 0).decode_s32(0)' in gd
    assert 'rd.compute_list_set_push_constant(list, params, params.size())' in gd
    assert 'rd.uniform_set_create(uniforms, _shaders[file], 0)' in gd
    # Push constants padded to 16 bytes for Godot: axpy's 12 bytes by one word, count_pos's 4 by three.
    assert (tmp_path / "godot" / "ember" / "axpy.glsl").read_text().count("uint ember_pad") == 1
    assert (tmp_path / "godot" / "ember" / "count_pos.glsl").read_text().count("uint ember_pad") == 3


def test_glue_wrong_target(tmp_path):
    import ember as em
    with pytest.raises(em.BackendError, match="needs a 'hlsl' export"):
        unity.write_unity(manifest("spirv"), str(FIXTURE), str(tmp_path))
    with pytest.raises(em.BackendError, match="needs a 'spirv' export"):
        godot.write_godot(manifest("hlsl"), str(FIXTURE), str(tmp_path))


def _c_eval(node, env):
    """The plan grammar's meaning (docs/export.md), for checking the translations."""
    k = node[0]
    if k == "num":
        return node[1]
    if k == "name":
        return env[node[1]]
    if k == "un":
        v = _c_eval(node[2], env)
        return int(not v) if node[1] == "!" else -v
    if k == "tern":
        return _c_eval(node[2] if _c_eval(node[1], env) else node[3], env)
    if k == "call":
        a = [_c_eval(x, env) for x in node[2]]
        if node[1] == "select":
            return a[1] if a[0] else a[2]
        if node[1] in ("floordiv", "floormod"):
            return 0 if a[1] == 0 else (a[0] // a[1] if node[1] == "floordiv" else a[0] % a[1])
        return {"min": min, "max": max}[node[1]](*a) if node[1] != "abs" else abs(a[0])
    op, a, b = node[1], _c_eval(node[2], env), _c_eval(node[3], env)
    if op in ("/", "%"):
        if b == 0:
            return 0
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return q if op == "/" else a - q * b
    return int({"+": a + b, "-": a - b, "*": a * b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
                "==": a == b, "!=": a != b, "&&": bool(a) and bool(b), "||": bool(a) or bool(b)}[op])


def _gd_eval(code, env):
    """Evaluates a GDScript translation in Python with GDScript's int semantics for / and %."""
    class I(int):
        def _w(self, v): return I(v)
        def __truediv__(self, o): return I(abs(int(self)) // abs(int(o)) * (1 if (self < 0) == (o < 0) else -1))
        def __mod__(self, o): return I(int(self) - int(self.__truediv__(o)) * int(o))
        def __add__(self, o): return I(int(self) + int(o))
        def __sub__(self, o): return I(int(self) - int(o))
        def __mul__(self, o): return I(int(self) * int(o))
        def __neg__(self): return I(-int(self))
    ns = {k: I(v) for k, v in env.items()}
    ns.update(mini=lambda a, b: I(min(a, b)), maxi=lambda a, b: I(max(a, b)), absi=lambda a: I(abs(a)),
              int=lambda v: I(int(v)),
              _div=lambda a, b: I(0) if b == 0 else I(a).__truediv__(b), _mod=lambda a, b: I(0) if b == 0 else I(a) % b,
              _floordiv=lambda a, b: I(0) if b == 0 else I(int(a) // int(b)),
              _floormod=lambda a, b: I(0) if b == 0 else I(int(a) % int(b)))
    code = re.sub(r"(?<![\w.])(\d+)(?![\w.])", r"I(\1)", code)
    ns["I"] = I
    return int(eval(code, ns))  # noqa: S307 - our own generated arithmetic


@pytest.mark.parametrize("text", [
    "(N+63)/64", "min((N+63)/64,65535)*64", "((N+63)/64+65534)/65535", "-N/7", "-N%7", "N%-3", "N/k", "N%k",
    "floordiv(-N,7)", "floormod(-N,7)", "select(k>2,N,-N)", "k*2>N&&k>=0||!(N<3)", "max(N-k*9,-(k%4))",
    "N-(k==3)", "abs(-N+k)", "k!=0?N/k:N",
])
def test_expression_translation_matches_c(text, rng):
    """The GDScript translation, evaluated with GDScript's integer semantics, agrees with the
    grammar's C meaning on random values (the C# translation is the same tree with C#'s operators,
    whose integer / and % are C's)."""
    node = E.parse(text)
    gd = E.Emitter("gd", {"N": ("N", "i"), "k": ("k", "i")})
    cs = E.Emitter("cs", {"N": ("N", "i"), "k": ("k", "i")})
    code = gd.as_int(text)
    assert cs.as_int(text)  # translates
    for n, k in [(0, 0), (1, 0), (100, 3), (4097, 5), (65536 * 64 + 1, -7)] + \
                [tuple(int(v) for v in rng.integers(-10**6, 10**6, 2)) for _ in range(20)]:
        assert _gd_eval(code, {"N": n, "k": k}) == _c_eval(node, {"N": n, "k": k}), (text, code, n, k)


def test_expression_errors():
    with pytest.raises(E.ExprError, match="unknown name 'M'"):
        E.Emitter("cs", {"N": ("N", "i")}).expr("M+1")
    with pytest.raises(E.ExprError, match="unknown function"):
        E.parse("log2(N)")
    with pytest.raises(E.ExprError):
        E.parse("(N+1")


@pytest.mark.parametrize("name", ["nbody", "fluid", "bitonic", "block_sum"])
def test_glue_for_exported_programs(name, tmp_path, rng):
    """Unity and Godot glue of the four exported test programs (host loops, nested loops, lets,
    grouped kernels) pass every checker; every plan dispatch appears as an engine dispatch."""
    import ember as em
    from test_export import programs
    prog, make_args = programs()[name]
    args = make_args(rng)
    m = em.export(prog, tmp_path / "hlsl", "hlsl", engine="unity", example_args=args)
    check_unity_folder(tmp_path / "hlsl" / "unity", tmp_path)
    cs = "".join(p.read_text() for p in (tmp_path / "hlsl" / "unity").glob("*.cs") if not p.stem.endswith("Sample"))

    def count(steps, op):
        return sum((s["op"] == op) + sum(count(s.get(k, []), op) for k in ("body", "then", "else")) for s in steps)

    assert len(re.findall(r"Dispatch\(_k(?!Copy|Fill)", cs)) == count(m["plan"], "dispatch")
    assert cs.count("for (long ") == count(m["plan"], "loop")
    m = em.export(prog, tmp_path / "spirv", "spirv", engine="godot", example_args=args)
    check_godot_project(tmp_path / "spirv" / "godot", tmp_path)
    gd = next((tmp_path / "spirv" / "godot" / "ember").glob("*_ember.gd")).read_text()
    assert gd.count("\t_dispatch(") == count(m["plan"], "dispatch")
    assert gd.count(" in range(") == count(m["plan"], "loop")

    # The C# plan, run by mono against the recording stub, does what the runner does.
    from export_glue_checks import compare_plan_logs, run_unity_plan
    from export_runner_helpers import run_runner
    inputs, scalars = {}, []
    for spec, a in zip(m["args"], args):
        if spec["kind"] == "buffer":
            inputs[spec["name"]] = a
        else:
            scalars.append((a, next(x["dtype"] for x in m["scalars"] if x["name"] == spec["name"])))
    dims = [inputs[d["from"]["input"]].shape[d["from"]["axis"]] for d in m["dims"]]
    trace = tmp_path / "trace.txt"
    run_runner(tmp_path / "spirv", tmp_path / "o", inputs, {x["name"]: v for x, (v, _) in
               zip([x for x in m["args"] if x["kind"] == "scalar"], scalars)}, extra=["--trace", str(trace)])
    runner_log = trace.read_text()
    readbacks = [int(l.split("= ")[1], 16) for l in runner_log.splitlines() if l.startswith("readback")]
    cls = next(p.stem for p in (tmp_path / "hlsl" / "unity").glob("*.cs") if not p.stem.endswith("Sample"))
    log = run_unity_plan(tmp_path / "hlsl" / "unity", cls, dims, scalars, readbacks, tmp_path)
    assert compare_plan_logs(runner_log, log) >= count(m["plan"], "dispatch")

    # The GDScript plan, run by gd_plan_run.py with a recording RenderingDevice, does too.
    from export_glue_checks import field_offsets, run_godot_plan
    log = run_godot_plan(tmp_path / "spirv" / "godot", dims, [v for v, _ in scalars], readbacks)
    assert compare_plan_logs(runner_log, log, field_offsets(m)) >= count(m["plan"], "dispatch")


def test_unity_plan_runs_like_the_runner_fixture(tmp_path, rng):
    """The generated C# of the fixture, run by mono against the recording stub, asks for exactly the
    dispatches (groups, parameter words), readbacks, fills and copies tools/export_runner performs
    for the same manifest; the runner's readback values are fed to GetData, so the `if` takes the
    same branch."""
    from export_glue_checks import compare_plan_logs, run_unity_plan
    from export_runner_helpers import run_runner
    from test_export_runner_fixture import make_export
    export = make_export(tmp_path, "spirv")
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    trace = tmp_path / "trace.txt"
    run_runner(export, tmp_path / "o", {"x": x, "y": y}, {"a": 0.375, "iters": 3}, extra=["--trace", str(trace)])
    runner_log = trace.read_text()
    readbacks = [int(l.split("= ")[1], 16) for l in runner_log.splitlines() if l.startswith("readback")]
    unity.write_unity(manifest("hlsl"), str(FIXTURE), str(tmp_path / "unity"))
    log = run_unity_plan(tmp_path / "unity", "AxpyFixture", [1000], [(0.375, "f32"), (3, "i32")], readbacks, tmp_path)
    assert compare_plan_logs(runner_log, log) == 10  # fill, 3 + 1 dispatches, readback, 2 fills, 2 copies
    assert "EmberStub" not in "".join(p.read_text() for p in (tmp_path / "unity").glob("*.cs"))


def test_godot_plan_runs_like_the_runner_fixture(tmp_path, rng):
    """The generated GDScript class of the fixture, run by gd_plan_run.py (a GDScript-subset
    interpreter with a recording RenderingDevice; not Godot), asks for exactly what
    tools/export_runner does: dispatches (push-constant words by offset), readback, fills, copies."""
    from export_glue_checks import compare_plan_logs, field_offsets, run_godot_plan
    from export_runner_helpers import run_runner
    from test_export_runner_fixture import make_export
    export = make_export(tmp_path, "spirv")
    x = rng.standard_normal(700).astype(np.float32)
    y = rng.standard_normal(700).astype(np.float32)
    trace = tmp_path / "trace.txt"
    run_runner(export, tmp_path / "o", {"x": x, "y": y}, {"a": -0.25, "iters": 4}, extra=["--trace", str(trace)])
    runner_log = trace.read_text()
    readbacks = [int(l.split("= ")[1], 16) for l in runner_log.splitlines() if l.startswith("readback")]
    godot.write_godot(manifest("spirv"), str(FIXTURE), str(tmp_path / "godot"))
    log = run_godot_plan(tmp_path / "godot", [700], [-0.25, 4], readbacks)
    assert compare_plan_logs(runner_log, log, field_offsets(manifest("spirv"))) == 11
