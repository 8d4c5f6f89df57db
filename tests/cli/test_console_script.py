"""The installed ``dsh-store`` console script as a user runs it: real subprocesses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.conftest import (
    copy_tree,
    record_session,
    run_script,
    run_script_on_terminal,
    snapshot_tree,
)


def test_version_and_help_of_every_command() -> None:
    version = run_script("--version")
    assert version.returncode == 0 and version.stdout == "dsh-store, version 0.1.0\n"
    for command in ("verify", "migrate", "repair", "inspect", "list", "cat", "demo"):
        done = run_script(command, "--help")
        assert done.returncode == 0, done.stderr
        assert "Examples:" in done.stdout and f"dsh-store {command}" in done.stdout
    assert run_script("frobnicate").returncode == 2


def test_verify_damaged_copy_exit_codes_and_annotations(
    damaged: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, expected = damaged
    copy = copy_tree(root, tmp_path / "copy")
    before = snapshot_tree(copy)
    done = run_script("verify", copy, "--json", "--jobs", "2")
    assert done.returncode == 1 and done.stderr == ""
    classes = {
        str(Path(f["path"]).relative_to(copy)): f["classification"]
        for f in json.loads(done.stdout)["files"]
    }
    assert classes == expected
    github = run_script("verify", "_no-cwd/torn", "--format", "github", cwd=copy)
    assert github.returncode == 1
    assert github.stdout.startswith(
        "::error file=_no-cwd/torn/session.v4.jsonl,line=13,title=torn-tail::"
    )
    assert run_script("verify", "_no-cwd/clean", cwd=copy).returncode == 0
    assert run_script("verify", "_no-cwd/torn", "--allow-repairable", cwd=copy).returncode == 0
    assert snapshot_tree(copy) == before


def test_nasty_inputs_get_one_line_and_no_traceback(
    damaged: tuple[Path, dict[str, str]],
) -> None:
    root, _ = damaged
    cases = [
        (("inspect", root / "loose" / "loop.jsonl"), 1, "unreadable"),
        (("cat", root / "loose" / "loop.jsonl"), 1, "Too many levels of symbolic links"),
        (("cat", root / "loose" / "binary.jsonl"), 1, "the first line is not valid JSON"),
        (("verify", root / "no-logs-here"), 2, "no .jsonl session logs found"),
        (("repair", root / "no-logs-here"), 2, "no .jsonl session logs found"),
        (("cat", root / "loose"), 2, "not a session directory"),
        (("inspect", root), 2, "not a session directory"),
        (("list", root / "loose" / "empty.jsonl"), 1, "store root is not a directory"),
    ]
    for args, code, text in cases:
        done = run_script(*args)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, args
        assert text in done.stdout + done.stderr, (args, done.stderr)
    debug = run_script("--debug", "cat", root / "loose" / "binary.jsonl")
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.splitlines()[-1].startswith("error: ")


def test_no_color_and_pipes_are_plain(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=1)
    for env in ({"NO_COLOR": "1"}, {}):
        done = run_script("verify", log, env=env)
        assert done.returncode == 0 and "\x1b[" not in done.stdout + done.stderr


def test_migrate_repair_cat_inspect_end_to_end(tmp_path: Path) -> None:
    log = record_session(tmp_path / "store", "s", turns=1, open_turn=True)
    assert run_script("repair", tmp_path / "store", "--dry-run").returncode == 0
    assert run_script("verify", tmp_path / "store").returncode == 1
    assert run_script("repair", tmp_path / "store").returncode == 0
    assert run_script("verify", tmp_path / "store").returncode == 0
    cat = run_script("cat", log, "--type", "turn/end")
    reasons = [json.loads(line)["data"]["reason"]["kind"] for line in cat.stdout.splitlines()]
    assert reasons == ["completed", "interrupted"]
    listed = run_script("list", env={"DSH_STORE_ROOT": os.fspath(tmp_path / "store")})
    assert listed.returncode == 0 and " current " in listed.stdout
    (inspected,) = json.loads(run_script("inspect", log, "--json").stdout)["files"]
    assert inspected["turns"] == 2 and inspected["openTurn"] is None
    migrated = run_script("migrate", tmp_path / "store", "--check")
    assert migrated.returncode == 0 and migrated.stdout.endswith("1 current\n")


@pytest.mark.parametrize(("command", "label"), [("verify", "verifying"), ("repair", "repairing")])
def test_progress_bar_only_on_a_terminal_stderr(tmp_path: Path, command: str, label: str) -> None:
    for index in range(7):
        record_session(tmp_path / "store", f"s{index}", turns=1)
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    done, shown = run_script_on_terminal(command, tmp_path / "store", terminal="stderr", env=env)
    assert done.returncode == 0
    assert label.encode() in shown
    assert label.encode() not in done.stdout and b"\x1b[" not in done.stdout
    piped = run_script(command, tmp_path / "store")
    assert label not in piped.stderr and piped.stderr == ""
