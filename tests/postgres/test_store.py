"""``PostgresStore`` against a real server: byte identity with JSONL, the tail check in SQL,
restore and repair, the advisory lock across processes, kills, a server restart, and many
concurrent writers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_store import JsonlStore
from dsh_store.errors import (
    ConcurrentModificationError,
    DatabaseError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
)
from dsh_store.payloads import step_end, step_start, turn_end, turn_start, user_message
from dsh_store.postgres.store import PostgresStore
from tests.conftest import REPO

pytestmark = pytest.mark.requires("postgres")

CLOCK = 1_700_000_000_000


def _clock() -> int:
    return CLOCK


def _write(store: PostgresStore | JsonlStore, session_id: str) -> None:
    """The same appends for any store: a closed turn, a reopen, an open turn."""
    with store.new(session_id, cwd="/home/me/project") as live:
        live.append("turn/start", turn_start(1))
        live.append("step/start", step_start(1, 1))
        live.append("user/message", user_message('héllo \u2028 "q"', id="u1"), surface_op="append")
        live.flush()
        live.append("step/end", step_end(1, 1))
        live.append("turn/end", turn_end(1))
    with store.open(session_id) as live:
        live.append("turn/start", turn_start(2))
        live.append("step/start", step_start(2, 1))


def _child(
    url: str, session_id: str, mode: str, count: int = 0, **env: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.postgres.pg_child", url, session_id, mode, str(count)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def _line(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if not line:
        child.wait(timeout=60)
        assert child.stderr is not None
        pytest.fail(f"child said nothing (status {child.returncode}): {child.stderr.read()}")
    return line


def test_an_exported_session_is_byte_identical_to_the_jsonl_log(
    pg_url: str, tmp_path: Path
) -> None:
    pg = PostgresStore(pg_url, clock=_clock)
    jsonl = JsonlStore(tmp_path, clock=_clock)
    _write(pg, "s1")
    _write(jsonl, "s1")
    assert b"".join(pg.iter_records("s1")) == jsonl.locate("s1").read_bytes()
    inspection = pg.inspect("s1")
    assert inspection.classification == "open-turn"  # inspect closes in memory only
    assert inspection.events == jsonl.inspect("s1").events
    assert [event.type for event in inspection.closers] == ["step/end", "turn/end"]
    assert pg.inspect("s1").revision == inspection.revision  # inspect never writes
    assert [header.id for header in pg.list()] == ["s1"]


def test_import_log_and_iter_records_round_trip_between_any_two_stores(
    pg_url: str, tmp_path: Path
) -> None:
    """The SessionStore methods a copy between stores uses: the same on JSONL and PostgreSQL."""
    jsonl = JsonlStore(tmp_path / "a", clock=_clock)
    _write(jsonl, "s1")
    jsonl.load("s1")  # balanced: a log that is itself valid can be imported as it is
    log = jsonl.locate("s1").read_bytes()
    assert b"".join(jsonl.iter_records("s1")) == log
    pg = PostgresStore(pg_url, clock=_clock)
    source = jsonl.inspect("s1")
    pg.import_log(source.header, source.events)
    assert b"".join(pg.iter_records("s1")) == log
    with pytest.raises(SessionExistsError):
        pg.import_log(source.header, source.events)  # never overwritten
    back = JsonlStore(tmp_path / "b")
    again = pg.inspect("s1")
    back.import_log(again.header, again.events)
    assert back.locate("s1").read_bytes() == log
    with pytest.raises(SessionExistsError):
        back.import_log(again.header, again.events)


def test_load_commits_the_repair_once_and_the_second_load_changes_nothing(pg_url: str) -> None:
    store = PostgresStore(pg_url, clock=_clock)
    _write(store, "s1")
    repaired = store.load("s1")
    assert repaired.classification == "ok"
    assert repaired.events[-1].type == "turn/end"
    again = store.load("s1")
    assert again.revision == repaired.revision
    assert store.read_from("s1", 7)[0].type == "step/start"


def test_new_refuses_an_existing_session_and_open_a_missing_one(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    _write(store, "s1")
    with pytest.raises(SessionExistsError):
        store.new("s1")
    with pytest.raises(SessionNotFoundError):
        store.open("nope")
    assert PostgresStore(pg_url).list() != []


def test_a_batch_that_does_not_continue_the_stored_log_writes_nothing(pg_url: str) -> None:
    """The tail check runs in SQL inside the batch's transaction."""
    import psycopg

    store = PostgresStore(pg_url, window_s=60.0)
    live = store.new("s1")
    live.append("turn/start", turn_start(1))
    live.flush()
    # Another writer, ignoring the lock, committed a row behind this writer's back.
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(
            "UPDATE dsh_sessions SET next_seq = next_seq + 1 WHERE session_id = 's1'"
        )
    live.append("step/start", step_start(1, 1))
    with pytest.raises(ConcurrentModificationError):
        live.flush()
    with psycopg.connect(pg_url) as connection:
        count = connection.execute("SELECT count(*) FROM dsh_events").fetchone()
    assert count == (1,)
    assert [event.seq for event in live.unwritten_events] == [1]  # kept, as after a failed fsync
    with pytest.raises(ConcurrentModificationError):
        live.close()


