"""``dsh-store pg init`` and the schema's upgrade path, against a real server.

Every command runs as a real subprocess (``python -m dsh_store``); the test server's URL
carries a real password, and no output of any run may hold it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from dsh_store import JsonlStore
from dsh_store.errors import SchemaVersionError
from dsh_store.jsonl.layout import project_key
from dsh_store.payloads import step_start, turn_end, turn_start, user_message
from dsh_store.postgres.schema import MIGRATIONS, SCHEMA_VERSION, advisory_key
from dsh_store.postgres.store import PostgresStore
from dsh_store.postgres.url import redact
from tests.cli.schema_check import errors, load_schema
from tests.conftest import REPO

pytestmark = pytest.mark.requires("postgres")

V1_DDL = Path(__file__).parent / "fixtures" / "schema-v1.sql"


def _dsh_store(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_store", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )


def _password(url: str) -> str:
    password = urlsplit(url).password
    assert password, "the test server's URL is expected to carry a password"
    return password


def _no_secret(url: str, *runs: subprocess.CompletedProcess[str]) -> None:
    for run in runs:
        assert _password(url) not in run.stdout + run.stderr


def _sql(url: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def _catalog(url: str) -> list[tuple[Any, ...]]:
    """The store's tables, columns and indexes, and its version rows (no timestamps)."""
    return [
        *_sql(
            url,
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() ORDER BY 1, 2",
        ),
        *_sql(
            url,
            "SELECT indexname, replace(indexdef, current_schema() || '.', '') FROM pg_indexes"
            " WHERE schemaname = current_schema()"
            " ORDER BY 1",
        ),
        *_sql(url, "SELECT version FROM dsh_schema_version ORDER BY version"),
    ]


def _versions(url: str) -> list[int]:
    return [int(row[0]) for row in _sql(url, "SELECT version FROM dsh_schema_version ORDER BY 1")]


def test_init_twice_creates_then_does_nothing_and_says_so(pg_url: str) -> None:
    first = _dsh_store("pg", "init", pg_url)
    assert first.returncode == 0, first.stderr
    catalog = _catalog(pg_url)
    second = _dsh_store("pg", "init", pg_url)
    assert second.returncode == 0, second.stderr
    assert _catalog(pg_url) == catalog
    assert _versions(pg_url) == list(range(1, SCHEMA_VERSION + 1))
    shown = redact(pg_url)
    applied = ", ".join(f"{m.version} ({m.summary})" for m in MIGRATIONS)
    assert first.stdout.strip() == (
        f"created schema version {SCHEMA_VERSION} in {shown} (database schema "
        f"{_current_schema(pg_url)}): applied {applied}"
    )
    assert second.stdout.strip().endswith("is current; nothing to do")
    assert f"schema version {SCHEMA_VERSION} in {shown}" in second.stdout
    _no_secret(pg_url, first, second)


def test_init_json_is_the_documented_object(pg_url: str) -> None:
    created = json.loads(_dsh_store("pg", "init", pg_url, "--json").stdout)
    again = json.loads(_dsh_store("pg", "init", pg_url, "--json").stdout)
    schema = load_schema("pg-init")
    assert errors(created, schema) == [] and errors(again, schema) == []
    assert (created["action"], created["versionBefore"], created["versionAfter"]) == (
        "created",
        0,
        SCHEMA_VERSION,
    )
    assert [step["version"] for step in created["applied"]] == list(range(1, SCHEMA_VERSION + 1))
    assert (again["action"], again["applied"]) == ("unchanged", [])
    assert created["store"] == redact(pg_url)


def _current_schema(url: str) -> str:
    return str(_sql(url, "SELECT current_schema()")[0][0])


def _v1_store_with_a_session(url: str, tmp_path: Path) -> bytes:
    """A version-1 store made by the frozen v1 DDL, holding one session inserted as the v1
    code stored it (header and records as line bytes); the session's JSONL bytes."""
    import psycopg

    jsonl = JsonlStore(tmp_path / "jsonl", clock=lambda: 1_700_000_000_000)
    with jsonl.new("s1", cwd="/home/me/project") as live:
        live.append("turn/start", turn_start(1))
        live.append("step/start", step_start(1, 1))
        live.append("user/message", user_message("hi", id="u1"), surface_op="append")
    log = jsonl.locate("s1").read_bytes()
    header, *records = log.splitlines(keepends=True)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(V1_DDL.read_text())
        connection.execute(
            "INSERT INTO dsh_sessions (session_id, project_key, header, created_at, next_seq,"
            " stored_bytes) VALUES (%s, %s, %s, %s, %s, %s)",
            (
                "s1",
                project_key("/home/me/project"),
                header,
                1_700_000_000_000,
                len(records),
                len(log),
            ),
        )
        for seq, record in enumerate(records):
            connection.execute(
                "INSERT INTO dsh_events (session_id, seq, record) VALUES (%s, %s, %s)",
                ("s1", seq, record),
            )
    return log


