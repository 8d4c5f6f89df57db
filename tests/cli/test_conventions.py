"""The conventions users bring from other tools: colour switches, ``-`` for stdin and
stdout, ``--debug`` after the subcommand, shell completion, readable times in ``list``."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from tests.cli.conftest import CONSOLE_SCRIPT, FIXED_CLOCK_MS, V2_LOG, record_session, run_script


def _run(
    *args: str | os.PathLike[str], stdin: bytes, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    full_env = {
        key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR")
    }
    full_env.update(env or {})
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *(os.fspath(arg) for arg in args)],
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        ((), {}, False),  # a pipe
        ((), {"FORCE_COLOR": "1"}, True),
        ((), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # NO_COLOR wins, as in pytest
        (("--color", "always"), {"NO_COLOR": "1"}, True),  # the option wins over both
        (("--color", "never"), {"FORCE_COLOR": "1"}, False),
    ],
)
def test_colour_follows_the_option_then_no_color_then_force_color(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], coloured: bool
) -> None:
    log = record_session(tmp_path, "s", turns=1)
    done = _run("verify", log, *args, stdin=b"", env=env)
    assert done.returncode == 0, done.stderr
    assert (b"\x1b[" in done.stdout) is coloured, done.stdout
    group = _run(*args, "verify", log, stdin=b"", env=env)  # before the subcommand too
    assert (b"\x1b[" in group.stdout) is coloured, group.stdout


def test_dash_reads_one_log_from_stdin_for_verify_inspect_and_cat(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=1, open_turn=True)
    data = log.read_bytes()
    verified = _run("verify", "-", "--json", stdin=data)
    assert verified.returncode == 1  # an open turn fails, as for the file itself
    document = json.loads(verified.stdout)
    assert [file["path"] for file in document["files"]] == ["-"]
    assert document["files"][0]["classification"] == "open-turn"
    both = _run("verify", "-", log, "--allow-repairable", stdin=data)
    assert both.returncode == 0 and both.stdout.decode().startswith("-: open-turn")
    inspected = _run("inspect", "-", "--json", stdin=data)
    assert json.loads(inspected.stdout)["files"][0]["path"] == "-"
    assert _run("cat", "-", stdin=data).stdout == run_script("cat", log).stdout.encode()
    empty = _run("cat", "-", stdin=b"")
    assert empty.returncode == 1
    assert empty.stderr == b"error: -: not a session log: the file is empty (0 bytes)\n"
    twice = _run("verify", "-", "-", stdin=data)
    assert twice.returncode == 2 and b"only once" in twice.stderr
    # The spooled copy lives in a private temp directory, removed afterwards.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert _run("verify", "-", stdin=data, env={"TMPDIR": str(scratch)}).returncode == 1
    assert list(scratch.iterdir()) == []


def test_output_dash_writes_the_log_to_stdout_and_the_result_to_stderr(tmp_path: Path) -> None:
    migrated = _run("migrate", V2_LOG, "--output", "-", stdin=b"")
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.startswith(b'{"type":"session","version":4')
    assert migrated.stderr.decode().startswith("migrated")
    assert " -> - " in migrated.stderr.decode()
    checked = _run("verify", "-", stdin=migrated.stdout)
    assert checked.returncode == 0, checked.stdout
    torn = record_session(tmp_path, "t", turns=1)
    with open(torn, "ab") as out:
        out.write(b'{"type":"turn/sta')
    salvaged = _run("repair", torn, "--salvage", "--output", "-", "--json", stdin=b"")
    assert salvaged.returncode == 0, salvaged.stderr
    assert json.loads(salvaged.stderr)["files"][0]["output"] == "-"
    assert _run("verify", "-", stdin=salvaged.stdout).returncode == 0


def test_debug_after_the_subcommand_shows_the_traceback(tmp_path: Path) -> None:
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x00\xff not json\n")
    plain = run_script("cat", binary)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    for args in (("cat", binary, "--debug"), ("--debug", "cat", binary)):
        debug = run_script(*args)
        assert debug.returncode == 1
        assert "Traceback (most recent call last)" in debug.stderr, args
        assert debug.stderr.splitlines()[-1].startswith("error: ")
    for command in ("verify", "migrate", "repair", "inspect", "list", "cat", "export", "demo"):
        shown = run_script(command, "--help")
        assert "--debug" in shown.stdout and "--color" in shown.stdout, command


def test_bash_completion_script_is_produced_and_completes_commands() -> None:
    script = _run(stdin=b"", env={"_DSH_STORE_COMPLETE": "bash_source"})
    assert script.returncode == 0
    assert b"_dsh_store_completion" in script.stdout
    assert b"complete -o nosort -F _dsh_store_completion dsh-store" in script.stdout
    words = _run(
        stdin=b"",
        env={
            "_DSH_STORE_COMPLETE": "bash_complete",
            "COMP_WORDS": "dsh-store ver",
            "COMP_CWORD": "1",
        },
    )
    assert b"plain,verify" in words.stdout


def test_list_shows_created_as_local_iso_time_and_json_keeps_milliseconds(tmp_path: Path) -> None:
    record_session(tmp_path, "s", turns=1)
    env = {"TZ": "Asia/Kolkata"}  # +05:30 all year: no daylight saving to guess about
    listed = _run("list", tmp_path, stdin=b"", env=env)
    assert listed.returncode == 0, listed.stderr
    row = listed.stdout.decode().splitlines()[1]
    assert "2023-11-15T03:43:20+05:30" in row
    assert datetime.fromisoformat("2023-11-15T03:43:20+05:30").timestamp() * 1000 == FIXED_CLOCK_MS
    as_json = json.loads(_run("list", tmp_path, "--json", stdin=b"", env=env).stdout)
    assert as_json["sessions"][0]["created"] == FIXED_CLOCK_MS


def test_usage_error_under_jsonl_is_one_json_line(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=1)
    done = _run("verify", log, "--format", "jsonl", "--json", stdin=b"")
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["error"]["kind"] == "usage"
