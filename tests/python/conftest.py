"""pytest setup: import `ember` from <build>/python ($EMBER_BUILD_DIR, default <repo>/build) and
keep the kernel cache inside the build directory."""
import os
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
_BUILD = Path(os.environ.get("EMBER_BUILD_DIR") or _REPO / "build").resolve()
sys.path.insert(0, str(_BUILD / "python"))
os.environ.setdefault("EMBER_CACHE_DIR", str(_BUILD / "kernel-cache"))
if not os.environ.get("XDG_RUNTIME_DIR"):  # Mesa's Vulkan drivers warn without one
    _xdg = _BUILD / "xdg-runtime"
    _xdg.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(_xdg)

import ember as em  # noqa: E402

# Whether this Ember runs under the sanitizers (tools/test --sanitize): bounds on RSS and time do
# not hold there (ASan keeps freed memory in quarantine; instrumented code runs 2-3x slower).
SANITIZED = "libasan" in Path("/proc/self/maps").read_text()


# The longest tests (pytest --durations on 2 cores): collected first, so that pytest-xdist
# (tools/test runs it on every core) starts them first and no worker runs one alone at the end.
_SLOW_FIRST = ("test_pip_install.py::", "test_train_digits.py::test_loss_falls", "test_fuzz.py::",
               "test_docs.py::", "test_mpi.py::", "test_races.py::test_fuzz", "test_vulkan.py::test_every_example",
               "test_opengl.py::test_every_example", "test_nca.py::", "test_recompute.py::test_texture")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: not any(s in item.nodeid for s in _SLOW_FIRST))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def _cpu_backend():
    """Every test starts on the CPU backend ($EMBER_TEST_DEFAULT_BACKEND to try another on the
    tests that do not ask for the `backend` fixture)."""
    em.init(backend=os.environ.get("EMBER_TEST_DEFAULT_BACKEND", "cpu"))
    yield


# Backends a program test runs on: cpu always, the others where this machine has their device
# (skipped with the reason otherwise). EMBER_TEST_BACKENDS=cpu,vulkan narrows the list.
_BACKENDS = ("cpu", "vulkan", "vulkan-hlsl", "opengl", "cuda")
_SELECTED = [b for b in os.environ.get("EMBER_TEST_BACKENDS", ",".join(_BACKENDS)).split(",") if b]


def _unavailable(name):
    if name not in em._program._BUILT_BACKENDS:
        return f"the {name} backend is not built into this Ember"
    return em._ember.backend_unavailable(name)


@pytest.fixture(params=_SELECTED)
def backend(request):
    """Runs the test once per backend (em.init(backend=...) before the test body); yields its name."""
    reason = _unavailable(request.param)
    if reason:
        pytest.skip(f"backend {request.param} unavailable: {reason}")
    em.init(backend=request.param)
    yield request.param


@pytest.fixture
def no_split_reductions(monkeypatch):
    """Programs compiled in the test keep a reduction into few outputs in one thread per output on
    the GPU backends (EMBER_SPLIT_REDUCTIONS=0), for tests that count kernels or fusion decisions
    made before split_reductions adds its stage kernels (tests/python/test_split_reductions.py
    tests the pass)."""
    monkeypatch.setenv("EMBER_SPLIT_REDUCTIONS", "0")


@pytest.fixture
def rng():
    """A seeded generator so failures reproduce."""
    import numpy as np
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def xvfb_display():
    """A display for windowed tests: $DISPLAY when the session has one, else a private
    `Xvfb :N -screen 0 1280x720x24` on a free display number (Xvfb picks it: -displayfd),
    stopped at the end of the session. Skips (with the reason) only when Xvfb is missing or
    does not start. The OpenGL backend's context is created first, without the display, so it
    stays an EGL context that never talks to this X server."""
    import shutil
    import subprocess
    import tempfile
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    xvfb = shutil.which("Xvfb")
    if not xvfb:
        pytest.skip("Xvfb is not installed (Debian: xvfb): windowed tests need a display")
    try:
        em._ember.opengl_info()
    except Exception:
        pass  # no OpenGL at all: the window tests skip on their own
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([xvfb, "-displayfd", "1", "-screen", "0", "1280x720x24", "-nolisten", "tcp"],
                            stdout=subprocess.PIPE, stderr=log)
    number = proc.stdout.readline().decode().strip()
    if not number.isdigit():
        proc.kill()
        proc.wait()
        log.seek(0)
        pytest.skip(f"Xvfb did not start: {log.read().decode(errors='replace')[-500:]}")
    try:
        yield f":{number}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def display(xvfb_display, monkeypatch):
    """$DISPLAY set to the Xvfb (or existing) display for one test."""
    monkeypatch.setenv("DISPLAY", xvfb_display)
    yield xvfb_display