def test_the_frozen_v1_ddl_is_migration_1() -> None:
    """Migration 1 is never edited: it is, statement for statement, the frozen v1 DDL."""
    frozen = [
        " ".join(statement.split())
        for statement in "\n".join(
            line for line in V1_DDL.read_text().splitlines() if not line.startswith("--")
        ).split(";")
        if statement.strip() and "dsh_schema_version" not in statement
    ]
    assert frozen == [" ".join(statement.split()) for statement in MIGRATIONS[0].statements]


def test_a_v1_store_upgrades_to_current_and_keeps_its_sessions(pg_url: str, tmp_path: Path) -> None:
    log = _v1_store_with_a_session(pg_url, tmp_path)
    with pytest.raises(SchemaVersionError) as refused:
        PostgresStore(pg_url).list()  # a reader never upgrades: it names the command
    assert f"dsh-store pg init {redact(pg_url)}" in str(refused.value)
    upgraded = _dsh_store("pg", "init", pg_url)
    assert upgraded.returncode == 0, upgraded.stderr
    applied = ", ".join(f"{m.version} ({m.summary})" for m in MIGRATIONS[1:])
    assert upgraded.stdout.startswith(f"upgraded schema version 1 to {SCHEMA_VERSION} in ")
    assert upgraded.stdout.strip().endswith(f"applied {applied}")
    assert _versions(pg_url) == list(range(1, SCHEMA_VERSION + 1))
    fresh = _fresh_catalog(pg_url)
    assert _catalog(pg_url) == fresh  # the upgraded schema is the one init creates
    store = PostgresStore(pg_url)
    assert b"".join(store.iter_records("s1")) == log
    with store.open("s1") as live:  # repairs the open turn, then continues it
        live.append("turn/start", turn_start(2))
        live.append("turn/end", turn_end(2))
    # 3 stored, 2 closers and the end-seed marker written on open, then 2 appended.
    assert [event.seq for event in store.inspect("s1").events] == list(range(8))
    _no_secret(pg_url, upgraded)


def _fresh_catalog(url: str) -> list[tuple[Any, ...]]:
    """The catalog of a schema ``pg init`` creates from nothing, beside ``url``'s."""
    from tests.postgres.server import create_schema, drop_schema

    schema, fresh = create_schema()
    try:
        assert _dsh_store("pg", "init", fresh).returncode == 0
        return _catalog(fresh)
    finally:
        drop_schema(schema)


def test_a_v1_store_is_upgraded_only_by_init(pg_url: str, tmp_path: Path) -> None:
    """No writer upgrades an older schema on its own (hosts still running the older
    dsh-store would be refused mid-session): reads and writes name ``pg init``."""
    _v1_store_with_a_session(pg_url, tmp_path)
    store = PostgresStore(pg_url)
    for attempt in (lambda: store.new("s2"), lambda: store.open("s1"), store.list):
        with pytest.raises(SchemaVersionError) as refused:
            attempt()
        assert (refused.value.found, refused.value.supported) == (1, SCHEMA_VERSION)
        assert f"run `dsh-store pg init {redact(pg_url)}` to upgrade it" in str(refused.value)
    assert _versions(pg_url) == [1]
    assert PostgresStore(pg_url).init().action == "upgraded"
    with PostgresStore(pg_url).new("s2") as live:
        live.append("turn/start", turn_start(1))
    assert [header.id for header in PostgresStore(pg_url).list()] == ["s1", "s2"]


