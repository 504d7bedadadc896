"""`python3 -m ember` (python/ember/__main__.py): info, cache ls|clear, demo NAME, export, and
--help for each. Commands that touch the process (demo, compiling into a cache) run in a child
with its own EMBER_CACHE_DIR."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember.__main__ import main

_BUILD = Path(os.environ.get("EMBER_BUILD_DIR") or Path(__file__).resolve().parents[2] / "build").resolve()


def _ember(args, cache, timeout=300, **env):
    e = dict(os.environ, PYTHONPATH=str(_BUILD / "python"), EMBER_CACHE_DIR=str(cache), **env)
    return subprocess.run([sys.executable, "-m", "ember", *args], env=e, capture_output=True, text=True,
                          timeout=timeout)


_COMPILE = """
import numpy as np, ember as em
@em.compile
def f(x: em.f32["N"], s: em.f32):
    return em.exp(x) * s + x
x = np.random.default_rng({seed}).standard_normal(257).astype(np.float32)
assert np.allclose(f(x, 1.5).numpy(), np.exp(x) * 1.5 + x, rtol=1e-5, atol=1e-5)
"""


def test_top_level_help_lists_the_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in ("info", "cache ls | clear", "demo NAME", "export FILE:FUNCTION"):
        assert cmd in out


@pytest.mark.parametrize("args", [["info"], ["cache"], ["cache", "ls"], ["cache", "clear"], ["demo"], ["export"]])
def test_every_command_has_help(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args + ["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python3 -m ember {' '.join(args)}")


def test_unknown_command_and_no_command_exit_2(capsys):
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'frobnicate'" in err and "info" in err
    assert main([]) == 2


def test_info_names_version_backends_devices_and_cache(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(3)
    sizes = rng.integers(10, 5000, size=4)
    for i, n in enumerate(sizes):
        (tmp_path / f"cpu-{i:032x}.so").write_bytes(rng.bytes(int(n)))
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ember {em.__version__} (")
    built = list(em._ember.built_backends())
    assert f"built backends: {', '.join(built)}" in out
    for b in built:  # each built backend: its device, or why it has none
        reason = em._ember.backend_unavailable(b)
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(b + " "))
        assert (f"no device: {reason}" in line) if reason else (em._ember.device_info(b) in line)
    for b in {"cpu", "vulkan", "opengl", "cuda"} - set(built):
        assert f"{b}" in out and "not built into this Ember" in out
    assert f"compile cache: {tmp_path} (4 files, " in out


def test_cache_ls_and_clear_on_a_real_cache(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tools-venv").mkdir()  # a directory someone keeps there is not an entry
    r = subprocess.run([sys.executable, "-c", _COMPILE.format(seed=11)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(_BUILD / "python"), EMBER_CACHE_DIR=str(cache)))
    assert r.returncode == 0, r.stderr
    files = [p for p in cache.iterdir() if p.is_file()]
    libs = [p for p in files if p.name.startswith("cpu-") and p.suffix == ".so"]
    assert libs
    r = _ember(["cache", "ls", "--all"], cache)
    assert r.returncode == 0, r.stderr
    total = sum(p.stat().st_size for p in files)
    assert f"{cache}: {len(files)} files" in r.stdout
    lib_line = next(ln for ln in r.stdout.splitlines() if "cpu libraries" in ln)
    assert f" {sum(p.name.startswith('cpu-') for p in files)} files" in lib_line  # each library's .so, .cpp, .sum
    for p in files:
        assert p.name in r.stdout
    r = _ember(["cache", "clear"], cache)
    assert r.returncode == 0 and f"removed {len(files)} files" in r.stdout
    assert [p.name for p in cache.iterdir()] == ["tools-venv"]
    assert _ember(["cache", "ls"], cache).stdout.startswith(f"{cache}: 0 files")
    assert total > 0
    # The cleared cache is rebuilt by the next compile.
    r = subprocess.run([sys.executable, "-c", _COMPILE.format(seed=12)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(_BUILD / "python"), EMBER_CACHE_DIR=str(cache)))
    assert r.returncode == 0, r.stderr
    assert any(p.name.startswith("cpu-") and p.suffix == ".so" for p in cache.iterdir())


def test_demo_runs_headless_and_writes_frames(tmp_path):
    out = tmp_path / "frames"
    r = _ember(["demo", "mandelbrot", "--headless", "--frames", "3", "--width", "96", "--height", "64",
                "--out", str(out)], tmp_path / "cache", DISPLAY="")
    assert r.returncode == 0, r.stdout + r.stderr
    frames = sorted(out.glob("*.png"))
    assert len(frames) == 3
    sizes = {p.stat().st_size for p in frames}
    assert min(sizes) > 200  # real images, not empty files


def test_demo_lists_the_demos_and_refuses_an_unknown_one(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    for name in ("fluid", "nbody", "mandelbrot", "raymarch"):
        assert name in out
    assert main(["demo", "nosuchdemo"]) == 1
    err = capsys.readouterr().err
    assert "no demo named 'nosuchdemo'" in err and "mandelbrot" in err


def test_demo_passes_its_own_help_through(tmp_path):
    r = _ember(["demo", "fluid", "--help"], tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: demo_fluid.py") and "--headless" in r.stdout and "--n" in r.stdout
