"""bench/common.require (issue 39): a peer that is not installed is skipped with the reason; a
peer that is installed but fails to import (numba under Debian's python3-coverage) is "broken",
said on stderr in one loud line, and shown as **BROKEN** in bench/run.py's table."""
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import common  # noqa: E402

# bench/run.py under a name of its own (another "run" module may be loaded in this process).
_spec = importlib.util.spec_from_file_location("ember_bench_run", REPO / "bench" / "run.py")
bench_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_run)


def _fake_peer(root, name, body, version="1.2.3"):
    """A package `name` under root with its dist-info (as pip leaves it), whose __init__ is body."""
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(body)
    info = root / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(f"{name}\n")


def test_installed_peer_that_fails_to_import_is_broken_and_loud(tmp_path, monkeypatch, capsys):
    _fake_peer(tmp_path, "ember_fakepeer", "import coverage\ncoverage.no_such_thing.Tracer\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(common, "BROKEN", {})
    with pytest.raises(common.PeerBroken) as e:
        common.require("ember_fakepeer")
    err = capsys.readouterr().err
    assert err.startswith("!!! BROKEN PEER: ember_fakepeer 1.2.3 is installed")
    assert "AttributeError" in err and "no_such_thing" in err
    assert "ember_fakepeer 1.2.3" in str(e.value)
    # Said once per process, however many workloads ask again.
    with pytest.raises(common.PeerBroken):
        common.require("ember_fakepeer")
    assert capsys.readouterr().err == ""
    assert list(common.BROKEN) == ["ember_fakepeer"]


def test_broken_dependency_of_installed_peer_is_broken(tmp_path, monkeypatch):
    _fake_peer(tmp_path, "ember_fakepeer2", "import ember_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(common, "BROKEN", {})
    with pytest.raises(common.PeerBroken, match="ember_no_such_dependency"):
        common.require("ember_fakepeer2")


def test_absent_peer_is_a_quiet_skip(monkeypatch, capsys):
    monkeypatch.setattr(common, "BROKEN", {})
    with pytest.raises(common.Skip) as e:
        common.require("ember_no_such_peer")
    assert not isinstance(e.value, common.PeerBroken)
    assert "cannot import ember_no_such_peer: ModuleNotFoundError" in str(e.value)
    assert capsys.readouterr().err == "" and not common.BROKEN


def test_run_table_marks_broken(tmp_path, monkeypatch):
    _fake_peer(tmp_path, "ember_fakepeer3", "raise AttributeError('x')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(common, "BROKEN", {})

    def setup(inputs, opts):
        common.require("ember_fakepeer3")

    r = bench_run.bench_one(setup, (), (), {}, 1, 1)
    assert r["status"] == "broken"
    assert "| fake | n/a | n/a | n/a | n/a | n/a | **BROKEN** |" in bench_run.table("w", 1, {"fake": r})
