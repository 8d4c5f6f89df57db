"""``dsh-store inspect``, ``list`` and ``cat``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.cli.conftest import V2_LOG, record_session, write_header
from tests.cli.schema_check import errors, load_schema

Invoke = Callable[..., Result]


def test_inspect_counts_turns_steps_types_and_bytes(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=2, cwd="/work/p")
    result = invoke("inspect", log, "--json", "--events", "--messages")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("inspect")) == []
    assert document["schema"] == 1 and document["summary"] == {"ok": 1}
    (summary,) = document["files"]
    assert summary["classification"] == "ok"
    assert summary["header"]["id"] == "s" and summary["header"]["cwd"] == "/work/p"
    assert (summary["events"], summary["turns"], summary["steps"]) == (11, 2, 2)
    assert summary["openTurn"] is None and summary["closers"] == []
    lines = log.read_bytes().splitlines(keepends=True)[1:]
    assert sum(info["bytes"] for info in summary["byType"].values()) == sum(map(len, lines))
    assert summary["byType"]["turn/start"] == {"count": 2, "bytes": len(lines[0]) * 2}
    assert [e["seq"] for e in summary["eventList"]] == list(range(11))
    assert summary["messages"] == [
        {"role": "system", "text": "be brief"},
        {"role": "user", "text": "question 1"},
        {"role": "user", "text": "question 2"},
    ]


def test_inspect_text_shows_the_open_turn(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=1, open_turn=True)
    result = invoke("inspect", log, "--events", "--messages")
    assert result.exit_code == 0
    assert "  classification: open-turn\n" in result.stdout
    assert "  open turn: 2 (a load closes it as interrupted)\n" in result.stdout
    assert "  #0      turn/start" in result.stdout
    assert "  [user] question 2" in result.stdout


def test_inspect_of_an_unrestorable_log_exits_1_with_its_findings(
    invoke: Invoke, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, _ = damaged
    result = invoke("inspect", root / "_no-cwd/corrupt-middle/session.v4.jsonl", "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert errors(document, load_schema("inspect")) == []
    (summary,) = document["files"]
    assert summary["classification"] == "corrupt" and "events" not in summary
    assert summary["findings"][0]["rule"] == "unparsable-line"
    directory = invoke("inspect", root / "loose")
    assert directory.exit_code == 2
    assert directory.stderr.startswith(f"error: {root}/loose: not a session directory")


def test_list_reads_headers_and_tails(invoke: Invoke, tmp_path: Path) -> None:
    root = tmp_path / "store"
    record_session(root, "b-clean", turns=2, cwd="/work/p")
    torn = record_session(root, "a-torn", turns=1)
    with open(torn, "ab") as handle:
        handle.write(b'{"type":')
    write_header(root / "--x--" / "c-old" / "session.jsonl", 0, session_id="c-old")
    result = invoke("list", root, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("list")) == []
    assert document["summary"] == {"torn-tail": 1, "current": 1, "needs-migration": 1}
    rows = document["sessions"]
    assert [(r["id"], r["version"], r["events"], r["status"], r["cwd"]) for r in rows] == [
        ("a-torn", 4, 6, "torn-tail", None),
        ("b-clean", 4, 11, "current", "/work/p"),
        ("c-old", 0, 0, "needs-migration", None),
    ]
    text = invoke("list", root)
    assert text.stdout.splitlines()[0].split() == [
        "ID",
        "VER",
        "EVENTS",
        "STATUS",
        "CREATED",
        "CWD",
    ]
    assert len(text.stdout.splitlines()) == 4


def test_list_default_root_comes_from_the_environment(invoke: Invoke, tmp_path: Path) -> None:
    record_session(tmp_path / "env-store", "s", turns=1)
    result = invoke("list", env={"DSH_STORE_ROOT": str(tmp_path / "env-store")})
    assert result.exit_code == 0
    assert result.stdout.startswith("ID ") and "\ns " in result.stdout
    home = invoke("list", env={"DSH_STORE_ROOT": "", "HOME": str(tmp_path / "home")})
    assert home.exit_code == 1
    assert home.stderr == (
        f"error: {tmp_path}/home/.dsh/sessions: no such store root (pass ROOT or set "
        "DSH_STORE_ROOT)\n"
    )
    (tmp_path / "empty").mkdir()
    assert invoke("list", tmp_path / "empty").stdout == f"no sessions under {tmp_path}/empty\n"


def test_cat_prints_v4_lines_with_filters(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=2)
    lines = log.read_bytes().splitlines(keepends=True)[1:]
    everything = invoke("cat", log)
    assert everything.exit_code == 0
    assert everything.stdout_bytes == b"".join(lines)
    tail = invoke("cat", log, "--from-seq", "9")
    assert tail.stdout_bytes == b"".join(lines[9:])
    users = invoke("cat", log, "--type", "user/message", "--type", "turn/end")
    types = [json.loads(line)["type"] for line in users.stdout.splitlines()]
    assert types == ["user/message", "turn/end", "user/message", "turn/end"]
    assert invoke("cat", log, "--from-seq", "-1").exit_code == 2


def test_cat_upgrades_old_logs_and_never_prints_a_torn_tail(invoke: Invoke, tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    shutil.copyfile(V2_LOG, old)
    assert invoke("migrate", old, "--output", tmp_path / "new.jsonl").exit_code == 0
    upgraded = (tmp_path / "new.jsonl").read_bytes().splitlines(keepends=True)[1:]
    assert invoke("cat", old).stdout_bytes == b"".join(upgraded) != b""
    log = record_session(tmp_path, "s", turns=1)
    clean = invoke("cat", log).stdout_bytes
    with open(log, "ab") as handle:
        handle.write(b'{"type":"turn/start","seq":6,"time":1,"data":{"turn":2}}')
    assert invoke("cat", log).stdout_bytes == clean


def test_cat_of_corruption_is_one_error_line(
    invoke: Invoke, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, _ = damaged
    result = invoke("cat", root / "_no-cwd/corrupt-middle/session.v4.jsonl")
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: ") and "[unparsable-line]" in result.stderr
    binary = invoke("cat", root / "loose" / "binary.jsonl")
    assert binary.exit_code == 1
    assert binary.stderr == (
        f"error: {root}/loose/binary.jsonl: not a session log: the first line is not valid "
        "JSON; pass a session.jsonl / session.vN.jsonl file\n"
    )
