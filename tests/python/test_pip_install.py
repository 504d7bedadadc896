"""The pip route (pyproject.toml, scikit-build-core): `pip wheel .` builds a wheel of this source
tree with a CPython that is not the build tree's (the pyenv `python3` on PATH when there is one),
the wheel installs into a fresh virtual environment with PyPI's NumPy, and there `import ember`
has the backends of the build tree and runs a program on each of them (cpu compiles C++ at run
time: nothing it needs may be left in the source tree).

CI time: the wheel is built with tools/build's flags (RelWithDebInfo, -Werror) in a directory next
to the build directory (<build>-pip, kept between runs), through ccache with the build tree's
compilers and generator, so every library object is a ccache hit from the tools/build build that
ran before. The build environment is kept too: <build>-pip-env, a virtual environment holding only
pip and pyproject.toml's [build-system] requires, upgraded to their newest matching releases each
run (as pip's isolated build would install them) and checked by pip (--check-build-dependencies)
before `pip wheel --no-build-isolation` builds in it. pip's isolated environment had a new path
each run, so the module's 9 pybind11 files (which include pybind11 from it) missed ccache every
run; in the kept one they hit from the second run on. EMBER_TEST_PIP=0 skips the test.
pip's downloads are cached in <build>/pip-cache; without PyPI the test skips, saying so."""
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest

import ember as em

_REPO = Path(__file__).resolve().parents[2]
_BUILD = Path(os.environ.get("EMBER_BUILD_DIR") or _REPO / "build").resolve()

# Run inside the venv: every backend of the installed package runs y = sin(x) * 2 + x.sum() on
# random input against NumPy; prints a JSON report.
_CHECK = r"""
import json, os, sys
import numpy as np
import ember as em
from ember import _ember as C

@em.compile
def f(x: em.f32["N"]):
    return em.sin(x) * 2.0 + em.sum(x)

x = np.random.default_rng(7).standard_normal(1000).astype(np.float32)
ran = {}
for b in C.built_backends():
    if C.backend_unavailable(b):
        continue
    em.init(backend=b)
    got = f(x).numpy()
    ran[b] = float(np.max(np.abs(got - (np.sin(x) * 2 + x.sum()))))
print(json.dumps({"file": em.__file__, "version": em.__version__, "built": list(C.built_backends()),
                  "ran": ran, "numpy": np.__version__, "python": sys.version.split()[0],
                  "cache": sorted(os.listdir(os.environ["EMBER_CACHE_DIR"]))}))
"""


def _python():
    """A CPython >= 3.10 with venv to build with: $EMBER_PIP_PYTHON, else `python3` on PATH when it
    is not Debian's (pyenv), else this interpreter."""
    if os.environ.get("EMBER_PIP_PYTHON"):
        return os.environ["EMBER_PIP_PYTHON"]
    p = shutil.which("python3")
    if p and os.path.realpath(p) != os.path.realpath(sys.executable):
        out = subprocess.run([p, "-c", "import sys, venv; print(sys.executable, sys.version_info >= (3, 10))"],
                             capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.split()[-1] == "True":
            return out.stdout.split()[0]
    return sys.executable


def _pypi_reachable():
    try:
        urllib.request.urlopen("https://pypi.org/simple/scikit-build-core/", timeout=15).close()
        return True
    except OSError:
        return False


def _cmake_cache(name):
    """A value from the build tree's CMakeCache.txt (e.g. CMAKE_CXX_COMPILER), or None."""
    cache = _BUILD / "CMakeCache.txt"
    if cache.exists():
        for line in cache.read_text().splitlines():
            if line.startswith(name + ":"):
                return line.split("=", 1)[1]
    return None


def _env(tmp):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EMBER_BUILD_DIR", "VIRTUAL_ENV")}
    env.update(PIP_CACHE_DIR=str(_BUILD / "pip-cache"), PIP_DISABLE_PIP_VERSION_CHECK="1",
               CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2), EMBER_CACHE_DIR=str(tmp / "cache"))
    if shutil.which("ccache") and not env.get("CCACHE_DISABLE"):
        # As tools/build sets it up, with the build tree's compilers and generator: ccache hashes the
        # compiler's name (pip's build would pick g++ where tools/build's CMake picked c++), and the
        # wheel's build directory sits next to the build tree, so every path relative to either
        # (sources ../core/..., -I generated) reads the same and the libraries' objects hit.
        env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CCACHE_BASEDIR", str(_REPO))
        env.setdefault("CCACHE_NOHASHDIR", "1")
        for var, entry in (("CC", "CMAKE_C_COMPILER"), ("CXX", "CMAKE_CXX_COMPILER"),
                           ("CMAKE_GENERATOR", "CMAKE_GENERATOR")):
            value = _cmake_cache(entry)
            if value:
                env.setdefault(var, value)
    return env


