"""What a lent GPU machine runs (tools/gpu-check), kept working between the rare sessions that
have one: bench/gpu.py end to end on the cpu backend (its GPU peers skip here with their reasons,
every Ember row is checked against NumPy), and CMake finding isl without pkg-config (ISL_ROOT: the
GPU image has no pkg-config and no isl package)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ember as em

REPO = Path(__file__).resolve().parents[2]
BUILD_PYTHON = Path(em.__file__).resolve().parents[1]


def test_gpu_bench_quick_run_checks_every_ember_row(tmp_path):
    out = tmp_path / "gpu.json"
    env = dict(os.environ, PYTHONPATH=str(BUILD_PYTHON), EMBER_CACHE_DIR=str(tmp_path / "cache"),
               EMBER_BUILD_DIR=str(BUILD_PYTHON.parent))
    r = subprocess.run([sys.executable, str(REPO / "bench" / "gpu.py"), "--quick", "--backend", "cpu",
                        "--impl", "ember,torch", "--json", str(out), "--md", str(tmp_path / "gpu.md")],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    runs = {(x["workload"], x["n"]): x["results"] for x in res["runs"]}
    assert set(w for w, _ in runs) == {"nbody", "fluid", "matmul", "train_mlp"}, runs.keys()
    for key, results in runs.items():
        ember = results["ember"]
        assert ember["status"] == "ok" and ember["max_rel_err"] < 1e-3, (key, ember)
        assert ember["median_ms"] > 0 and ember["min_ms"] <= ember["median_ms"], (key, ember)
        assert results["torch"]["status"] in ("ok", "skipped", "error"), (key, results["torch"])
    assert "| ember |" in (tmp_path / "gpu.md").read_text()


@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_cmake_finds_isl_without_pkg_config(tmp_path):
    inc = Path("/usr/include/isl/ctx.h")
    if not inc.exists():
        pytest.skip("no isl headers in /usr/include (Debian libisl-dev)")
    r = subprocess.run(["cmake", "-S", str(REPO), "-B", str(tmp_path / "b"), "-DEMBER_WITH_PYTHON=OFF",
                        "-DEMBER_BUILD_TESTS=OFF", "-DEMBER_WITH_VULKAN=OFF", "-DEMBER_WITH_OPENGL=OFF",
                        "-DEMBER_WITH_WINDOW=OFF", "-DEMBER_WITH_CUDA=OFF",
                        "-DPKG_CONFIG_EXECUTABLE=/nonexistent/pkg-config", "-DISL_ROOT=/usr"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "-- isl: /usr/lib" in r.stdout and "libisl" in r.stdout, r.stdout[-3000:]
