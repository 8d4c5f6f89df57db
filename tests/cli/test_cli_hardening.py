"""Hardening of ``cat``, ``list``, ``inspect``, ``verify --json``, ``demo`` and ``migrate``.

Each test pins one defect found by poking at the command line: corrupt logs streamed by
``cat``, schema-breaking JSON, a reused demo root, misleading OS error reasons and
terminal control sequences from log content.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from dsh_store.errors import CorruptLogError
from dsh_store.summary import iter_v4_lines
from tests.cli.conftest import record_session, run_script, write_header
from tests.cli.schema_check import errors, load_schema

Invoke = Callable[..., Result]

ESC = "\x1b"


def _rewrite_header(log: Path, **changes: Any) -> None:
    header, rest = log.read_bytes().split(b"\n", 1)
    value = json.loads(header)
    value.update(changes)
    log.write_bytes(json.dumps(value, separators=(",", ":")).encode() + b"\n" + rest)


def _lines(log: Path) -> list[bytes]:
    return log.read_bytes().splitlines(keepends=True)


# -- cat: committed corruption stops the output ---------------------------------------------


def test_cat_stops_at_a_committed_bad_payload_after_printing_the_events_before_it(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = record_session(tmp_path, "s", turns=2)
    lines = _lines(log)
    assert b'"type":"system/message"' in lines[3]  # seq 2, line 4; turn/ends follow
    offset = sum(map(len, lines[:3]))
    lines[3] = lines[3].replace(b'"step":1', b'"step":"one"', 1)
    log.write_bytes(b"".join(lines))
    result = invoke("cat", log)
    assert result.exit_code == 1
    assert result.stdout_bytes == lines[1] + lines[2]  # seqs 0 and 1, nothing past line 4
    assert result.stderr.startswith(f"error: {log}:4 (byte {offset}, seq 2): corrupt session log")
    assert "data.step" in result.stderr and len(result.stderr.splitlines()) == 1


def test_cat_refuses_a_log_with_an_invalid_header(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=1)
    _rewrite_header(log, id=5)
    result = invoke("cat", log)
    assert result.exit_code == 1
    assert result.stdout_bytes == b""
    assert result.stderr.startswith(f"error: {log}:1 (byte 0): corrupt session log: invalid header")


def test_cat_still_prints_a_clean_log_and_hides_a_torn_tail(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=2, open_turn=True)
    body = b"".join(_lines(log)[1:])
    with open(log, "ab") as handle:
        handle.write(b'{"type":"turn/')
    result = invoke("cat", log, "--from-seq", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == b"".join(body.splitlines(keepends=True)[1:])


def test_iter_v4_lines_checks_the_whole_log_before_yielding(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=2)
    clean = [line for _, _, line in iter_v4_lines(log)]
    assert clean == _lines(log)[1:]
    lines = _lines(log)
    lines[-2] = lines[-2].replace(b'"step":1', b'"step":-1', 1)  # the last step/end
    log.write_bytes(b"".join(lines))
    yielded: list[bytes] = []
    with pytest.raises(CorruptLogError):
        for _, _, line in iter_v4_lines(log):
            yielded.append(line)
    assert yielded == []


# -- list --json: every row matches docs/schemas/list.schema.json --------------------------


def test_list_json_rows_are_schema_valid_with_odd_header_values(
    invoke: Invoke, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    _rewrite_header(record_session(root, "a-created-str"), createdAt="x")
    _rewrite_header(record_session(root, "b-created-float"), createdAt=1.5)
    _rewrite_header(record_session(root, "c-cwd-int", cwd="/w"), cwd=7)
    with open(record_session(root, "d-neg-seq"), "ab") as handle:
        handle.write(b'{"type":"x","seq":-5}\n')
    _rewrite_header(record_session(root, "e-id-int"), id=5)
    result = invoke("list", root, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("list")) == []
    rows = document["sessions"]
    assert [(r["id"], r["created"], r["cwd"], r["events"]) for r in rows] == [
        ("a-created-str", None, None, 6),
        ("b-created-float", None, None, 6),
        ("c-cwd-int", 1_700_000_000_000, None, 6),
        ("d-neg-seq", 1_700_000_000_000, None, None),
    ]  # the header with id 5 names no session: not listed


# -- verify --json / inspect --json: a negative version is null ----------------------------


@pytest.mark.parametrize("version", [-1, 2.5])
def test_an_invalid_header_version_is_reported_as_null(
    invoke: Invoke, tmp_path: Path, version: float
) -> None:
    log = record_session(tmp_path, "s", turns=1)
    _rewrite_header(log, version=version)
    verified = invoke("verify", log, "--json")
    assert verified.exit_code == 1
    report = json.loads(verified.stdout)
    assert errors(report, load_schema("verify")) == []
    assert report["files"][0]["version"] is None
    inspected = invoke("inspect", log, "--json")
    assert inspected.exit_code == 1
    document = json.loads(inspected.stdout)
    assert errors(document, load_schema("inspect")) == []
    (summary,) = document["files"]
    assert summary["version"] is None and summary["findings"]


# -- demo --root: missing or empty only; errors on stderr ----------------------------------


def test_demo_refuses_a_root_that_is_not_empty_and_touches_nothing(
    invoke: Invoke, tmp_path: Path
) -> None:
    root = tmp_path / "mine"
    (root / "fixtures" / "mine").mkdir(parents=True)
    (root / "fixtures" / "mine" / "x.jsonl").write_bytes(b'{"bad')
    result = invoke("demo", "--root", root)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"error: {root}: the directory is not empty; pass a new or empty directory as --root\n"
    )
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "fixtures",
        "fixtures/mine",
        "fixtures/mine/x.jsonl",
    ]


def test_demo_runs_in_an_existing_empty_root_and_refuses_a_rerun(
    invoke: Invoke, tmp_path: Path
) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    first = run_script("demo", "--root", root)
    assert first.returncode == 0, first.stdout + first.stderr
    before = sorted(root.rglob("*"))
    rerun = invoke("demo", "--root", root)
    assert rerun.exit_code == 2 and rerun.stdout == ""
    assert rerun.stderr.startswith(f"error: {root}: the directory is not empty")
    assert sorted(root.rglob("*")) == before


def test_demo_recorder_failure_goes_to_stderr(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dsh_store.demo

    monkeypatch.setattr(dsh_store.demo, "_record_and_kill", lambda _root: "exit 1: boom")
    result = invoke("demo", "--root", tmp_path / "d")
    assert result.exit_code == 1
    assert "boom" not in result.stdout
    assert result.stderr.startswith("error: the demo's recording child failed")
    assert "exit 1: boom" in result.stderr


# -- migrate: an OS error names what failed on the user's path -----------------------------


def test_migrate_reason_names_the_output_that_cannot_be_written(
    invoke: Invoke, tmp_path: Path
) -> None:
    source = tmp_path / "old.jsonl"
    write_header(source, 1)
    output = tmp_path / "nodir" / "x.jsonl"
    result = invoke("migrate", source, "-o", output, "--json")
    assert result.exit_code == 1
    (row,) = json.loads(result.stdout)["files"]
    assert row["status"] == "refused"
    assert row["reason"] == f"cannot write {output}: No such file or directory"


def test_os_reasons_for_reads_links_and_other_paths(tmp_path: Path) -> None:
    from dsh_store.bulk import one_line

    source = tmp_path / "old.jsonl"
    temp = f"{tmp_path}/new.jsonl.0a1b2c3d4e5f.tmp"
    assert one_line(PermissionError(13, "Permission denied", str(source)), source=source) == (
        f"cannot read {source}: Permission denied"
    )
    linked = FileExistsError(17, "File exists", temp, f"{tmp_path}/new.jsonl")
    assert one_line(linked) == f"cannot write {tmp_path}/new.jsonl: File exists"
    assert one_line(OSError(5, "Input/output error", "/x/dir")) == "/x/dir: Input/output error"
    assert one_line(OSError(28, "No space left on device")) == "No space left on device"


# -- text output: no control sequence from a log reaches the terminal ----------------------


def _hostile_session(root: Path) -> Path:
    log = record_session(root, "s", turns=1, cwd="/w")
    _rewrite_header(log, cwd=f"/w/p{ESC}]0;pwned\a")
    lines = _lines(log)
    lines[4] = lines[4].replace(b"question 1", b"question \\u001b[2J\\u009b1;1H 1", 1)
    log.write_bytes(b"".join(lines))
    return log


def test_list_text_escapes_control_characters_and_json_stays_exact(
    invoke: Invoke, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    _hostile_session(root)
    text = invoke("list", root)
    assert text.exit_code == 0, text.output
    assert ESC not in text.stdout and "\a" not in text.stdout
    assert "/w/p\\x1b]0;pwned\\x07" in text.stdout
    rows = json.loads(invoke("list", root, "--json").stdout)["sessions"]
    assert rows[0]["cwd"] == f"/w/p{ESC}]0;pwned\a"


def test_inspect_text_escapes_control_characters_and_json_stays_exact(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = _hostile_session(tmp_path)
    text = invoke("inspect", log, "--messages")
    assert text.exit_code == 0, text.output
    assert ESC not in text.stdout and "\x9b" not in text.stdout and "\a" not in text.stdout
    assert "  cwd: /w/p\\x1b]0;pwned\\x07\n" in text.stdout
    assert "  [user] question \\x1b[2J\\x9b1;1H 1\n" in text.stdout
    (summary,) = json.loads(invoke("inspect", log, "--json", "--messages").stdout)["files"]
    assert summary["header"]["cwd"] == f"/w/p{ESC}]0;pwned\a"
    assert f"{ESC}[2J" in summary["messages"][1]["text"]


def test_printable_keeps_tabs_and_text_and_escapes_c0_c1_and_del() -> None:
    from dsh_store.summary import printable

    assert printable("a\tb é ✓") == "a\tb é ✓"
    assert printable("\x00\n\r\x1b\x7f\x80\x9f\xa0") == "\\x00\\x0a\\x0d\\x1b\\x7f\\x80\\x9f\xa0"