def _run(cmd, env, cwd, timeout):
    t0 = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r, time.perf_counter() - t0


def _build_env(python, env):
    """<build>-pip-env: a virtual environment with pyproject.toml's build requirements at their newest
    matching releases (what pip's isolated build installs); its Python."""
    requires = tomllib.loads((_REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    venv = Path(f"{_BUILD}-pip-env")
    vpy = venv / "bin" / "python"
    stamp = venv / "ember-build-python.txt"  # the interpreter it was made from: another one, a new env
    if not vpy.exists() or not stamp.exists() or stamp.read_text() != python:
        shutil.rmtree(venv, ignore_errors=True)
        _run([python, "-m", "venv", venv], env, _REPO, 300)
        stamp.write_text(python)
    _run([vpy, "-m", "pip", "install", "--upgrade", *requires], env, _REPO, 600)
    return vpy


@pytest.mark.skipif(os.environ.get("EMBER_TEST_PIP") == "0", reason="EMBER_TEST_PIP=0 (see the module doc)")
def test_pip_wheel_installs_and_runs_every_backend(tmp_path):
    if not _pypi_reachable():
        pytest.skip("PyPI is not reachable: pip cannot get scikit-build-core, pybind11 and NumPy")
    python = _python()
    env = _env(tmp_path)
    (tmp_path / "cache").mkdir()
    wheels = tmp_path / "wheels"
    # One wheel build (dependencies come as wheels of their own: only ember's is built here), in the
    # kept build environment; pip checks that it satisfies pyproject.toml's requirements.
    bpy = _build_env(python, env)
    _, build_s = _run([bpy, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--check-build-dependencies",
                       "-w", wheels, "-C", f"build-dir={_BUILD}-pip", "-C", "cmake.define.EMBER_WERROR=ON", _REPO],
                      env, tmp_path, 1500)
    built = list(wheels.glob("ember-*.whl"))
    assert len(built) == 1, built
    with zipfile.ZipFile(built[0]) as z:
        names = z.namelist()
    assert any(n.startswith("ember/_ember") and n.endswith(".so") for n in names), names
    assert "ember/__init__.py" in names and "ember/examples/demo_fluid.py" in names
    assert not any("tests/" in n or n.endswith(".cpp") for n in names)

    venv = tmp_path / "venv"
    _run([python, "-m", "venv", venv], env, tmp_path, 300)
    vpy = venv / "bin" / "python"
    _, install_s = _run([vpy, "-m", "pip", "install", built[0]], env, tmp_path, 600)
    r, _ = _run([vpy, "-c", _CHECK], env, tmp_path, 600)
    got = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"wheel {built[0].name}: {built[0].stat().st_size / 2**20:.1f} MiB, built in {build_s:.0f} s; "
          f"pip install {install_s:.1f} s; {got}")

    assert Path(got["file"]).resolve().is_relative_to(venv.resolve()), got["file"]  # not the build tree
    assert got["version"] == em.__version__
    # The wheel has the backends the build tree has, and runs the ones this machine has a device for.
    assert sorted(got["built"]) == sorted(em._ember.built_backends())
    runnable = [b for b in em._ember.built_backends() if not em._ember.backend_unavailable(b)]
    assert sorted(got["ran"]) == sorted(runnable) and "cpu" in got["ran"]
    for b, err in got["ran"].items():
        assert err < 1e-2, (b, err)
    # The cpu backend compiled its kernels in the fresh cache (no prebuilt kernel was found).
    assert any(n.startswith("cpu-") and n.endswith(".so") for n in got["cache"]), got["cache"]

    # The command line of the installed package (the `ember` script and python -m ember).
    r, _ = _run([venv / "bin" / "ember", "info"], env, tmp_path, 300)
    assert "built backends: " + ", ".join(got["built"]) in r.stdout
    assert str(tmp_path / "cache") in r.stdout
