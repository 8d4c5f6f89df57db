"""The console-script entry point ``dsh_store.cli:run``: exit codes kept, fast exit always."""

from __future__ import annotations

import gc
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import dsh_store.cli
from tests.cli.conftest import record_session


def _run_recording_freezes(
    monkeypatch: pytest.MonkeyPatch, *argv: str
) -> tuple[int | str | None, int]:
    """Call ``run()`` with ``argv``; return its exit code and how many times it froze the heap."""
    freezes: list[None] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(None))
    monkeypatch.setattr(sys, "argv", ["dsh-store", *argv])
    with pytest.raises(SystemExit) as exited:
        dsh_store.cli.run()
    return exited.value.code, len(freezes)


def test_run_keeps_each_exit_code_and_freezes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good = record_session(tmp_path / "store", "good")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n")

    assert _run_recording_freezes(monkeypatch, "verify", str(good)) == (0, 1)
    assert ": ok (format 4" in capsys.readouterr().out
    assert _run_recording_freezes(monkeypatch, "verify", str(bad)) == (1, 1)
    assert "not-a-session" in capsys.readouterr().out
    assert _run_recording_freezes(monkeypatch, "verify", "--no-such-option") == (2, 1)
    assert "No such option" in capsys.readouterr().err


def test_installed_console_script_points_at_run() -> None:
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "dsh-store"]
    assert script.value == "dsh_store.cli:run"
