"""Benchmark group ``pg``: the PostgreSQL store against the JSONL store and naive psycopg loops.

The server is ``$DSH_STORE_PG_URL`` when set, else a throwaway one started with
``scripts/pg-server start`` (stopped at the end), as the tests do; without a server or
psycopg every row is skipped with the reason. Each measurement runs in a fresh database
schema. Durability settings are the server's defaults (fsync and synchronous_commit on).
Both sides of every ratio run alternately (medians), on the event mix of ``bench/limits.py``.
Run it with ``python scripts/bench.py pg [--quick]``; nothing here asserts a time. Rows:

- durable throughput at saturation (window 0, one final flush) and append + flush per
  event, PostgreSQL ÷ JSONL store;
- the same saturation ÷ a naive psycopg loop inserting one row per event per transaction,
  and ÷ one inserting 512 rows per transaction (``executemany``);
- the batch write itself: binary ``COPY`` ÷ one multi-row ``INSERT``, at 1, 16 and 512 rows
  per transaction (the backend uses the faster: docs/postgres.md);
- restore (``inspect``) of the 50 MB mix, PostgreSQL ÷ JSONL;
- 16 writer processes, one session each, total durable throughput (PostgreSQL and JSONL).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    REPO,
    Report,
    flush_each_rate,
    load_limits,
    saturation_run,
    write_v4_log,
)

from dsh_store.store import JsonlStore

Event = dict[str, Any]

NAIVE_BATCH = 512
RESTORE_LOG_BYTES = 50_000_000
WRITERS = 16
BATCH_SIZES = (1, 16, 64, 256, 1024)


@dataclass(frozen=True)
class Settings:
    """Sizes and repeat counts of one run (quick or full)."""

    runs: int
    seconds: float  # each time-bounded run, ours and the baselines
    saturation_turns: int
    restore_runs: int
    writer_seconds: float
    writer_turns: int


QUICK = Settings(
    runs=3, seconds=0.5, saturation_turns=1000, restore_runs=2, writer_seconds=1.0, writer_turns=60
)
FULL = Settings(
    runs=5, seconds=1.5, saturation_turns=2000, restore_runs=3, writer_seconds=3.0, writer_turns=150
)


# -- the server and its schemas ----------------------------------------------------------


@contextmanager
def server() -> Iterator[str]:
    """The URL of the server to measure: ``$DSH_STORE_PG_URL``, or a throwaway one.

    :raises ServerUnavailable: no server can be had here (the one-line reason).
    """
    configured = os.environ.get("DSH_STORE_PG_URL")
    if configured:
        yield configured
        return
    # Not under the repository: the server's own user must be able to reach the directory.
    directory = Path(tempfile.mkdtemp(prefix="dsh-bench-pg-"))
    script = str(REPO / "scripts" / "pg-server")
    started = subprocess.run(
        [script, "start", str(directory)], capture_output=True, text=True, check=False
    )
    if started.returncode != 0:
        subprocess.run([script, "stop", str(directory)], check=False, capture_output=True)
        last = (started.stderr.strip().splitlines() or ["no output"])[-1]
        raise ServerUnavailable(f"scripts/pg-server could not start a server: {last}")
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run([script, "stop", str(directory)], check=False, capture_output=True)


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A URL whose tables live in a new schema, dropped afterwards."""
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in url else "?"
    try:
        yield f"{url}{separator}options={quote(f'-c search_path={schema}', safe='')}"
    finally:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- helpers -----------------------------------------------------------------------------


def _settle() -> None:
    os.sync()
    gc.collect()
    time.sleep(0.05)


