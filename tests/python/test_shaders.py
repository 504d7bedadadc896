"""The hand-written shaders in shaders/ (shaders/README.md): valid GLSL 4.50 for OpenGL
(glslangValidator, as the window compiles them: display.frag then colormap.glsl), and embedded
into the module at build time (no file is read at run time)."""
import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import ember as em

_SHADERS = Path(__file__).resolve().parents[2] / "shaders"


@pytest.mark.parametrize("stage,parts", [("vert", ["display.vert"]), ("frag", ["display.frag", "colormap.glsl"])])
def test_shader_compiles_as_opengl_glsl(stage, parts, tmp_path):
    if not shutil.which("glslangValidator"):
        pytest.skip("glslangValidator is not installed (tools/bootstrap installs glslang-tools)")
    src = tmp_path / f"shader.{stage}"
    src.write_text("".join((_SHADERS / p).read_text() for p in parts))
    r = subprocess.run(["glslangValidator", str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_shaders_are_embedded_in_the_module():
    if not em._window._BUILT:
        pytest.skip("this Ember has no window runtime")
    so = glob.glob(os.path.join(os.path.dirname(em._ember.__file__), "_ember*.so"))[0]
    blob = Path(so).read_bytes()
    for name in ("display.vert", "display.frag", "colormap.glsl"):
        text = (_SHADERS / name).read_text()
        assert text.encode() in blob, f"{name} is not embedded as it is in shaders/"
