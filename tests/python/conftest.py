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

import ember as em  # noqa: E402


@pytest.fixture(autouse=True)
def _cpu_backend():
    """Every test starts on the CPU backend."""
    em.init(backend="cpu")
    yield


@pytest.fixture
def rng():
    """A seeded generator so failures reproduce."""
    import numpy as np
    return np.random.default_rng(1234)
