"""Exported programs run by tools/export_runner, without Ember, give Ember's results: the N-body
step, the fluid step (host loop of Jacobi dispatches), bitonic sort (nested host loops) and a
grouped kernel (shared memory + barriers), as `spirv` on Vulkan (lavapipe here) and as `glsl` on
OpenGL through EGL (llvmpipe here), on random inputs. Buffers the manifest does not zero-initialize
start as NaN words (--poison), so a missing zero_init shows. The N-body export's engine glue
(Unity, Godot) passes its independent checkers too."""
import time

import numpy as np
import pytest

import ember as em
from export_glue_checks import check_godot_project, check_unity_folder
from export_runner_helpers import run_runner, validation_env
from test_export import example, programs

# Ember's CPU backend is the reference; GPU float math (fused multiply-adds, rsqrt) may differ in
# the last bits of each operation, which the N-body sum over 96 bodies and the fluid solve amplify.
TOL = {"nbody": 2e-4, "fluid": 1e-4, "bitonic": 0, "block_sum": 1e-5}


def run_exported(prog, args, target, tmp_path, gl=False, extra=(), env=None):
    """Exports `prog` for `target`, runs it through the runner with `args`, returns (manifest,
    outputs in return order, the runner's stdout)."""
    m = em.export(prog, tmp_path / f"export-{target}", target, example_args=args)
    inputs, scalars = {}, {}
    assert len(m["args"]) == len(args)
    for spec, a in zip(m["args"], args):
        (inputs if spec["kind"] == "buffer" else scalars)[spec["name"]] = a
    proc, outs = run_runner(tmp_path / f"export-{target}", tmp_path / f"out-{target}", inputs, scalars, gl=gl,
                            extra=["--poison", *extra], env=env)
    got = []
    for o in sorted(m["outputs"], key=lambda o: o["index"]):
        got.append(outs[o["buffer"]] if "buffer" in o else outs[f"out{o['index']}"])
    return m, got, proc.stdout + proc.stderr


def ember_results(prog, args):
    out = prog(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("target", ["spirv", "glsl"])
@pytest.mark.parametrize("name", ["nbody", "fluid", "bitonic", "block_sum"])
def test_export_runs_like_ember(name, target, tmp_path, rng):
    prog, make_args = programs()[name]
    args = make_args(rng)
    want = ember_results(prog, args)
    m, got, log = run_exported(prog, args, target, tmp_path, gl=target == "glsl")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.isfinite(g.astype(np.float64)).all()
        if TOL[name] == 0:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=TOL[name], atol=TOL[name])
    assert "dispatches" in log
    if name == "bitonic":
        np.testing.assert_array_equal(got[0], np.sort(args[0]))
    if name == "fluid":  # the host loop runs: more dispatches than kernels
        assert int(log.split(" dispatches")[0].split()[-1]) > len(m["kernels"])


@pytest.mark.parametrize("target", ["spirv", "glsl"])
def test_nbody_any_n(target, tmp_path, rng):
    """One export runs at any N (the dim stays symbolic): N = 1, 63, 64, 65 and 1000, same folder."""
    prog = example("nbody").step
    em.export(prog, tmp_path / "e", target)
    for n in (1, 63, 64, 65, 1000):
        X = rng.uniform(-4, 4, (n, 3)).astype(np.float32)
        V = rng.normal(0, 1, (n, 3)).astype(np.float32)
        _, outs = run_runner(tmp_path / "e", tmp_path / f"o{n}", {"X": X, "V": V}, {"dt": 0.01}, gl=target == "glsl",
                             extra=["--poison"])
        want = ember_results(prog, (X, V, 0.01))
        m_outs = sorted(outs)
        assert len(m_outs) == 2
        for w in want:
            assert any(o.shape == w.shape and np.allclose(o, w, rtol=2e-4, atol=2e-4) for o in outs.values())


def test_nbody_runner_figures(tmp_path, rng, capsys):
    """The N-body export at N = 2048 on lavapipe and llvmpipe: max abs error against Ember (CPU
    backend) and the runner's times (first run, fastest of 5), printed for the report (never
    asserted as a speed). The outputs are those of the last of the 5 runs: repeats start afresh."""
    prog, n = example("nbody").step, 2048
    X = rng.uniform(-32, 32, (n, 3)).astype(np.float32)
    V = rng.normal(0, 1, (n, 3)).astype(np.float32)
    want = ember_results(prog, (X, V, 0.01))
    lines = []
    for target in ("spirv", "glsl"):
        t0 = time.perf_counter()
        _, got, log = run_exported(prog, (X, V, 0.01), target, tmp_path, gl=target == "glsl", extra=["--repeat", "4"])
        wall = time.perf_counter() - t0
        err = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
        scale = max(float(np.max(np.abs(w))) for w in want)
        assert err <= 1e-4 * scale, (target, err, scale)
        lines.append(f"N-body N={n} {target}: max abs error vs Ember {err:.3g} (values up to {scale:.3g}); "
                     f"{log.strip()}; export+run wall {wall:.2f} s")
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_nbody_engine_glue(tmp_path):
    """em.export(engine=...) on the N-body step: the Unity folder and the Godot project pass their checkers."""
    prog = example("nbody").step
    em.export(prog, tmp_path / "hlsl", "hlsl", engine="unity")
    unity_files = check_unity_folder(tmp_path / "hlsl" / "unity", tmp_path)
    assert unity_files == ["EmberPoints.shader", "Step.cs", "StepSample.cs", "step.compute"]
    cs = (tmp_path / "hlsl" / "unity" / "Step.cs").read_text()
    assert "public Step(ComputeShader shader, long N)" in cs and "public void Run(float dt)" in cs
    sample = (tmp_path / "hlsl" / "unity" / "StepSample.cs").read_text()
    # The step's returns (X', V') feed its arguments (X, V); X is drawn.
    assert "sim.Copy(sim.out0, 0L, sim.X, 0L, sim.out0.count);  // out0 -> X" in sample
    assert "sim.Copy(sim.out1, 0L, sim.V, 0L, sim.out1.count);  // out1 -> V" in sample
    assert 'material.SetBuffer("_EmberPositions", sim.X);' in sample
    em.export(prog, tmp_path / "spirv", "spirv", engine="godot")
    godot_files = check_godot_project(tmp_path / "spirv" / "godot", tmp_path)
    assert godot_files == ["ember/step_ember.gd", "ember/step_k0.glsl", "main.gd", "main.tscn", "project.godot"]
    main = (tmp_path / "spirv" / "godot" / "main.gd").read_text()
    assert 'sim.copy("out0", "X")' in main and 'sim.copy("out1", "V")' in main
    assert 'sim.get_data("X").to_float32_array()' in main


