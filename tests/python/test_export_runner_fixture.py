"""tools/export_runner on a hand-written export (tests/export_fixtures/axpy): shaders compiled by
glslangValidator, not by Ember, so this proves the runner alone — its Vulkan and OpenGL devices,
its plan steps (loop, dispatch, readback, if, fill, copy), dims bound from input shapes, push
constants and uniform blocks, f32/i32/bool buffers, zero_init — and its error messages."""
import json
import subprocess

import numpy as np
import pytest

from export_runner_helpers import REPO, need_tool, run_runner, runner_path, validation_env

FIXTURE = REPO / "tests" / "export_fixtures" / "axpy"


def make_export(tmp_path, target, params_in_buffer=False):
    """The fixture as an export folder of `target` (spirv: SPIR-V compiled here; glsl: the sources).
    `params_in_buffer`: axpy reads its parameters from a storage buffer at binding 2."""
    d = tmp_path / f"axpy-{target}{'-pb' if params_in_buffer else ''}"
    d.mkdir()
    m = json.loads((FIXTURE / f"manifest_{target}.json").read_text())
    if params_in_buffer:
        p = m["kernels"][0]["params"]
        p.update(kind="storage_buffer", binding=2, layout="std430", size=12)
    (d / "manifest.json").write_text(json.dumps(m, indent=2))
    for k in ("axpy", "count_pos"):
        text = (FIXTURE / f"{k}.comp").read_text()
        if params_in_buffer and k == "axpy":
            text = text.replace("#version 450\n", "#version 450\n#define PARAMS_IN_BUFFER\n", 1)
        (d / f"{k}.comp").write_text(text)
        if target == "spirv":
            glslang = need_tool("glslangValidator", "glslang-tools")
            subprocess.run([glslang, "-V", "-S", "comp", str(d / f"{k}.comp"), "-o", str(d / f"{k}.spv")],
                           check=True, capture_output=True)
    return d


def expected(x, y, a, iters):
    """NumPy's result of the fixture's plan, step by step in float32."""
    y = y.copy()
    for i in range(iters):
        y = (y + np.float32(a) * x * np.float32(i + 1)).astype(np.float32)
    npos = int((y > 0).sum())
    verdict = np.array([1 if 2 * npos > len(x) else -1, npos], np.int32)
    return {"y": y, "mask": y > 0, "cnt": np.array([npos], np.int32), "verdict": verdict,
            "ycopy": np.concatenate([y, y]).reshape(-1, 2)}


@pytest.mark.parametrize("params_in_buffer", [False, True], ids=["params-block", "params-buffer"])
@pytest.mark.parametrize("target", ["spirv", "glsl"])
@pytest.mark.parametrize("n,iters", [(1000, 5), (64, 0), (4099, 3)])
def test_fixture_matches_numpy(tmp_path, rng, target, n, iters, params_in_buffer):
    """Every dispatch of the host loop gets its own parameters, whether they travel as push
    constants / a uniform block or in a storage buffer (a slice of the runner's ring each)."""
    export = make_export(tmp_path, target, params_in_buffer)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = 0.375
    proc, out = run_runner(export, tmp_path / "out", {"x": x, "y": y}, {"a": a, "iters": iters},
                           gl=target == "glsl", extra=["--poison"])
    want = expected(x, y, a, iters)
    assert sorted(out) == sorted(want)
    np.testing.assert_allclose(out["y"], want["y"], rtol=1e-5, atol=1e-5)
    assert out["mask"].dtype == np.bool_ and (out["mask"] == want["mask"]).all()
    assert out["cnt"].dtype == np.int32 and (out["cnt"] == want["cnt"]).all()
    assert (out["verdict"] == want["verdict"]).all()
    np.testing.assert_allclose(out["ycopy"], want["ycopy"], rtol=1e-5, atol=1e-5)
    assert out["ycopy"].shape == (n, 2)
    assert f"{iters + 1} dispatches" in proc.stdout


def test_fixture_poison_shows_missing_zero_init(tmp_path, rng):
    """--poison fills buffers the manifest leaves uninitialized with NaN words: a counter wrongly
    marked zero_init=false then counts from garbage, which is what the flag is for."""
    export = make_export(tmp_path, "spirv")
    m = json.loads((export / "manifest.json").read_text())
    next(b for b in m["buffers"] if b["name"] == "cnt")["zero_init"] = False
    (export / "manifest.json").write_text(json.dumps(m))
    x = rng.standard_normal(256).astype(np.float32)
    y = rng.standard_normal(256).astype(np.float32)
    _, good = run_runner(export, tmp_path / "zero", {"x": x, "y": y}, {"a": 0.5, "iters": 1})
    _, bad = run_runner(export, tmp_path / "poison", {"x": x, "y": y}, {"a": 0.5, "iters": 1}, extra=["--poison"])
    assert good["cnt"][0] == (expected(x, y, 0.5, 1)["y"] > 0).sum()
    assert bad["cnt"][0] != good["cnt"][0]


