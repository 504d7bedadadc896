"""Ember's log (python/ember/_log.py, core/support/log.h): Python `logging` under the `ember`
logger for the Python package and the C++ runtime; EMBER_LOG sets its level; the first compile
of a large or slow program logs one INFO line with its time."""
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import ember as em

_BUILD = Path(os.environ.get("EMBER_BUILD_DIR") or Path(__file__).resolve().parents[2] / "build").resolve()


def _child(code, cache, **env):
    e = dict(os.environ, PYTHONPATH=str(_BUILD / "python"), EMBER_CACHE_DIR=str(cache), **env)
    e.pop("EMBER_LOG", None) if "EMBER_LOG" not in env else None
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=300)


_PROGRAM = """
import numpy as np, ember as em
@em.compile
def g(x: em.f32["N"]):
    return em.sqrt(em.abs(x)) + 1.0
x = np.random.default_rng(5).standard_normal(100).astype(np.float32)
assert np.allclose(g(x).numpy(), np.sqrt(np.abs(x)) + 1, rtol=1e-6)
"""


def _fresh_program(seed):
    """A program whose kernels no earlier test compiled (its constant is random)."""
    c = float(np.random.default_rng(seed).uniform(1, 2))

    @em.compile
    def h(x: em.f32["N"]):
        return x * c + em.sin(x)
    return h, c


def test_cpp_compile_lines_are_records_of_the_ember_logger(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    caplog.set_level(logging.INFO, logger="ember")
    h, c = _fresh_program(101)
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(h(x).numpy(), x * np.float32(c) + np.sin(x), rtol=1e-5, atol=1e-6)
    lines = [r for r in caplog.records if r.name == "ember" and r.getMessage().startswith("h: ")]
    assert lines and lines[0].levelno == logging.INFO
    assert "kernels (" in lines[0].getMessage() and "cache miss" in lines[0].getMessage()


def test_nothing_at_info_when_the_logger_is_at_warning(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    caplog.set_level(logging.WARNING, logger="ember")
    h, _ = _fresh_program(102)
    h(np.random.default_rng(2).standard_normal(8).astype(np.float32))
    assert not [r for r in caplog.records if r.name == "ember"]


def test_cpp_warnings_are_warning_records(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    (tmp_path / "prog-0123.prog").write_bytes(np.random.default_rng(3).bytes(40))  # no checksum file
    assert em._ember._cache_entry_read("prog-0123", "prog") is None
    rec = [r for r in caplog.records if r.name == "ember" and r.levelno == logging.WARNING]
    assert rec and "prog-0123.prog' is not usable (no checksum file)" in rec[0].getMessage()
    assert not (tmp_path / "prog-0123.prog").exists()


def test_large_first_compile_logs_one_timing_line(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(em._program, "_LARGE_PROGRAM_NODES", 5)
    caplog.set_level(logging.INFO, logger="ember")
    h, c = _fresh_program(103)
    x = np.random.default_rng(4).standard_normal(32).astype(np.float32)
    h(x)
    h(x)  # compiled once: one line
    timing = [r.getMessage() for r in caplog.records if "first compile" in r.getMessage()]
    assert len(timing) == 1
    msg = timing[0]
    assert msg.startswith("h: first compile for cpu took ") and "traced nodes -> 1 kernels" in msg
    assert "compiler " in msg and "passes " in msg


def test_small_fast_compile_logs_no_timing_line(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(em._program, "_SLOW_COMPILE_S", 1e9)
    caplog.set_level(logging.INFO, logger="ember")
    h, _ = _fresh_program(104)
    h(np.random.default_rng(5).standard_normal(16).astype(np.float32))
    assert not [r for r in caplog.records if "first compile" in r.getMessage()]


def test_ember_log_env_prints_to_stderr_in_embers_format(tmp_path):
    r = _child(_PROGRAM, tmp_path, EMBER_LOG="info")
    assert r.returncode == 0, r.stderr
    assert any(ln.startswith("ember: g: ") and "kernels (" in ln for ln in r.stderr.splitlines()), r.stderr
    r = _child(_PROGRAM, tmp_path / "b")  # default: warnings only
    assert r.returncode == 0 and r.stderr == ""
    r = _child(_PROGRAM, tmp_path / "c", EMBER_LOG="loud")
    assert r.returncode == 0 and "EMBER_LOG='loud' is not one of debug, info, warning, error" in r.stderr


def test_an_application_logging_config_takes_over(tmp_path):
    code = "import logging, sys\nlogging.basicConfig(stream=sys.stderr, format='APP|%(name)s|%(levelname)s|%(message)s')\n"
    r = _child(code + _PROGRAM, tmp_path, EMBER_LOG="info")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert any(ln.startswith("APP|ember|INFO|g: ") for ln in lines), r.stderr
    assert not any(ln.startswith("ember: ") for ln in lines), r.stderr  # not printed twice
