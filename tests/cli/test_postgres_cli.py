"""``verify``, ``list``, ``inspect``, ``cat``, ``export``, ``repair`` and ``migrate`` given a
``postgresql://`` URL: the JSONL shapes, exit codes and schemas, sessions named
``URL#id`` with seqs instead of lines, no password in any output, and one typed line
when the server or the driver is missing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import Result

from dsh_store.postgres.store import PostgresStore
from dsh_store.postgres.url import redact
from tests.cli.conftest import record_session
from tests.cli.schema_check import errors, load_schema
from tests.conftest import REPO

Invoke = Callable[..., Result]

UNREACHABLE = "postgresql://agent:hunter2-secret@127.0.0.1:1/sessions"
"""A URL whose port nothing listens on (port 1 is privileged), with a password in it."""


def _password(url: str) -> str:
    password = urlsplit(url).password
    assert password, "the test server's URL carries a password: the masking is tested on it"
    return password


def _clean(result: Result, url: str) -> None:
    """No output of ``result`` holds the URL's password, and nothing printed a traceback."""
    secret = _password(url)
    assert secret not in result.stdout
    assert secret not in result.stderr
    assert "Traceback" not in result.stderr


def _json(result: Result, schema: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(result.stdout)
    assert errors(document, load_schema(schema)) == []
    return document


def _sql(url: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def _state(url: str) -> list[tuple[Any, ...]]:
    """Every stored row of the store: unchanged means nothing was written."""
    sessions = _sql(url, "SELECT session_id, next_seq, stored_bytes, revision FROM dsh_sessions")
    events = _sql(url, "SELECT session_id, seq, record FROM dsh_events ORDER BY 1, 2")
    cut = _sql(url, "SELECT session_id, seq, record FROM dsh_cut_records ORDER BY 1, 2")
    return sorted(sessions) + events + cut


def _store(url: str, tmp_path: Path) -> PostgresStore:
    """A store holding ``ok1`` (two turns, a cwd), ``ok2`` and ``open1`` (its turn open),
    each written as the JSONL store writes it (copied from ``tmp_path/src``)."""
    from dsh_store.copying import copy_sessions

    source = tmp_path / "src"
    record_session(source, "ok1", turns=2, cwd="/home/me/project")
    record_session(source, "ok2")
    record_session(source, "open1", open_turn=True)
    copy_sessions(source, url, sessions=["ok1", "ok2"])
    store = PostgresStore(url)
    with store.new("open1") as live:
        live.append("turn/start", {"turn": 1})
        live.append("step/start", {"turn": 1, "step": 1})
    return store


def _tear(url: str, session_id: str) -> None:
    """Store a record that is not JSON after the last one, as a tampered row would be."""
    record = b'{"type":"turn/start","seq":\n'
    (next_seq,) = _sql(
        url, "SELECT next_seq FROM dsh_sessions WHERE session_id = %s", (session_id,)
    )[0]
    _sql(
        url,
        "INSERT INTO dsh_events (session_id, seq, record) VALUES (%s, %s, %s)",
        (session_id, next_seq, record),
    )
    _sql(
        url,
        "UPDATE dsh_sessions SET next_seq = next_seq + 1, stored_bytes = stored_bytes + %s"
        " WHERE session_id = %s",
        (len(record), session_id),
    )


@pytest.mark.requires("postgres")
def test_verify_names_each_session_by_url_and_seq(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    _store(pg_url, tmp_path).close()
    text = invoke("verify", pg_url)
    _clean(text, pg_url)
    assert text.exit_code == 1  # the open turn fails, as a file's does
    name = redact(pg_url)
    assert f"{name}#ok1: ok (format 4, 11 events)" in text.stdout
    assert f"{name}#open1: open-turn (format 4, 2 events) FAIL" in text.stdout
    assert "  open-turn [seq 2]: the last turn never ended" in text.stdout
    assert text.stdout.rstrip().endswith("3 file(s): 1 open-turn, 2 ok; 1 failing")

    document = _json(invoke("verify", pg_url, "--json"), "verify")
    by_path = {item["path"]: item for item in document["files"]}
    (finding,) = by_path[f"{name}#open1"]["findings"]
    assert (finding["line"], finding["eventLine"], finding["offset"], finding["seq"]) == (
        None,
        None,
        None,
        2,
    )
    assert document["orphanTemps"] == []
    assert document["summary"] == {"ok": 2, "open-turn": 1}
    assert invoke("verify", pg_url, "--allow-repairable", "-q").exit_code == 0


@pytest.mark.requires("postgres")
def test_verify_takes_urls_and_paths_together_and_postgres_scheme(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    _store(pg_url, tmp_path).close()
    short = "postgres://" + pg_url.removeprefix("postgresql://")
    result = invoke("verify", tmp_path / "src" / "_no-cwd" / "ok2", short, "--json")
    _clean(result, pg_url)
    paths = [item["path"] for item in _json(result, "verify")["files"]]
    assert paths[0].endswith("ok2/session.v4.jsonl")  # in the order given
    assert paths[1:] == [f"{redact(short)}#{name}" for name in ("ok1", "ok2", "open1")]


@pytest.mark.requires("postgres")
def test_verify_reports_a_torn_row_and_repair_cuts_it_into_the_cut_table(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    _store(pg_url, tmp_path).close()
    _tear(pg_url, "ok2")
    document = _json(invoke("verify", pg_url, "--json"), "verify")
    torn = next(item for item in document["files"] if item["path"].endswith("#ok2"))
    assert torn["classification"] == "torn-tail"
    assert [(f["rule"], f["line"], f["offset"], f["seq"]) for f in torn["findings"]] == [
        ("unparsable-line", None, None, 6)
    ]

    before = _state(pg_url)
    planned = invoke("repair", pg_url, "--dry-run", "--json")
    _clean(planned, pg_url)
    assert planned.exit_code == 0
    assert _state(pg_url) == before  # a dry run reads only
    plan = {item["path"].rsplit("#", 1)[1]: item for item in _json(planned, "repair")["files"]}
    assert plan["ok2"]["status"] == "would-repair"
    assert (plan["ok2"]["truncateAt"], plan["ok2"]["sidecar"]) == (None, "dsh_cut_records")
    assert plan["ok2"]["tornBytes"] == len(b'{"type":"turn/start","seq":\n')
    assert plan["open1"]["closers"] == ["step/end", "turn/end"]
    assert plan["ok1"]["status"] == "clean"

    done = invoke("repair", pg_url)
    _clean(done, pg_url)
    assert done.exit_code == 0
    assert f"{redact(pg_url)}#ok2: repaired (torn-tail)" in done.stdout
    assert "kept in table dsh_cut_records" in done.stdout
    assert f"{redact(pg_url)}#open1: repaired (open-turn)" in done.stdout
    assert _sql(pg_url, "SELECT session_id, seq FROM dsh_cut_records") == [("ok2", 6)]
    assert invoke("verify", pg_url).exit_code == 0
    again = _json(invoke("repair", pg_url, "--json"), "repair")
    assert again["summary"] == {"clean": 3}  # a second repair changes nothing


@pytest.mark.requires("postgres")
def test_a_repair_killed_before_its_commit_changed_nothing_and_a_rerun_repairs(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    import os
    import signal

    from tests.cli.conftest import CONSOLE_SCRIPT

    _store(pg_url, tmp_path).close()
    _tear(pg_url, "ok2")
    before = _state(pg_url)
    killed = subprocess.run(
        [str(CONSOLE_SCRIPT), "repair", pg_url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DSH_STORE_FAILPOINT": "pg.repair.before-commit"},
    )
    assert killed.returncode == -signal.SIGKILL
    assert _password(pg_url) not in killed.stdout + killed.stderr
    assert _state(pg_url) == before  # the session's one transaction never committed
    assert invoke("repair", pg_url).exit_code == 0
    assert invoke("verify", pg_url).exit_code == 0


@pytest.mark.requires("postgres")
def test_repair_refuses_a_session_a_writer_holds(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    store = _store(pg_url, tmp_path)
    before = _state(pg_url)
    # open() repairs open1 itself; hold it open without writing: its lock is held.
    store.close()
    live = PostgresStore(pg_url).open("ok1")
    try:
        with live:
            live.append("turn/start", {"turn": 3})
            live.flush()
            result = invoke("repair", pg_url, "--json")
            _clean(result, pg_url)
            assert result.exit_code == 1
            items = {i["path"].rsplit("#", 1)[1]: i for i in _json(result, "repair")["files"]}
            assert items["ok1"]["status"] == "refused"
            assert "open for writing elsewhere" in items["ok1"]["reason"]
            assert items["open1"]["status"] == "repaired"  # the others go on
    finally:
        live.close()
    assert before != _state(pg_url)


@pytest.mark.requires("postgres")
def test_list_inspect_cat_and_export_read_a_url(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    _store(pg_url, tmp_path).close()
    listed = invoke("list", pg_url, "--json")
    _clean(listed, pg_url)
    rows = _json(listed, "list")["sessions"]
    assert [(row["id"], row["events"], row["status"], row["cwd"]) for row in rows] == [
        ("ok1", 11, "current", "/home/me/project"),
        ("ok2", 6, "current", None),
        ("open1", 2, "current", None),
    ]
    assert rows[0]["path"] == f"{redact(pg_url)}#ok1"
    text = invoke("list", env={"DSH_STORE_ROOT": pg_url})  # the root's default may be a URL
    _clean(text, pg_url)
    assert "ok1" in text.stdout and "/home/me/project" in text.stdout

    # inspect and cat give what they give for the same log in a JSONL store.
    log = tmp_path / "src" / "--home-me-project--" / "ok1" / "session.v4.jsonl"
    from_pg = _json(invoke("inspect", pg_url, "--session", "ok1", "--json", "--events"), "inspect")
    from_file = _json(invoke("inspect", log, "--json", "--events"), "inspect")
    assert from_pg["files"][0].pop("path") == f"{redact(pg_url)}#ok1"
    from_file["files"][0].pop("path")
    assert from_pg == from_file
    opened = invoke("inspect", pg_url, "--session", "open1")
    _clean(opened, pg_url)
    assert opened.exit_code == 0
    assert "closers a load appends: step/end, turn/end" in opened.stdout

    cat = invoke("cat", pg_url, "--session", "ok1")
    _clean(cat, pg_url)
    assert cat.exit_code == 0
    assert cat.stdout_bytes == b"".join(log.read_bytes().splitlines(keepends=True)[1:])
    only = invoke("cat", pg_url, "--session", "ok1", "--type", "turn/end", "--from-seq", "6")
    assert [json.loads(line)["seq"] for line in only.stdout.splitlines()] == [10]

    exported = invoke("export", pg_url, "--session", "ok1")
    _clean(exported, pg_url)
    assert exported.stdout == invoke("export", log).stdout
    missing = invoke("inspect", pg_url, "--session", "nope", "--json")
    _clean(missing, pg_url)
    assert missing.exit_code == 1
    assert "nope" in json.loads(missing.stdout)["error"]["message"]


@pytest.mark.requires("postgres")
def test_reading_commands_never_write(pg_url: str, tmp_path: Path, invoke: Invoke) -> None:
    # An empty database stays without tables: readers never create the schema.
    readers: list[tuple[str, ...]] = [("verify", pg_url), ("list", pg_url)]
    for args in [*readers, ("repair", pg_url, "--dry-run")]:
        _clean(invoke(*args), pg_url)
    assert _sql(pg_url, "SELECT to_regclass('dsh_sessions')") == [(None,)]
    _store(pg_url, tmp_path).close()
    _tear(pg_url, "ok2")
    before = _state(pg_url)
    commands: list[tuple[str, ...]] = [
        ("verify", pg_url, "--json"),
        ("list", pg_url),
        ("inspect", pg_url, "--session", "open1", "--messages"),
        ("inspect", pg_url, "--session", "ok2"),
        ("cat", pg_url, "--session", "open1"),
        ("export", pg_url, "--session", "open1", "--format", "html"),
        ("repair", pg_url, "--dry-run"),
        ("migrate", pg_url, "--check"),
    ]
    for args in commands:
        _clean(invoke(*args), pg_url)
    assert _state(pg_url) == before


@pytest.mark.requires("postgres")
def test_committed_corruption_is_reported_not_repaired(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    _store(pg_url, tmp_path).close()
    # A bad row followed by a committed turn/end: acknowledged history, never cut.
    _sql(
        pg_url,
        "UPDATE dsh_events SET record = %s WHERE session_id = 'ok1' AND seq = 3",
        (b"not json\n",),
    )
    before = _state(pg_url)
    document = _json(invoke("verify", pg_url, "--json"), "verify")
    bad = next(item for item in document["files"] if item["path"].endswith("#ok1"))
    assert bad["classification"] == "corrupt"
    assert [(f["line"], f["offset"], f["seq"]) for f in bad["findings"]] == [(None, None, 3)]
    repaired = _json(invoke("repair", pg_url, "--json"), "repair")
    refusal = next(item for item in repaired["files"] if item["path"].endswith("#ok1"))
    assert refusal["status"] == "refused"
    assert "committed corruption" in refusal["reason"]
    cat = invoke("cat", pg_url, "--session", "ok1")
    _clean(cat, pg_url)
    assert cat.exit_code == 1
    assert cat.stdout == ""  # the whole session is checked before its first line
    assert f"error: {redact(pg_url)}#ok1 (seq 3): corrupt session log" in cat.stderr
    assert "pg:/" not in cat.stderr
    assert _state(pg_url) != before  # open1 was repaired by the repair run
    assert _sql(pg_url, "SELECT record FROM dsh_events WHERE session_id = 'ok1' AND seq = 3") == [
        (b"not json\n",)
    ]


@pytest.mark.requires("postgres")
def test_a_session_row_whose_header_does_not_parse_is_reported(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    _store(pg_url, tmp_path).close()
    _sql(pg_url, "UPDATE dsh_sessions SET header = %s WHERE session_id = 'ok2'", (b"{nope\n",))
    ((header,),) = _sql(pg_url, "SELECT header FROM dsh_sessions WHERE session_id = 'ok1'")
    elsewhere = bytes(header).replace(b'"id":"ok1"', b'"id":"elsewhere"')
    assert elsewhere != bytes(header)
    _sql(pg_url, "UPDATE dsh_sessions SET header = %s WHERE session_id = 'ok1'", (elsewhere,))
    document = _json(invoke("verify", pg_url, "--json"), "verify")
    bad = next(item for item in document["files"] if item["path"].endswith("#ok2"))
    assert bad["classification"] == "not-a-session"
    (finding,) = bad["findings"]
    assert finding["message"].startswith(f"{redact(pg_url)}#ok2: not a session log: ")
    assert "pg:/" not in finding["message"]
    rows = {
        row["path"].rsplit("#", 1)[1]: row
        for row in _json(invoke("list", pg_url, "--json"), "list")["sessions"]
    }
    assert (rows["ok2"]["id"], rows["ok2"]["status"], rows["ok2"]["events"]) == (
        None,
        "not-a-session",
        None,
    )
    assert (rows["ok1"]["id"], rows["ok1"]["misfiled"]) == ("elsewhere", True)
    assert "misfiled" in invoke("list", pg_url).stdout
    copied = invoke("copy", pg_url, tmp_path / "dst", "--json")
    assert copied.exit_code == 1
    items = {item["session"]: item for item in json.loads(copied.stdout)["sessions"]}
    assert [items[key]["status"] for key in ("ok1", "ok2", "open1")] == [
        "refused",
        "refused",
        "refused",
    ]
    assert not (tmp_path / "dst" / "--home-me-project--" / "elsewhere").exists()


def test_migrate_of_a_url_has_nothing_to_do(invoke: Invoke) -> None:
    text = invoke("migrate", UNREACHABLE)
    _clean(text, UNREACHABLE)
    assert text.exit_code == 0
    assert "holds format-4 sessions only, so there is nothing to migrate" in text.stderr
    document = invoke("migrate", UNREACHABLE, "--check", "--json")
    assert document.exit_code == 0
    assert _json(document, "migrate") == {"schema": 1, "files": [], "summary": {}}
    assert invoke("migrate", UNREACHABLE, "--in-place").exit_code == 2


def test_a_url_needs_session_and_a_path_takes_none(invoke: Invoke, tmp_path: Path) -> None:
    for command in ("inspect", "cat", "export"):
        result = invoke(command, UNREACHABLE)
        _clean(result, UNREACHABLE)
        assert result.exit_code == 2
        assert "--session ID" in result.stderr
    log = record_session(tmp_path, "s1")
    assert invoke("cat", log, "--session", "s1").exit_code == 2
    salvage = invoke("repair", UNREACHABLE, "--salvage", "--output", tmp_path / "out.jsonl")
    _clean(salvage, UNREACHABLE)
    assert salvage.exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ("verify", UNREACHABLE),
        ("verify", UNREACHABLE, "--json"),
        ("list", UNREACHABLE, "--json"),
        ("inspect", UNREACHABLE, "--session", "s1"),
        ("cat", UNREACHABLE, "--session", "s1"),
        ("export", UNREACHABLE, "--session", "s1"),
        ("repair", UNREACHABLE, "--dry-run"),
    ],
)
def test_an_unreachable_server_is_one_typed_line(invoke: Invoke, args: tuple[str, ...]) -> None:
    pytest.importorskip("psycopg")
    result = invoke(*args)
    _clean(result, UNREACHABLE)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: postgresql://agent:***@127.0.0.1:1/sessions: ")
    assert "failed: connection failed" in line
    assert "check that the server is up and reachable" in line
    if "--json" in args:
        assert json.loads(result.stdout)["error"]["exitCode"] == 1


def test_an_unreachable_store_in_copy_and_under_debug_keeps_the_password(
    invoke: Invoke, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg")
    record_session(tmp_path / "src", "s1")
    for args in (
        ("copy", tmp_path / "src", UNREACHABLE, "--json"),
        ("copy", UNREACHABLE, tmp_path / "dst"),
        ("--debug", "verify", UNREACHABLE),
        ("--debug", "copy", tmp_path / "src", UNREACHABLE),
    ):
        result = invoke(*args)
        assert result.exit_code == 1
        assert _password(UNREACHABLE) not in result.stdout + result.stderr
        assert result.stderr.splitlines()[-1].startswith("error: postgresql://agent:***@")
    assert not (tmp_path / "dst").exists()


@pytest.mark.parametrize("command", ["verify", "list", "repair", "copy"])
def test_without_psycopg_a_url_says_which_extra_to_install(command: str, tmp_path: Path) -> None:
    """The driver made unimportable in a real process, as when the extra is not installed."""
    args = [command, UNREACHABLE]
    if command == "copy":
        record_session(tmp_path, "s1")
        args = [command, str(tmp_path), UNREACHABLE]
    probe = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # import psycopg now raises ImportError\n"
        "from dsh_store.cli import run\n"
        f"sys.argv = ['dsh-store', *{args!r}]\n"
        "run()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        "error: postgresql://agent:***@127.0.0.1:1/sessions: PostgreSQL stores need the "
        "postgres extra (psycopg 3): pip install 'dsh-store[postgres]'\n"
    )