def test_a_second_writer_in_another_process_is_refused_at_once(pg_url: str) -> None:
    holder = _child(pg_url, "s1", "hold", 5)
    try:
        assert _line(holder) == "READY"
        with pytest.raises(SessionLockedError):
            PostgresStore(pg_url).open("s1")
        contender = _child(pg_url, "s1", "contend")
        assert _line(contender) == "LOCKED"
        contender.wait(timeout=60)
    finally:
        holder.kill()
        holder.wait(timeout=60)


def test_a_killed_writer_loses_the_lock_and_only_its_unflushed_tail(pg_url: str) -> None:
    holder = _child(pg_url, "s1", "hold", 5)
    assert _line(holder) == "READY"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    # The server ends the dead connection's session, and its advisory lock with it.
    with PostgresStore(pg_url).open("s1") as live:
        types = [event.type for event in live.session.events]
    assert types == ["turn/start", "turn/end", "session/end-seed"]  # the 5 unflushed: gone


@pytest.mark.parametrize("count", [20, 300], ids=["insert", "copy"])
def test_sigkill_in_the_middle_of_a_batch_keeps_every_acknowledged_event(
    pg_url: str, count: int
) -> None:
    """A batch below COPY_MIN_ROWS is one multi-row INSERT, one from there a COPY; either
    killed half-way leaves nothing of itself."""
    from dsh_store.postgres.backend import COPY_MIN_ROWS

    assert (count < COPY_MIN_ROWS) == (count == 20)
    child = _child(
        pg_url,
        "s1",
        "batches",
        count,
        DSH_STORE_FAILPOINT="pg.append.mid-batch",
        DSH_STORE_FAILPOINT_SKIP="1",  # the first batch (the session's creation) passes
    )
    acked = _line(child)
    assert acked == f"ACKED {count}"
    assert child.wait(timeout=60) == -signal.SIGKILL
    inspection = PostgresStore(pg_url).inspect("s1")
    assert len(inspection.events) == count  # all acknowledged, none of the half-sent batch
    assert inspection.torn is None
    assert all("torn" not in event.line.decode() for event in inspection.events)


def test_sixteen_processes_write_sixteen_sessions_at_once(pg_url: str) -> None:
    children = [_child(pg_url, f"w{index:02d}", "write", 4) for index in range(16)]
    for child in children:
        assert _line(child) == "DONE 20"
        assert child.wait(timeout=120) == 0
    store = PostgresStore(pg_url)
    assert [header.id for header in store.list()] == [f"w{index:02d}" for index in range(16)]
    for index in range(16):
        inspection = store.inspect(f"w{index:02d}")
        assert inspection.classification == "ok"
        assert [event.seq for event in inspection.events] == list(range(20))


def test_a_server_restart_between_batches_fails_one_flush_and_the_retry_writes_once() -> None:
    import tempfile

    import psycopg

    # Not under tmp_path: the server's user must be able to reach its directory.
    server = Path(tempfile.mkdtemp(prefix="dsh-store-pg-restart-"))
    started = subprocess.run(
        [str(REPO / "scripts" / "pg-server"), "start", str(server)],
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        pytest.skip(f"scripts/pg-server cannot start a private server: {started.stderr[-300:]}")
    url = started.stdout.strip()
    try:
        store = PostgresStore(url, window_s=60.0)
        live = store.new("s1")
        live.append("turn/start", turn_start(1))
        live.flush()
        _restart(server)
        live.append("step/start", step_start(1, 1))
        with pytest.raises(DatabaseError) as failed:
            live.flush()  # the lock's connection died with the old server
        assert "***" in failed.value.url or "@" not in failed.value.url
        assert url.split(":")[2].split("@")[0] not in str(failed.value)  # no password shown
        live.flush()  # reconnects, takes the lock again, settles, writes the batch once
        live.append("step/end", step_end(1, 1))
        live.close()
        with psycopg.connect(url) as connection:
            seqs = connection.execute("SELECT seq FROM dsh_events ORDER BY seq").fetchall()
        assert seqs == [(0,), (1,), (2,)]
        assert store.inspect("s1").classification == "open-turn"
        store.close()
    finally:
        subprocess.run([str(REPO / "scripts" / "pg-server"), "stop", str(server)], check=False)


def _restart(server: Path) -> None:
    """Restart the private server (fast shutdown: every connection is ended)."""
    bin_dir = (server / "bin").read_text().strip()
    user = (server / "user").read_text().strip()
    data, log = str(server / "data"), str(server / "server.log")
    command = [f"{bin_dir}/pg_ctl", "-D", data, "-l", log, "-m", "fast", "-w", "restart"]
    if user:
        command = ["runuser", "-u", user, "--", *command]
    # No pipes: the new postmaster would hold them open.
    subprocess.run(
        command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/"
    )