def test_two_processes_initialising_at_once_apply_each_migration_once(pg_url: str) -> None:
    """Both wait on the schema's advisory lock (held here), then run one after the other."""
    import psycopg

    key = advisory_key("schema", _current_schema(pg_url))
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        children = [
            subprocess.Popen(
                [sys.executable, "-m", "dsh_store", "pg", "init", pg_url, "--json"],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            _wait_for_waiters(holder, key, 2, children)
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
        outputs = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0], outputs
    documents = [json.loads(stdout) for stdout, _ in outputs]
    assert sorted(document["action"] for document in documents) == ["created", "unchanged"]
    assert _versions(pg_url) == list(range(1, SCHEMA_VERSION + 1))
    assert all(_password(pg_url) not in stdout + stderr for stdout, stderr in outputs)


def _wait_for_waiters(
    connection: Any, key: int, count: int, children: list[subprocess.Popen[str]]
) -> None:
    """Poll until ``count`` sessions wait for advisory lock ``key`` (a child failing early,
    or never getting there within a minute, fails the test)."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    deadline = time.monotonic() + 60
    while True:
        (waiting,) = connection.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND classid = %s AND objid = %s AND objsubid = 1",
            (unsigned >> 32, unsigned & 0xFFFFFFFF),
        ).fetchone()
        if waiting >= count:
            return
        for child in children:
            if child.poll() is not None:
                pytest.fail(f"pg init ended before the lock was released: {child.communicate()}")
        if time.monotonic() > deadline:
            pytest.fail(f"only {waiting} of {count} pg init processes reached the schema lock")
        time.sleep(0.05)


def test_a_newer_schema_is_refused_and_left_untouched(pg_url: str) -> None:
    assert _dsh_store("pg", "init", pg_url).returncode == 0
    newer = SCHEMA_VERSION + 1
    _sql(pg_url, "INSERT INTO dsh_schema_version (version) VALUES (%s)", (newer,))
    catalog = _catalog(pg_url)
    refused = _dsh_store("pg", "init", pg_url)
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.strip() == (
        f"error: {redact(pg_url)}: written by a newer dsh-store (schema {newer}, this one "
        f"knows up to {SCHEMA_VERSION}); upgrade dsh-store"
    )
    as_json = _dsh_store("pg", "init", pg_url, "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["exitCode"] == 1
    assert _catalog(pg_url) == catalog
    with pytest.raises(SchemaVersionError) as raised:
        PostgresStore(pg_url).init()
    assert (raised.value.found, raised.value.supported) == (newer, SCHEMA_VERSION)
    with pytest.raises(SchemaVersionError):
        PostgresStore(pg_url).list()
    with pytest.raises(SchemaVersionError):
        PostgresStore(pg_url).new("s1")  # a writer refuses before anything is queued
    _no_secret(pg_url, refused, as_json)


def test_an_upgrade_killed_before_its_commit_leaves_the_previous_version(
    pg_url: str, tmp_path: Path
) -> None:
    log = _v1_store_with_a_session(pg_url, tmp_path)
    catalog = _catalog(pg_url)
    killed = _dsh_store("pg", "init", pg_url, DSH_STORE_FAILPOINT="pg.schema.before-commit")
    assert killed.returncode == -signal.SIGKILL
    assert _catalog(pg_url) == catalog  # all or nothing: still exactly version 1
    upgraded = _dsh_store("pg", "init", pg_url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert upgraded.stdout.startswith("upgraded schema version 1 to ")
    assert b"".join(PostgresStore(pg_url).iter_records("s1")) == log


def test_errors_never_print_the_password(pg_url: str) -> None:
    """An unreachable server and a refused login name the store with its password masked."""
    parts = urlsplit(pg_url)
    password = _password(pg_url)
    unreachable = pg_url.replace(f"{parts.hostname}:{parts.port}", "127.0.0.1:1")
    wrong_login = pg_url.replace(f":{password}@", ":not-the-password@")
    query_password = (
        f"postgresql://{parts.username}@{parts.hostname}:{parts.port}{parts.path}"
        f"?password={password}x&{parts.query}"
    )
    for url, secret in (
        (unreachable, password),
        (wrong_login, "not-the-password"),
        (query_password, password),
    ):
        for extra in ((), ("--json",)):
            run = _dsh_store("pg", "init", url, *extra)
            assert run.returncode == 1, run
            assert secret not in run.stdout + run.stderr
            assert redact(url) in run.stderr
            assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1


def test_init_refuses_what_is_not_a_url(tmp_path: Path) -> None:
    run = _dsh_store("pg", "init", str(tmp_path))
    assert run.returncode == 2
    assert run.stderr.strip() == f"error: {tmp_path} is not a postgresql:// URL"


def test_new_records_are_compressed_with_lz4_where_the_server_has_it(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as connection:
        try:
            connection.execute("CREATE TEMP TABLE lz4_probe (b bytea COMPRESSION lz4)")
            supported = True
        except psycopg.Error:
            supported = False
    assert PostgresStore(pg_url).init().after == SCHEMA_VERSION
    with PostgresStore(pg_url).new("s1") as live:
        live.append("turn/start", turn_start(1))
        live.append("user/message", user_message("x" * 20_000, id="u1"), surface_op="append")
    found = _sql(
        pg_url,
        "SELECT pg_column_compression(record) FROM dsh_events WHERE session_id = 's1' AND seq = 1",
    )
    assert found == [("lz4" if supported else "pglz",)]
    assert b"x" * 20_000 in b"".join(PostgresStore(pg_url).iter_records("s1"))