def test_example_export_nbody(tmp_path):
    """examples/export_nbody.py writes the Unity folder and the Godot project it prints."""
    import subprocess
    import sys
    from export_runner_helpers import BUILD, REPO
    env = {**__import__("os").environ, "EMBER_BUILD_DIR": str(BUILD)}
    p = subprocess.run([sys.executable, str(REPO / "examples" / "export_nbody.py"), "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "unity: " in p.stdout and "Step.cs" in p.stdout and "godot: " in p.stdout and "project.godot" in p.stdout
    check_unity_folder(tmp_path / "hlsl" / "unity", tmp_path)
    check_godot_project(tmp_path / "spirv" / "godot", tmp_path)


def test_fixed_dim_must_match(tmp_path, rng):
    """Bitonic sort's N is fixed at export (256): another input size is a clear error, not a wrong run."""
    prog, make_args = programs()["bitonic"]
    em.export(prog, tmp_path / "e", "spirv", example_args=make_args(rng))
    keys = rng.integers(-1000, 1000, 128).astype(np.int32)
    proc, _ = run_runner(tmp_path / "e", tmp_path / "o", {"keys": keys}, check=False)
    assert proc.returncode == 1 and "dim N was fixed to 256 at export; input keys gives 128" in proc.stderr


def _many_scalars_program(tmp_path, count=36):
    """A program whose kernel takes more parameters than 128 bytes of push constants hold (N and 36
    f32 scalars): Vulkan exports put them in a storage buffer."""
    import importlib.util
    src = ("import ember as em\n\n@em.compile\ndef many(X: em.f32['N'], " +
           ", ".join(f"s{i}: em.f32" for i in range(count)) + "):\n    return " +
           " + ".join(f"X * s{i}" for i in range(count)) + "\n")
    path = tmp_path / "many_scalars.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("ember_export_many_scalars", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.many


@pytest.mark.parametrize("target", ["spirv", "glsl"])
def test_params_in_storage_buffer(target, tmp_path, rng):
    """156 bytes of parameters: a storage buffer with a dynamic offset on Vulkan (a uniform block on
    OpenGL), and the Godot glue's parameter buffer, all agree with Ember."""
    prog = _many_scalars_program(tmp_path)
    X = rng.standard_normal(300).astype(np.float32)
    s = [float(v) for v in rng.uniform(-1, 1, 36).astype(np.float32)]
    args = (X, *s)
    want = ember_results(prog, args)
    m, got, _ = run_exported(prog, args, target, tmp_path, gl=target == "glsl")
    assert m["kernels"][0]["params"]["kind"] == ("storage_buffer" if target == "spirv" else "uniform_block")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    if target == "spirv":
        from export_glue_checks import compare_plan_logs, field_offsets, run_godot_plan
        from ember.export import godot
        godot.write_godot(m, str(tmp_path / "export-spirv"), str(tmp_path / "godot"))
        check_godot_project(tmp_path / "godot", tmp_path)
        trace = tmp_path / "trace.txt"
        run_runner(tmp_path / "export-spirv", tmp_path / "o2", {"X": X}, {f"s{i}": v for i, v in enumerate(s)},
                   extra=["--trace", str(trace)])
        log = run_godot_plan(tmp_path / "godot", [300], s, [])
        assert compare_plan_logs(trace.read_text(), log, field_offsets(m)) == 1


@pytest.mark.parametrize("name", ["nbody", "fluid", "bitonic", "block_sum"])
def test_vulkan_validation_clean(name, tmp_path, rng):
    """Under the Khronos validation layer with synchronization validation, the runner makes no API
    error and no hazard (its barriers between steps are enough), and still gives Ember's results."""
    prog, make_args = programs()[name]
    args = make_args(rng)
    want = ember_results(prog, args)
    _, got, log = run_exported(prog, args, "spirv", tmp_path, env=validation_env())
    assert "Validation Error" not in log and "SYNC-HAZARD" not in log and "VUID" not in log, log[:3000]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=TOL[name] or 0, atol=TOL[name] or 0)
