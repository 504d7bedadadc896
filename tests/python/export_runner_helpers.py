"""Helpers for the export runner tests: find tools/export_runner in the build, run it on an export
folder with NumPy inputs, read its outputs back."""
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("EMBER_BUILD_DIR") or REPO / "build").resolve()


def runner_path():
    """The built export_runner ($EMBER_EXPORT_RUNNER overrides), or skip: it is built with the
    Vulkan option (tools/build)."""
    p = Path(os.environ.get("EMBER_EXPORT_RUNNER") or BUILD / "tools" / "export_runner" / "export_runner")
    if not p.exists():
        pytest.skip(f"tools/export_runner is not built ({p}); tools/build builds it with EMBER_WITH_VULKAN")
    return p


def run_runner(export_dir, out_dir, inputs=None, scalars=None, dims=None, gl=False, extra=(), check=True, env=None):
    """Saves `inputs` (name -> array) as .npy next to out_dir, runs the runner, returns
    (CompletedProcess, {name: array}) with the outputs it wrote."""
    out_dir = Path(out_dir)
    in_dir = out_dir.parent / (out_dir.name + "-in")
    in_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(runner_path()), str(export_dir), "--out", str(out_dir)]
    for name, a in (inputs or {}).items():
        path = in_dir / f"{name}.npy"
        np.save(path, np.ascontiguousarray(a))
        cmd += ["--in", f"{name}={path}"]
    for name, v in (scalars or {}).items():
        cmd += ["--scalar", f"{name}={v!r}" if isinstance(v, float) else f"{name}={v}"]
    for name, v in (dims or {}).items():
        cmd += ["--dim", f"{name}={v}"]
    if gl:
        cmd.append("--gl")
    cmd += list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"export_runner failed ({proc.returncode}):\n{' '.join(cmd)}\n{proc.stderr}{proc.stdout}")
    outs = {}
    if proc.returncode == 0:
        outs = {p.stem: np.load(p) for p in sorted(out_dir.glob("*.npy"))}
    return proc, outs


def validation_env():
    """Environment enabling the Khronos validation layer with synchronization validation (every
    message goes to the runner's stdout), or skip when the layer is not installed."""
    layer_dirs = ["/usr/share/vulkan/explicit_layer.d", "/etc/vulkan/explicit_layer.d"]
    if not any(Path(d, "VkLayer_khronos_validation.json").exists() for d in layer_dirs):
        pytest.skip("the Vulkan validation layer is not installed (Debian: vulkan-validationlayers)")
    return {"VK_INSTANCE_LAYERS": "VK_LAYER_KHRONOS_validation",
            "VK_LAYER_ENABLES": "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT"}


def need_tool(name, package):
    """The path of a command-line tool, or skip naming its Debian package."""
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} is not installed (Debian: {package}; tools/bootstrap installs it)")
    return path
