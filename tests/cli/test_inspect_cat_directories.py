"""``dsh-store inspect`` and ``cat`` on a session directory: its newest generation is read.

The generation is the one ``dsh-store verify`` checks (``iter_log_files``); any other
directory is a one-line usage error (exit 2) saying what to pass instead.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from dsh_store.jsonl import layout
from dsh_store.verify import collect_log_files, iter_log_files
from tests.cli.conftest import V2_LOG, record_session, write_header

Invoke = Callable[..., Result]


def _migrated_session(tmp_path: Path) -> Path:
    """A session directory holding ``session.v2.jsonl`` and the ``session.v4.jsonl`` of it."""
    header = json.loads(V2_LOG.read_bytes().partition(b"\n")[0])
    # Filed where its header's id and cwd derive, as a store keeps it.
    directory = layout.session_dir(tmp_path / "store", header["id"], header.get("cwd"))
    directory.mkdir(parents=True)
    shutil.copyfile(V2_LOG, directory / "session.v2.jsonl")
    write_header(directory / "session.jsonl", 0, session_id="older")
    return directory


def test_a_session_directory_reads_its_newest_generation(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path / "store", "s", turns=2)
    directory = log.parent
    write_header(directory / "session.jsonl", 0, session_id="backup")
    write_header(directory / "session.v3.jsonl", 3, session_id="backup")
    (directory / "salvaged.jsonl").write_bytes(b"")  # a loose log beside them is not read
    assert collect_log_files([directory]) != [str(log)]  # verify also checks the loose one
    assert [p for p in collect_log_files([directory]) if p.endswith(".v4.jsonl")] == [str(log)]
    for spelling in (directory, f"{directory}/", f"{directory}/."):
        inspected = invoke("inspect", spelling, "--json")
        assert inspected.exit_code == 0, inspected.output
        summary = json.loads(inspected.stdout)["files"][0]
        assert summary["path"] == str(log) and summary["header"]["id"] == "s"
        assert summary["events"] == 11
        cat = invoke("cat", spelling)
        assert cat.exit_code == 0, cat.output
        assert cat.stdout_bytes == b"".join(log.read_bytes().splitlines(keepends=True)[1:])


def test_an_older_generation_is_read_when_it_is_the_newest(invoke: Invoke, tmp_path: Path) -> None:
    directory = _migrated_session(tmp_path)
    newest = str(directory / "session.v2.jsonl")
    assert collect_log_files([directory]) == [newest]
    summary = json.loads(invoke("inspect", directory, "--json").stdout)["files"][0]
    assert summary["path"] == newest and summary["version"] == 2
    assert invoke("cat", directory).stdout_bytes == invoke("cat", newest).stdout_bytes != b""
    upgrade = invoke("migrate", newest, "--output", directory / "session.v4.jsonl")
    assert upgrade.exit_code == 0, upgrade.output
    upgraded = json.loads(invoke("inspect", directory, "--json").stdout)["files"][0]
    assert upgraded["path"] == str(directory / "session.v4.jsonl") and upgraded["version"] == 4
    assert invoke("cat", directory).stdout_bytes == invoke("cat", newest).stdout_bytes


def test_a_relative_session_directory_from_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, invoke: Invoke
) -> None:
    log = record_session(tmp_path / "store", "s", turns=1)
    monkeypatch.chdir(log.parent)
    summary = json.loads(invoke("inspect", ".", "--json").stdout)["files"][0]
    assert summary["path"] == "session.v4.jsonl"
    assert invoke("cat", ".", "--type", "turn/end").stdout.count("\n") == 1


def _usage_error(result: Result, path: Path) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {path}: not a session directory: "), result.stderr
    assert "pass " in result.stderr
    return result.stderr


@pytest.mark.parametrize("command", ["inspect", "cat"])
def test_a_store_root_is_a_usage_error_naming_what_to_pass(
    invoke: Invoke, tmp_path: Path, command: str
) -> None:
    root = tmp_path / "store"
    record_session(root, "a", turns=1)
    record_session(root, "b", turns=1)
    message = _usage_error(invoke(command, root), root)
    assert f"only logs below it such as {root}/_no-cwd/a/session.v4.jsonl" in message
    assert "pass one session directory or a .jsonl file instead" in message
    _usage_error(invoke(command, root / "_no-cwd"), root / "_no-cwd")


@pytest.mark.parametrize("command", ["inspect", "cat"])
def test_a_directory_without_a_session_log_is_a_usage_error(
    invoke: Invoke, tmp_path: Path, command: str
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a log\n")
    (empty / "session.v4.jsonl.0a1b2c3d4e5f.tmp").write_bytes(b"{}\n")
    message = _usage_error(invoke(command, empty), empty)
    assert message.endswith("pass a session directory or a .jsonl file instead\n")
    loose = tmp_path / "loose"
    write_header(loose / "b.jsonl", 4)
    write_header(loose / "a.jsonl", 4)
    message = _usage_error(invoke(command, loose), loose)
    assert message.endswith(f"pass one of its .jsonl files (such as {loose}/a.jsonl) instead\n")


def test_a_generation_symlinked_out_of_the_directory_is_skipped_as_verify_skips_it(
    invoke: Invoke, tmp_path: Path
) -> None:
    outside = record_session(tmp_path / "elsewhere", "s", turns=1)
    directory = tmp_path / "store" / "_no-cwd" / "linked"
    directory.mkdir(parents=True)
    os.symlink(outside, directory / "session.v4.jsonl")
    assert list(iter_log_files(tmp_path / "store")) == []
    _usage_error(invoke("inspect", directory), directory)
    shutil.copy(outside, directory / "session.v3.jsonl")  # older, but a real file
    # The walker drops the older generation whatever the newest one is: verify sees none.
    assert list(iter_log_files(tmp_path / "store")) == []
    _usage_error(invoke("cat", directory), directory)