def _fails(tmp_path, export, inputs, scalars, *, gl=False, extra=()):
    proc, _ = run_runner(export, tmp_path / "err", inputs, scalars, gl=gl, extra=extra, check=False)
    assert proc.returncode != 0
    return proc.stderr


def test_fixture_errors(tmp_path, rng):
    export = make_export(tmp_path, "spirv")
    x = rng.standard_normal(100).astype(np.float32)
    ok = {"x": x, "y": x.copy()}
    s = {"a": 0.5, "iters": 2}
    assert "missing input y" in _fails(tmp_path, export, {"x": x}, s)
    assert "missing scalar iters" in _fails(tmp_path, export, ok, {"a": 0.5})
    assert "no input named z" in _fails(tmp_path, export, {**ok, "z": x}, s)
    assert "holds i32, the export expects f32" in _fails(tmp_path, export, {**ok, "y": x.astype(np.int32)}, s)
    assert "shape [50, 2], the export expects [100]" in _fails(tmp_path, export, {**ok, "y": x.reshape(50, 2)}, s)
    assert "unsupported dtype '<f8'" in _fails(tmp_path, export, {**ok, "y": x.astype(np.float64)}, s)
    assert "not a valid i32" in _fails(tmp_path, export, ok, {"a": 0.5, "iters": "two"})
    assert "add --gl" not in _fails(tmp_path, export, ok, s, gl=True)
    assert "runs a `glsl` export" in _fails(tmp_path, export, ok, s, gl=True)


@pytest.mark.parametrize("edit,message", [
    (lambda m: m.update(version=7), "$.version: this runner reads version 1"),
    (lambda m: m["plan"][1].update(kernel="nope"), "$.plan[1].kernel: no kernel named \"nope\""),
    (lambda m: m["plan"][1]["params"].pop("threads"), "no value for parameter field \"threads\""),
    (lambda m: m["plan"][0]["body"][0].update(groups=["(N+63)/", 1, 1]), "bad expression '(N+63)/'"),
    (lambda m: m["plan"][0]["body"][0].update(groups=["M", 1, 1]), "unknown name 'M'"),
    (lambda m: m["plan"][5].update(count="N+1"), "are outside buffer y"),
    (lambda m: m["kernels"][0].update(file="missing.spv"), "cannot open"),
    (lambda m: m["plan"].append({"op": "jump"}), "unknown step \"jump\""),
    (lambda m: m["buffers"][0].update(role="weights"), "unknown role \"weights\""),
])
def test_fixture_bad_manifest(tmp_path, rng, edit, message):
    export = make_export(tmp_path, "spirv")
    m = json.loads((export / "manifest.json").read_text())
    edit(m)
    (export / "manifest.json").write_text(json.dumps(m))
    x = rng.standard_normal(100).astype(np.float32)
    err = _fails(tmp_path, export, {"x": x, "y": x.copy()}, {"a": 0.5, "iters": 2})
    assert message in err, err


def test_fixture_json_syntax_error_has_line(tmp_path):
    export = make_export(tmp_path, "spirv")
    text = (export / "manifest.json").read_text().splitlines()
    text[3] = text[3].rstrip(",")  # drop a comma on line 4
    (export / "manifest.json").write_text("\n".join(text))
    err = _fails(tmp_path, export, {}, {})
    assert "manifest.json: line 5, column" in err and "expected '}'" in err


