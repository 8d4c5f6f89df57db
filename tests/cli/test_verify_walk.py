"""What the walk of `verify` (and repair, migrate) cannot skip or hide.

An unreadable directory is reported instead of its logs going unchecked, `.` is spelled as
pathlib spells it, a closed pipe does not turn a failing verdict into exit 0, and file
names that are not UTF-8 print as escapes instead of crashing the output.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from tests.cli.conftest import CONSOLE_SCRIPT, record_session

Invoke = Callable[..., Result]


def test_an_unlistable_directory_is_reported_not_skipped(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = record_session(tmp_path / "store", "good")
    hidden = record_session(tmp_path / "store", "hidden", cwd="/elsewhere").parent
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == str(hidden):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = invoke("verify", tmp_path / "store", "--json")
    assert result.exit_code == 1, result.output
    files = {entry["path"]: entry for entry in json.loads(result.stdout)["files"]}
    assert files[str(good)]["classification"] == "ok"
    (finding,) = files[str(hidden)]["findings"]
    assert files[str(hidden)]["classification"] == "not-a-session"
    assert finding["rule"] == "unreadable" and "Permission denied" in finding["message"]


def test_a_name_that_cannot_be_looked_at_is_reported_not_a_usage_error(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = record_session(tmp_path / "store", "s")
    real_lstat, real_open = os.lstat, os.open

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(path) == str(log):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    def open_(path: Any, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) == str(log):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "open", open_)
    result = invoke("verify", log)
    assert result.exit_code == 1, result.output  # a finding, not a usage error (exit 2)
    assert "unreadable" in result.stdout and "Permission denied" in result.stdout


def test_dot_is_spelled_as_pathlib_spells_it(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = record_session(tmp_path, "s")
    monkeypatch.chdir(log.parent)
    result = invoke("verify", ".", log.name, "--json")
    assert result.exit_code == 0, result.output
    assert [entry["path"] for entry in json.loads(result.stdout)["files"]] == [log.name]


def test_a_closed_pipe_keeps_the_failing_verdict(tmp_path: Path) -> None:
    store = tmp_path / "store"
    template = record_session(store, "a-template")
    for index in range(300):  # enough output to outlast the reader
        copy = store / "copies" / f"c{index:03d}" / "session.v4.jsonl"
        copy.parent.mkdir(parents=True)
        copy.write_bytes(template.read_bytes())
    (store / "zz" / "corrupt").mkdir(parents=True)
    (store / "zz" / "corrupt" / "session.v4.jsonl").write_bytes(b"garbage\n")
    process = subprocess.Popen(
        [str(CONSOLE_SCRIPT), "verify", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # the reader goes away, as `| head -1` does
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 1, stderr
    assert b"Traceback" not in stderr


def test_names_that_are_not_utf8_print_as_escapes(tmp_path: Path) -> None:
    log = record_session(tmp_path / "store", "s")
    odd = os.fsencode(log.parent) + b"/bad\xff.jsonl"
    os.rename(log, odd)
    for encoding in ("utf-8:strict", "utf-8:surrogateescape"):
        env = dict(os.environ, PYTHONIOENCODING=encoding)
        text = subprocess.run(
            [str(CONSOLE_SCRIPT), "verify", str(tmp_path / "store")],
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert text.returncode == 0, text.stderr
        assert b"bad\\udcff.jsonl: ok" in text.stdout
        document = subprocess.run(
            [str(CONSOLE_SCRIPT), "verify", str(tmp_path / "store"), "--json"],
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        (entry,) = json.loads(document.stdout)["files"]  # valid UTF-8 JSON
        assert os.fsencode(entry["path"]) == odd