def _paired(runs: int, works: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Median of each work, all run in turn ``runs`` times (load drift hits all alike)."""
    samples: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(runs):
        for name, work in works.items():
            samples[name].append(work())
            _settle()
    return {name: statistics.median(values) for name, values in samples.items()}


def _rate(value: float) -> str:
    return f"{value:,.0f} ev/s"


# -- our side: one store, PostgreSQL or JSONL --------------------------------------------


def saturation(store: Any, events: Sequence[Event], seconds: float) -> float:
    """Events/s of one producer appending as fast as it can for ``seconds`` (or until the
    mix is used up), then one flush (the clock stops when every event is durable)."""
    live = store.new(f"saturation-{uuid.uuid4().hex[:8]}")
    count, elapsed = saturation_run(live, events, seconds)
    # A producer that used up the mix before ``seconds`` ran ahead of the writer: the clock
    # still stops only when the last event is durable, so the rate stays the durable one.
    return count / elapsed


def flush_each(store: Any, events: Sequence[Event], seconds: float) -> float:
    """Events/s of append + flush per event (each event durable before the next)."""
    live = store.new(f"flush-each-{uuid.uuid4().hex[:8]}")
    return flush_each_rate(live, events, seconds)


# -- baselines: naive psycopg loops ------------------------------------------------------

_NAIVE_TABLE = """CREATE TABLE IF NOT EXISTS naive_events (
    session_id text NOT NULL, seq bigint NOT NULL, record bytea NOT NULL,
    PRIMARY KEY (session_id, seq))"""
_NAIVE_INSERT = "INSERT INTO naive_events (session_id, seq, record) VALUES (%s, %s, %s)"


def _naive_table(connection: Any) -> None:
    """The baselines' table, shaped and compressed as ``dsh_events`` (lz4 where the server
    has it, as schema version 3 sets), so the ratios measure the store, not the table."""
    import psycopg

    connection.execute(_NAIVE_TABLE)
    # A server without lz4 refuses: pglz then, as dsh_events has there too.
    with contextlib.suppress(psycopg.Error):
        connection.execute("ALTER TABLE naive_events ALTER COLUMN record SET COMPRESSION lz4")


def naive_per_event(url: str, events: Sequence[Event], seconds: float) -> float:
    """One ``INSERT`` per event, each its own transaction (autocommit): rows/s."""
    import psycopg

    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    session = uuid.uuid4().hex
    with psycopg.connect(url, autocommit=True) as connection:
        _naive_table(connection)
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        while now < deadline:
            event = events[count % len(events)]
            connection.execute(_NAIVE_INSERT, (session, count, dumps(event, option=newline)))
            count += 1
            now = time.perf_counter()
    return count / (now - start)


def naive_batched(url: str, events: Sequence[Event], seconds: float) -> float:
    """512 rows per transaction with ``executemany``: rows/s."""
    import psycopg

    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    session = uuid.uuid4().hex
    with psycopg.connect(url, autocommit=True) as connection:
        _naive_table(connection)
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        while now < deadline:
            rows = []
            for _ in range(NAIVE_BATCH):
                rows.append((session, count, dumps(events[count % len(events)], option=newline)))
                count += 1
            with connection.transaction(), connection.cursor() as cursor:
                cursor.executemany(_NAIVE_INSERT, rows)
            now = time.perf_counter()
    return count / (now - start)


# -- the batch write: COPY against a multi-row INSERT -------------------------------------


def batch_write(
    url: str, records: Sequence[bytes], size: int, method: str, seconds: float
) -> float:
    """Rows/s of transactions of ``size`` rows each, written by ``method`` (``copy`` or
    ``insert``) into a table shaped as ``dsh_events``, with the store's tail-check UPDATE
    first in each transaction.

    ``synchronous_commit`` is off for this session only: the commit's WAL flush is the same
    for both methods, and on a shared disk its jitter drowns the difference being measured.
    """
    import psycopg

    session = uuid.uuid4().hex
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET synchronous_commit = off")
        _naive_table(connection)
        connection.execute("CREATE TABLE IF NOT EXISTS naive_tail (session_id text, n bigint)")
        connection.execute("INSERT INTO naive_tail VALUES (%s, 0)", (session,))
        insert = "INSERT INTO naive_events (session_id, seq, record) VALUES " + ", ".join(
            ["(%s, %s, %s)"] * size
        )
        seq = 0
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        while now < deadline:
            batch = [records[(seq + index) % len(records)] for index in range(size)]
            with connection.transaction():
                connection.execute(
                    "UPDATE naive_tail SET n = n + %s WHERE session_id = %s AND n = %s",
                    (size, session, seq),
                )
                if method == "copy":
                    with (
                        connection.cursor() as cursor,
                        cursor.copy(
                            "COPY naive_events (session_id, seq, record) FROM STDIN (FORMAT BINARY)"
                        ) as copy,
                    ):
                        copy.set_types(["text", "int8", "bytea"])
                        for index, record in enumerate(batch):
                            copy.write_row((session, seq + index, record))
                else:
                    params: list[Any] = []
                    for index, record in enumerate(batch):
                        params += (session, seq + index, record)
                    connection.execute(insert, params)
            seq += size
            now = time.perf_counter()
    return seq / (now - start)


# -- restore -----------------------------------------------------------------------------


def restore_seconds(store: Any, session_id: str) -> float:
    """Seconds for ``store.inspect`` to restore the session completely."""
    start = time.perf_counter()
    inspection = store.inspect(session_id)
    elapsed = time.perf_counter() - start
    if not inspection.events:
        raise RuntimeError(f"{session_id}: restored no events")
    return elapsed


# -- 16 writer processes ----------------------------------------------------------------

_WRITER = """
import sys, time
sys.path.insert(0, {scripts!r})
from benchlib import load_limits
kind, target, session_id, seconds, turns = sys.argv[1:6]
events = load_limits().make_mix(int(turns), seed=int(session_id.rsplit("-", 1)[1]) + 1)
if kind == "pg":
    from dsh_store.postgres.store import PostgresStore
    store = PostgresStore(target, window_s=0)