def test_runner_usage_errors(tmp_path):
    r = str(runner_path())
    p = subprocess.run([r], capture_output=True, text=True)
    assert p.returncode == 2 and "no export folder" in p.stderr and "usage:" in p.stderr
    p = subprocess.run([r, str(tmp_path), "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert p.returncode == 1 and "cannot open" in p.stderr and "manifest.json" in p.stderr
    p = subprocess.run([r, str(tmp_path), "--frobnicate"], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown option --frobnicate" in p.stderr


def test_npy_roundtrip_through_runner(tmp_path, rng):
    """Big (2-D, padded-header) and odd shapes come back as they went in: y is inout and untouched
    when iters = 0 and a = 0."""
    export = make_export(tmp_path, "spirv")
    x = rng.standard_normal(7).astype(np.float32)
    y = rng.standard_normal(7).astype(np.float32)
    _, out = run_runner(export, tmp_path / "o", {"x": x, "y": y}, {"a": 0.0, "iters": 0})
    assert (out["y"] == y).all() and out["y"].dtype == np.float32


def test_repeat_starts_each_run_afresh(tmp_path, rng):
    """--repeat K runs the plan K more times, each from the inputs again (the inout y, the zeroed
    counter): the outputs equal one run's, and the fastest time is reported."""
    export = make_export(tmp_path, "spirv")
    x = rng.standard_normal(500).astype(np.float32)
    y = rng.standard_normal(500).astype(np.float32)
    proc, out = run_runner(export, tmp_path / "o", {"x": x, "y": y}, {"a": 0.5, "iters": 3}, extra=["--repeat", "3"])
    want = expected(x, y, 0.5, 3)
    np.testing.assert_allclose(out["y"], want["y"], rtol=1e-5, atol=1e-5)
    assert (out["cnt"] == want["cnt"]).all()
    assert "(fastest of 4:" in proc.stdout and "4 dispatches" in proc.stdout


def test_npy_reader_rejects_what_it_cannot_read(tmp_path, rng):
    """Big-endian, Fortran-order and truncated .npy files are one-line errors naming the file."""
    export = make_export(tmp_path, "spirv")
    x = rng.standard_normal(100).astype(np.float32)
    r = str(runner_path())
    base = [r, str(export), "--scalar", "a=0.5", "--scalar", "iters=1", "--out", str(tmp_path / "o")]
    np.save(tmp_path / "x.npy", x)
    cases = {
        "big.npy": (x.astype(">f4"), "unsupported dtype '>f4'"),
        "fortran.npy": (np.asfortranarray(rng.standard_normal((10, 10)).astype(np.float32)), "Fortran-order"),
    }
    for name, (arr, message) in cases.items():
        np.save(tmp_path / name, arr)
        p = subprocess.run(base + ["--in", f"x={tmp_path / 'x.npy'}", "--in", f"y={tmp_path / name}"],
                           capture_output=True, text=True)
        assert p.returncode == 1 and message in p.stderr and name in p.stderr, p.stderr
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(data[:-8])
    p = subprocess.run(base + ["--in", f"x={tmp_path / 'x.npy'}", "--in", f"y={tmp_path / 'short.npy'}"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "truncated data: 100 elements need 400 bytes" in p.stderr, p.stderr


@pytest.mark.parametrize("params_in_buffer", [False, True], ids=["push-constants", "params-buffer"])
def test_fixture_vulkan_validation_clean(tmp_path, rng, params_in_buffer):
    """Every step kind (loops of dispatches, readback, fills, copies; push constants and the
    dynamic-offset parameter ring) passes the validation layer with synchronization validation."""
    export = make_export(tmp_path, "spirv", params_in_buffer)
    x = rng.standard_normal(3000).astype(np.float32)
    y = rng.standard_normal(3000).astype(np.float32)
    proc, out = run_runner(export, tmp_path / "o", {"x": x, "y": y}, {"a": 0.25, "iters": 6}, env=validation_env())
    log = proc.stdout + proc.stderr
    assert "Validation Error" not in log and "SYNC-HAZARD" not in log and "VUID" not in log, log[:3000]
    np.testing.assert_allclose(out["y"], expected(x, y, 0.25, 6)["y"], rtol=1e-5, atol=1e-5)


def test_validation_layer_is_active(tmp_path, rng):
    """The control for the validation tests: a manifest whose push-constant block is smaller than
    the shader's is reported by the layer under the same environment."""
    export = make_export(tmp_path, "spirv")
    m = json.loads((export / "manifest.json").read_text())
    p = m["kernels"][0]["params"]
    p["size"], p["fields"] = 4, p["fields"][:1]
    m["plan"][0]["body"][0]["params"] = {"threads": "N"}
    (export / "manifest.json").write_text(json.dumps(m))
    x = rng.standard_normal(100).astype(np.float32)
    proc, _ = run_runner(export, tmp_path / "o", {"x": x, "y": x.copy()}, {"a": 0.25, "iters": 1}, env=validation_env())
    assert "Validation Error" in proc.stdout + proc.stderr
