"""Shared by the examples: imports `ember` from the package a build put in $EMBER_BUILD_DIR/python
or <repo>/build/python (if present), or says how to get one."""
import os
import sys
from pathlib import Path

_build = Path(os.environ.get("EMBER_BUILD_DIR") or Path(__file__).resolve().parents[1] / "build")
if (_build / "python").is_dir() and str(_build / "python") not in sys.path:
    sys.path.insert(0, str(_build / "python"))
try:
    import ember as em  # noqa: E402,F401
except ImportError as e:
    sys.exit(f"cannot import ember ({e}): build it into build/ or set EMBER_BUILD_DIR")
