"""bench/gpu_model.py (issue 40 item 5) without a GPU: a small workload's cuda kernels through
NVRTC and ptxas, its IR counted; the table and the JSON have sane numbers. Skipped where this
Ember has no NVRTC or the CUDA toolkit's ptxas is missing; nothing here needs a device."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ember as em

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(em.__file__).resolve().parents[2]  # build/python/ember -> build
sys.path.insert(0, str(REPO / "bench"))
import gpu_model  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not em._ember._nvrtc_built(), reason="this Ember was built without NVRTC (EMBER_WITH_CUDA)"),
    pytest.mark.skipif(gpu_model.find_ptxas() is None, reason="no ptxas (CUDA toolkit) here"),
]


def _run(tmp_path, workloads):
    out = tmp_path / "model.json"
    env = dict(os.environ, EMBER_BUILD_DIR=str(BUILD), PYTHONPATH=str(BUILD / "python"))
    r = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_model.py"), "--workload", workloads,
                        "--json", str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout, json.loads(out.read_text())


def test_matmul_model_has_sane_numbers(tmp_path):
    n = 64
    table, model = _run(tmp_path, f"matmul:{n}")
    assert "| matmul N=64 | #0 |" in table and "**per step**" in table
    (w,) = model["workloads"]
    (k,) = w["kernels"]  # one kernel: a thread per output element, a loop over K
    assert k["threads"] == n * n and k["launches"] == 1 and k["block"] > 0 and k["blocks"] * k["block"] >= n * n
    assert 0 < k["regs"] <= 255 and k["spill_stores"] >= 0 and 0 < k["occupancy"] <= 1
    assert k["flops"] == 2 * n ** 3  # a mul and an add (or one fma) per term
    # 2n^3 loads of 4 bytes and n^2 stores requested; the memories are read (2n^2) and written (n^2) once.
    assert k["bytes_req"] == 4 * (2 * n ** 3 + n * n)
    assert k["bytes_dram"] == 4 * 3 * n * n
    assert k["roofline_us_H100"] > 0 and k["roofline_us_H200"] <= k["roofline_us_H100"]
    assert w["total"]["roofline_us_H100"] == pytest.approx(k["roofline_us_H100"])
    assert w["total"]["measured_us_H100"] is None  # matmul was measured at 2048 only


def test_fluid_counts_the_jacobi_loop_launches(tmp_path):
    _, model = _run(tmp_path, "fluid:64")
    (w,) = model["workloads"]
    from workloads import fluid
    launches = [k["launches"] for k in w["kernels"]]
    assert fluid.JACOBI_ITERS in launches and min(launches) == 1
    assert all(k["threads"] > 0 and k["bytes_dram"] > 0 and k["roofline_us_H100"] > 0 for k in w["kernels"])


def test_counter_on_ir_text():
    ir = """program p {
  // shape_arg i32 N
  %1 = input f32[N] 'x' arg=0
  %2 = scalar_arg i32 'k' arg=1
  %3 = buffer f32[N]
  %4 = loop i32 (0, %2, 1) {
    kernel #0[N] mem(%1, %3) params(N) {
      %6 = index i32[N] axis=0
      %7 = var f32[N] (0.0f)
      %8 = loop i32[N] (%6, N, 1) {
        %9 = load f32[N] (%1, %8) unsafe flat
        %10 = fma f32[N] (%9, %9, %7)
        set[N] (%7, %10)
      }
      store[N] (%3, %7, %6) unsafe flat
    }
  }
  output slot=0 (%3)
}
"""
    c = gpu_model.Counter(gpu_model.parse_ir(ir), {"N": 100}, {"k": 3})
    (k,) = c.kernels
    assert k["launches"] == 3 and k["threads"] == 100 and k["exact"]
    # a triangular loop: thread i runs N - i trips, on average N - (N - 1) / 2 = 50.5
    assert k["flops"] == pytest.approx(2 * 100 * 50.5)
    assert k["bytes_req"] == pytest.approx(4 * 100 * 51.5)
    assert k["bytes_dram"] == pytest.approx(4 * 100 * 2)