else:
    from dsh_store.store import JsonlStore
    store = JsonlStore(target, window_s=0)
live = store.new(session_id)
print("READY", flush=True)
sys.stdin.readline()  # every writer starts when all are ready
started = time.time()
deadline = started + float(seconds)
count = 0
for event in events:
    live.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                source_event_seqs=event.get("sourceEventSeqs"))
    count += 1
    if count % 16 == 0 and time.time() >= deadline:
        break
live.flush()
print(count, started, time.time(), flush=True)
live.close()
"""


def writers_total(kind: str, target: str, cfg: Settings) -> float:
    """Total durable events/s of 16 processes, one session each, started together."""
    code = _WRITER.format(scripts=str(Path(__file__).resolve().parent))
    tag = uuid.uuid4().hex[:6]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                kind,
                target,
                f"w{tag}-{index}",
                str(cfg.writer_seconds),
                str(cfg.writer_turns),
            ],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for index in range(WRITERS)
    ]
    for child in children:  # each has loaded its mix and made its session
        assert child.stdout is not None
        if child.stdout.readline().strip() != "READY":
            raise RuntimeError(f"a {kind} writer process failed to start")
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    total, starts, ends = 0, [], []
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise RuntimeError(f"a {kind} writer process failed (status {child.returncode})")
        count, began, end = out.split()
        total += int(count)
        starts.append(float(began))
        ends.append(float(end))
    return total / (max(ends) - min(starts))


# -- the group ---------------------------------------------------------------------------

_ROWS = (
    ("durable throughput at saturation, PostgreSQL ÷ JSONL", "JSONL store, window 0", ""),
    ("append + flush per event, PostgreSQL ÷ JSONL", "JSONL store, flush per event", ""),
    (
        "PostgreSQL saturation ÷ naive psycopg, 1 row per transaction",
        "psycopg INSERT per event, autocommit",
        "",
    ),
    (
        "PostgreSQL saturation ÷ naive psycopg, 512 rows per transaction",
        "psycopg executemany, 512 rows per transaction",
        ">= 0.9x",
    ),
    ("restore of the 50 MB mix, PostgreSQL ÷ JSONL", "JSONL store inspect", ""),
    ("16 writer processes, PostgreSQL ÷ JSONL", "16 JSONL writer processes", ""),
)


def _write_rows(report: Report, url: str, limits: ModuleType, cfg: Settings) -> None:
    from dsh_store.postgres.store import PostgresStore

    events: list[Event] = limits.make_mix(100)
    long_mix: list[Event] = limits.make_mix(cfg.saturation_turns)
    gc.freeze()  # static inputs: kept out of every collection, on both sides alike
    seconds = cfg.seconds
    with fresh_schema(url) as store_url, tempfile.TemporaryDirectory(dir=REPO) as root:
        pg = PostgresStore(store_url, window_s=0)
        pg.init()
        jsonl = JsonlStore(root, window_s=0)
        pg_default, jsonl_default = PostgresStore(store_url), JsonlStore(root)
        sat = _paired(
            cfg.runs,
            {
                "pg": lambda: saturation(pg, long_mix, seconds),
                "jsonl": lambda: saturation(jsonl, long_mix, seconds),
                "naive1": lambda: naive_per_event(store_url, events, seconds),
                "naive512": lambda: naive_batched(store_url, events, seconds),
            },
        )
        each = _paired(
            cfg.runs,
            {
                "pg": lambda: flush_each(pg_default, events, seconds),
                "jsonl": lambda: flush_each(jsonl_default, events, seconds),
            },
        )
        records = [orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE) for event in events]
        batch: dict[int, dict[str, float]] = {}
        for size in BATCH_SIZES:
            batch[size] = _paired(
                cfg.runs,
                {
                    method: functools.partial(
                        batch_write, store_url, records, size, method, seconds
                    )
                    for method in ("copy", "insert")
                },
            )
        pg.close()
        pg_default.close()
    report.value("durable throughput, PostgreSQL store, window 0", _rate(sat["pg"]))
    report.value("durable throughput, JSONL store, window 0", _rate(sat["jsonl"]))
    report.value("naive psycopg, INSERT per event, autocommit", _rate(sat["naive1"]))
    report.value("naive psycopg, executemany 512 per transaction", _rate(sat["naive512"]))
    report.ratio(_ROWS[0][0], sat["pg"], sat["jsonl"], _ROWS[0][2], baseline_name=_ROWS[0][1])
    report.value("append + flush per event, PostgreSQL store", _rate(each["pg"]))
    report.value("append + flush per event, JSONL store", _rate(each["jsonl"]))
    report.ratio(_ROWS[1][0], each["pg"], each["jsonl"], _ROWS[1][2], baseline_name=_ROWS[1][1])
    report.ratio(_ROWS[2][0], sat["pg"], sat["naive1"], _ROWS[2][2], baseline_name=_ROWS[2][1])
    report.ratio(_ROWS[3][0], sat["pg"], sat["naive512"], _ROWS[3][2], baseline_name=_ROWS[3][1])
    for size, rates in batch.items():
        report.value(
            f"batch write, {size} rows per transaction",
            f"COPY {_rate(rates['copy'])}, multi-row INSERT {_rate(rates['insert'])}",
        )
        report.ratio(
            f"batch write of {size}, COPY ÷ multi-row INSERT",
            rates["copy"],
            rates["insert"],
            "",
            baseline_name=f"one INSERT of {size} rows",
        )


def _restore_rows(report: Report, url: str, cfg: Settings) -> None:
    from dsh_store.postgres.store import PostgresStore

    with fresh_schema(url) as store_url, tempfile.TemporaryDirectory(dir=REPO) as root:
        jsonl = JsonlStore(root)
        log = jsonl.locate("bench-restore", cwd=None)
        log.parent.mkdir(parents=True)
        count, size = write_v4_log(log, RESTORE_LOG_BYTES, "bench-restore")
        source = jsonl.inspect("bench-restore")
        if source.classification != "ok":
            raise RuntimeError(f"the generated restore log is {source.classification!r}")
        pg = PostgresStore(store_url)
        pg.import_log(source.header, source.events)
        if b"".join(pg.iter_records("bench-restore")) != log.read_bytes():
            raise RuntimeError("the imported log is not byte-identical to the JSONL one")
        del source
        _settle()
        times = _paired(
            cfg.restore_runs,
            {
                "pg": lambda: restore_seconds(pg, "bench-restore"),
                "jsonl": lambda: restore_seconds(jsonl, "bench-restore"),
            },
        )
        pg.close()
    report.value("restore log", f"{count} events, {size / 1e6:.1f} MB")
    report.value("restore (inspect), PostgreSQL", f"{times['pg']:.2f} s")
    report.value("restore (inspect), JSONL", f"{times['jsonl']:.2f} s")
    report.ratio(
        _ROWS[4][0], 1 / times["pg"], 1 / times["jsonl"], _ROWS[4][2], baseline_name=_ROWS[4][1]
    )


def _writer_rows(report: Report, url: str, cfg: Settings) -> None:
    with fresh_schema(url) as store_url, tempfile.TemporaryDirectory(dir=REPO) as root:
        from dsh_store.postgres.store import PostgresStore

        with PostgresStore(store_url) as store:
            store.init()
        rates = _paired(
            1 if cfg is QUICK else 3,
            {
                "pg": lambda: writers_total("pg", store_url, cfg),
                "jsonl": lambda: writers_total("jsonl", root, cfg),
            },
        )
    report.value("16 writer processes, PostgreSQL, total", _rate(rates["pg"]))
    report.value("16 writer processes, JSONL, total", _rate(rates["jsonl"]))
    report.ratio(_ROWS[5][0], rates["pg"], rates["jsonl"], _ROWS[5][2], baseline_name=_ROWS[5][1])


def run(quick: bool) -> None:
    """Measure and print the pg table (no timing is asserted anywhere)."""
    cfg = QUICK if quick else FULL
    report = Report("pg")
    report.value("settings", f"{'quick' if quick else 'full'}, medians of {cfg.runs} runs")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        reason = "psycopg is not installed (pip install 'dsh-store[postgres]')"
        _skip_all(report, reason)
        report.print()
        return
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(server())
        except ServerUnavailable as error:
            _skip_all(report, str(error))
            report.print()
            return
        limits = load_limits()
        try:
            _write_rows(report, url, limits, cfg)
        finally:
            gc.unfreeze()
        _restore_rows(report, url, cfg)
        _writer_rows(report, url, cfg)
    report.print()


class ServerUnavailable(Exception):
    """No PostgreSQL server can be had here (the message says why, in one line)."""


def _skip_all(report: Report, reason: str) -> None:
    for name, baseline, target in _ROWS:
        report.skipped(name, baseline, target, reason)


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])
