"""Benchmark group ``store``: the durable write path and restore, as ratios to naive baselines.

Every baseline is measured in the same run, on the same file system, from the event mix of
``bench/limits.py``. Our side only uses the public API (``JsonlStore``, ``LiveSession``,
``read_log``). Run it with ``python scripts/bench.py store [--quick]``; nothing here asserts
a time. Rows:

- durable throughput at saturation (append as fast as possible, one final flush) against
  limits.py's group-commit writer thread (``_window_run`` with no linger);
- append + flush per event against one fd with write + flush + fsync per event;
- restore of a 50 MB v4 log with ``read_log`` against ``orjson.loads`` per line;
- durable throughput against SQLite WAL ``synchronous=FULL`` with 512 rows per commit;
- peak RSS of a fresh process restoring a 500 MB log (100 MB in quick mode);
- the same write and restore rows against baselines that run our checks around the same
  naive I/O (``Session.append`` before each naive write; the lossless re-check after each
  ``orjson.loads``), which isolates what the store layer adds to the validation;
- append + flush per event against that checked baseline plus the two system calls our
  writer makes per batch (the tail check's ``stat``, the watermark's ``pwrite``), which
  leaves only the store's own queue and locks between the two (reported, no target).
"""

from __future__ import annotations

import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scan
from benchlib import (
    REPO,
    Report,
    append_mix_event,
    flush_each_rate,
    load_limits,
    peak_rss_kib,
    saturation_run,
    write_v4_log,
)

from dsh_store.jsonl.writebehind import DEFAULT_WINDOW_S
from dsh_store.jsonvalue import check_loaded
from dsh_store.model import Session
from dsh_store.restore import read_log
from dsh_store.store import JsonlStore

Event = dict[str, Any]

_IMPORT_ONLY = "import sys\nfrom dsh_store.restore import read_log"
_RESTORE = _IMPORT_ONLY + "\nassert read_log(sys.argv[1]).events"


@dataclass(frozen=True)
class Settings:
    """Sizes and repeat counts of one run (quick or full)."""

    runs: int
    seconds: float  # duration of each time-bounded run, ours and the baselines
    # Turns of the long mix the time-bounded producers draw from: enough that a fast, idle
    # machine does not exhaust it within ``seconds`` (the run refuses a mix that ran out).
    saturation_turns: int
    restore_runs: int
    rss_log_bytes: int


QUICK = Settings(
    runs=3, seconds=0.3, saturation_turns=2500, restore_runs=3, rss_log_bytes=100_000_000
)
FULL = Settings(
    runs=5, seconds=1.0, saturation_turns=6000, restore_runs=5, rss_log_bytes=500_000_000
)
RESTORE_LOG_BYTES = 50_000_000
SQLITE_BATCH = 512


# -- helpers -------------------------------------------------------------------------------


def _settle() -> None:
    """Push dirty pages out and let the device go idle between runs (as limits.py does)."""
    os.sync()
    gc.collect()
    time.sleep(0.05)


def _median_of(runs: int, measure: Callable[[], float]) -> float:
    samples = []
    for _ in range(runs):
        samples.append(measure())
        _settle()
    return statistics.median(samples)


def _paired_medians(
    runs: int, ours: Callable[[], float], baseline: Callable[[], float]
) -> tuple[float, float]:
    """Medians of both sides, run alternately so that load drift on a shared machine hits
    both alike."""
    our_samples, base_samples = [], []
    for _ in range(runs):
        our_samples.append(ours())
        _settle()
        base_samples.append(baseline())
        _settle()
    return statistics.median(our_samples), statistics.median(base_samples)


# -- our side ------------------------------------------------------------------------------


def store_saturation(
    events: Sequence[Event], root: Path, *, seconds: float | None = None, window_s: float = 0.0
) -> float:
    """Events/s of one producer appending as fast as it can for ``seconds``, then one flush.

    Like limits.py's group-commit producer, it runs for a fixed time (or until ``events``
    run out) and the clock stops when the final ``flush`` returns, i.e. when every event
    is durable. The mix must be long enough for the duration: a session cannot replay
    the same turns twice.
    """
    store = JsonlStore(root, window_s=window_s)
    live = store.new(f"saturation-{time.monotonic_ns()}")
    count, elapsed = saturation_run(live, events, seconds)
    if seconds is not None and count == len(events):
        raise RuntimeError(f"the mix ran out after {count} events; use more turns")
    return count / elapsed


def store_flush_each(
    events: Sequence[Event], root: Path, *, seconds: float, window_s: float = DEFAULT_WINDOW_S
) -> float:
    """Events/s of append + flush per event (every event durable before the next).

    Stops after ``seconds`` or at the end of ``events``, whichever comes first. With the
    default window the caller's ``flush`` performs each write itself; with ``window_s=0``
    every append also hands its write to the background thread, which races the flush.
    """
    store = JsonlStore(root, window_s=window_s)
    live = store.new(f"flush-each-{time.monotonic_ns()}")
    return flush_each_rate(live, events, seconds)


def store_restore(path: Path) -> float:
    """Seconds for ``read_log`` to restore ``path`` completely (GC as the library leaves it)."""
    start = time.perf_counter()
    inspection = read_log(path)
    elapsed = time.perf_counter() - start
    if not inspection.events:
        raise RuntimeError(f"{path}: restored no events")
    return elapsed


# -- baselines (limits.py, or the same naive method re-implemented where it is not callable) --


def baseline_group_commit(
    limits: ModuleType, events: list[Event], path: Path, seconds: float
) -> float:
    """limits.py's "(c) group commit, max-speed producer" row: ``_window_run`` with no linger."""
    return baseline_linger(limits, events, path, seconds, 0)


def baseline_linger(
    limits: ModuleType, events: list[Event], path: Path, seconds: float, window_s: float
) -> float:
    """limits.py's "(c) linger <window>, max-speed producer" row: ``_window_run`` lingering
    ``window_s`` after the oldest pending event, as our default batching window does."""
    result: dict[str, Any] = limits._window_run(str(path), events, window_s, seconds, None)
    path.unlink(missing_ok=True)
    return float(result["rate"])


def baseline_fsync_each(events: Sequence[Event], path: Path, seconds: float) -> float:
    """limits.py's "(b)" row, re-implemented (it is inline there): one open file, and per
    event ``orjson.dumps`` + ``write`` + ``flush`` + ``fsync``; events cycle for ``seconds``.
    """
    dumps = orjson.dumps
    option = orjson.OPT_APPEND_NEWLINE
    count = 0
    with open(path, "ab") as out:
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        while now < deadline:
            event = events[count % len(events)]
            out.write(dumps(event, option=option))
            out.flush()
            os.fsync(out.fileno())
            count += 1
            now = time.perf_counter()
    path.unlink()
    return count / (now - start)


# -- baselines that do our checks ------------------------------------------------------------
# The naive baselines above only serialize. These three run the same validation as our side
# (the model's Session.append, or the lossless re-check on read) around the same naive I/O,
# so a ratio to them isolates what the store layer itself costs: batching, the write-behind
# controller, the tail check, restore's scanner and admission.


def baseline_group_commit_validated(events: Sequence[Event], path: Path, seconds: float) -> float:
    """A minimal group commit fed by ``Session.append``: the producer validates and encodes
    each event with the model, hands its line to a writer thread that joins whatever is
    pending, writes it and fsyncs; the clock stops when the last write is durable.
    """
    session = Session.create(f"validated-{time.monotonic_ns()}")
    pending: list[bytes] = []
    state = {"done": False, "written": 0}
    ready = threading.Condition()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)

    def writer() -> None:
        while True:
            with ready:
                while not pending and not state["done"]:
                    ready.wait()
                if not pending:
                    return
                batch = pending[:]
                pending.clear()
            os.write(fd, b"".join(batch))
            os.fsync(fd)
            state["written"] += len(batch)

    thread = threading.Thread(target=writer)
    start = time.perf_counter()
    thread.start()
    deadline = start + seconds
    count = 0
    try:
        for event in events:
            line = append_mix_event(session, event).line
            with ready:
                pending.append(line)
                ready.notify()
            count += 1
            if count % 64 == 0 and time.perf_counter() >= deadline:
                break
    finally:  # the writer drains what is pending, then stops, on every exit
        with ready:
            state["done"] = True
            ready.notify()
        thread.join()
        elapsed = time.perf_counter() - start
        os.close(fd)
        path.unlink()
    if count == len(events):
        raise RuntimeError(f"the mix ran out after {count} events; use more turns")
    return state["written"] / elapsed


def baseline_fsync_each_validated(events: Sequence[Event], path: Path, seconds: float) -> float:
    """Per event ``Session.append`` (validate + encode), then write + fsync on one fd."""
    return _fsync_each_checked(events, path, seconds, same_calls=False)


def baseline_fsync_each_same_calls(events: Sequence[Event], path: Path, seconds: float) -> float:
    """:func:`baseline_fsync_each_validated` plus the two system calls our writer adds per
    batch: a ``stat`` of the path before the write (the tail check) and a ``pwrite`` of a
    watermark-sized record into a side file after the fsync. What is left between this and
    ours is the queue, the controller and the locks (the Python of the store itself)."""
    return _fsync_each_checked(events, path, seconds, same_calls=True)


def _fsync_each_checked(
    events: Sequence[Event], path: Path, seconds: float, *, same_calls: bool
) -> float:
    session = Session.create(f"checked-{time.monotonic_ns()}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
    side = Path(f"{path}.durable")
    mark = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) if same_calls else -1
    record = b"%-90s\n" % b"dsh-store-durable 1"
    name = os.fspath(path)
    count = 0
    try:
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        for event in events:
            line = append_mix_event(session, event).line
            if same_calls:
                os.stat(name)
            os.write(fd, line)
            os.fsync(fd)
            if same_calls:
                os.pwrite(mark, record, 0)
            count += 1
            now = time.perf_counter()
            if now >= deadline:
                break
    finally:
        os.close(fd)
        path.unlink()
        if same_calls:
            os.close(mark)
            side.unlink()
    return count / (now - start)


def baseline_load_lines_checked(path: Path) -> float:
    """:func:`baseline_load_lines` plus the lossless re-check restore must run on every
    decoded line (``jsonvalue.check_loaded`` given the line, as restore gives it), GC
    disabled alike."""
    loads = orjson.loads
    gc.disable()
    try:
        start = time.perf_counter()
        values = []
        with open(path, "rb") as source:
            for line in source:
                value = loads(line)
                check_loaded(value, raw=line)
                values.append(value)
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    del values
    return elapsed


def baseline_sqlite_wal_full(
    limits: ModuleType, events: Sequence[Event], path: Path, seconds: float
) -> float:
    """limits.py's "(d) SQLite WAL FULL, commit per 512" row, re-implemented around its
    ``_sqlite_open``: the event JSON as a BLOB plus seq/type/time columns, 512 per commit.
    """
    limits._sqlite_rm(str(path))
    connection: sqlite3.Connection = limits._sqlite_open(str(path), "WAL", "FULL")
    insert = "INSERT INTO events VALUES (?,?,?,?)"
    dumps = orjson.dumps
    count = 0
    try:
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        while now < deadline:
            connection.execute("BEGIN")
            for _ in range(SQLITE_BATCH):
                event = events[count % len(events)]
                count += 1
                connection.execute(insert, (count, event["type"], event["time"], dumps(event)))
            connection.execute("COMMIT")
            now = time.perf_counter()
    finally:
        connection.close()
        limits._sqlite_rm(str(path))
    return count / (now - start)


def baseline_load_lines(path: Path) -> float:
    """Seconds for limits.py's best full materialization: ``[orjson.loads(line) for line
    in file]`` with the GC disabled (re-implemented; it is a closure there)."""
    loads = orjson.loads
    gc.disable()
    try:
        start = time.perf_counter()
        with open(path, "rb") as source:
            values = [loads(line) for line in source]
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    del values
    return elapsed


def timed(work: Callable[[], object]) -> float:
    """Wall seconds of one call."""
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


# -- the group -----------------------------------------------------------------------------


def _rate(value: float) -> str:
    return f"{value / 1e3:.1f}k ev/s"


def _write_rows(report: Report, limits: ModuleType, scratch: Path, cfg: Settings) -> None:
    events: list[Event] = limits.make_mix(100)
    # Our producer cannot cycle the 100-turn mix as the baselines do (a session never
    # repeats a turn), so it draws from a longer mix of the same generator.
    long_mix: list[Event] = limits.make_mix(cfg.saturation_turns)
    # The mixes are static inputs of up to millions of containers. Left to the cyclic
    # collector they would be re-traversed by every full collection during the runs, a
    # cost that grows with the mix (ours is 25x the baselines') and that a harness, whose
    # events are transient, never pays. Both sides run with them frozen.
    gc.freeze()
    seconds = cfg.seconds
    ours, group = _paired_medians(
        cfg.runs,
        lambda: store_saturation(long_mix, scratch / "sat", seconds=seconds),
        lambda: baseline_group_commit(limits, events, scratch / "gc.log", seconds),
    )
    ours_window, linger = _paired_medians(
        cfg.runs,
        lambda: store_saturation(
            long_mix, scratch / "sat-window", seconds=seconds, window_s=DEFAULT_WINDOW_S
        ),
        lambda: baseline_linger(limits, events, scratch / "linger.log", seconds, DEFAULT_WINDOW_S),
    )
    ours_again, sqlite = _paired_medians(
        cfg.runs,
        lambda: store_saturation(long_mix, scratch / "sat-sqlite", seconds=seconds),
        lambda: baseline_sqlite_wal_full(limits, events, scratch / "events.db", seconds),
    )
    flush_each, fsync_each = _paired_medians(
        cfg.runs,
        lambda: store_flush_each(events, scratch / "each", seconds=seconds),
        lambda: baseline_fsync_each(events, scratch / "each.log", seconds),
    )
    flush_each_window_zero = _median_of(
        cfg.runs, lambda: store_flush_each(events, scratch / "each-0", seconds=seconds, window_s=0)
    )
    ours_checked, group_checked = _paired_medians(
        cfg.runs,
        lambda: store_saturation(long_mix, scratch / "sat-checked", seconds=seconds),
        lambda: baseline_group_commit_validated(long_mix, scratch / "gc-checked.log", seconds),
    )
    flush_each_checked, fsync_each_checked = _paired_medians(
        cfg.runs,
        lambda: store_flush_each(events, scratch / "each-checked", seconds=seconds),
        lambda: baseline_fsync_each_validated(events, scratch / "each-checked.log", seconds),
    )
    flush_each_calls, fsync_each_calls = _paired_medians(
        cfg.runs,
        lambda: store_flush_each(events, scratch / "each-calls", seconds=seconds),
        lambda: baseline_fsync_each_same_calls(events, scratch / "each-calls.log", seconds),
    )
    report.value("mix", f"{len(events)} events, 100 turns (ours: {len(long_mix)} events)")
    report.value("durable throughput, window 0", _rate(ours))
    report.value("group commit baseline (limits.py)", _rate(group))
    report.ratio(
        "durable throughput ÷ group commit",
        ours,
        group,
        ">= 0.7x",
        baseline_name="limits.py group commit",
    )
    report.value("durable throughput, default 50 ms window", _rate(ours_window))
    report.value("limits.py linger 50 ms, max-speed producer", _rate(linger))
    report.ratio(
        "durable throughput ÷ linger, both 50 ms",
        ours_window,
        linger,
        "",
        baseline_name="limits.py linger 50 ms",
    )
    report.value("append + flush per event (default 50 ms window)", _rate(flush_each))
    report.value("append + flush per event, window 0", _rate(flush_each_window_zero))
    report.value("fsync per event baseline", _rate(fsync_each))
    report.ratio(
        "append+flush per event ÷ fsync per event",
        flush_each,
        fsync_each,
        "",
        baseline_name="write + fsync per event (limits.py b)",
    )
    report.value("durable throughput, window 0 (again)", _rate(ours_again))
    report.value("SQLite WAL FULL, 512 per commit", _rate(sqlite))
    report.ratio(
        "durable throughput ÷ SQLite WAL FULL 512",
        ours_again,
        sqlite,
        ">= 2x",
        baseline_name="SQLite WAL synchronous=FULL, 512 rows per commit",
    )
    report.value("durable throughput, window 0 (beside the checked baseline)", _rate(ours_checked))
    report.value("group commit fed by Session.append (same checks)", _rate(group_checked))
    report.ratio(
        "durable throughput ÷ group commit, same checks",
        ours_checked,
        group_checked,
        ">= 0.9x",
        baseline_name="group commit fed by Session.append",
    )
    report.value(
        "append + flush per event (beside the checked baseline)", _rate(flush_each_checked)
    )
    report.value("Session.append + write + fsync per event", _rate(fsync_each_checked))
    report.ratio(
        "append+flush ÷ fsync per event, same checks",
        flush_each_checked,
        fsync_each_checked,
        ">= 0.9x",
        baseline_name="Session.append + write + fsync per event",
    )
    report.value(
        "append + flush per event (beside the same-calls baseline)", _rate(flush_each_calls)
    )
    report.value("same, + the tail stat and the watermark pwrite", _rate(fsync_each_calls))
    report.ratio(
        "append+flush ÷ fsync per event, same checks and calls",
        flush_each_calls,
        fsync_each_calls,
        "",
        baseline_name="Session.append + stat + write + fsync + pwrite per event",
    )


def _restore_rows(report: Report, scratch: Path, cfg: Settings) -> None:
    log = scratch / "restore" / "session.v4.jsonl"
    log.parent.mkdir()
    count, size = write_v4_log(log, RESTORE_LOG_BYTES, "bench-store")
    classification = read_log(log).classification  # the generated log must be a clean v4 log
    if classification != "ok":
        raise SystemExit(f"{log}: the generated restore log is {classification!r}, not 'ok'")
    _settle()
    ours, loads = _paired_medians(
        cfg.restore_runs, lambda: store_restore(log), lambda: baseline_load_lines(log)
    )
    scan = _median_of(cfg.restore_runs, lambda: timed(lambda: bench_scan.scanner_loop(log)))
    report.value("restore log", f"{count} events, {size / 1e6:.1f} MB")
    report.value("read_log", f"{ours:.2f} s ({size / ours / 1e6:.0f} MB/s)")
    report.value(
        "orjson.loads per line, kept, gc off", f"{loads:.2f} s ({size / loads / 1e6:.0f} MB/s)"
    )
    report.value("LogScanner.rows() alone", f"{scan:.2f} s ({size / scan / 1e6:.0f} MB/s)")
    report.ratio(
        "restore (read_log) ÷ orjson line loop",
        1 / ours,
        1 / loads,
        ">= 0.65x",
        baseline_name="orjson.loads line loop, 50 MB",
    )
    ours_checked, checked = _paired_medians(
        cfg.restore_runs, lambda: store_restore(log), lambda: baseline_load_lines_checked(log)
    )
    report.value("orjson.loads + lossless re-check per line", f"{checked:.2f} s")
    report.ratio(
        "restore ÷ line loop with the same lossless check",
        1 / ours_checked,
        1 / checked,
        ">= 0.9x",
        baseline_name="orjson.loads + check_loaded line loop",
    )
    log.unlink()

    big = scratch / "rss" / "session.v4.jsonl"
    big.parent.mkdir()
    _, big_size = write_v4_log(big, cfg.rss_log_bytes, "bench-store")
    _settle()
    base = peak_rss_kib(_IMPORT_ONLY, big)
    restored = peak_rss_kib(_RESTORE, big)
    report.value("RSS log", f"{big_size / 1e6:.0f} MB")
    report.value("peak RSS, import only", f"{base / 1024:.0f} MiB")
    report.value("peak RSS, read_log", f"{restored / 1024:.0f} MiB")
    report.value("peak RSS ÷ file size", f"{restored * 1024 / big_size:.2f}")
    report.value("(peak RSS − import) ÷ file size", f"{(restored - base) * 1024 / big_size:.2f}")


def run(quick: bool) -> None:
    """Measure and print the store table (no timing is asserted anywhere)."""
    cfg = QUICK if quick else FULL
    limits = load_limits()
    report = Report("store")
    report.value("settings", f"{'quick' if quick else 'full'}, medians of {cfg.runs} runs")
    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=REPO) as name:
        scratch = Path(name)
        try:
            _write_rows(report, limits, scratch, cfg)
        finally:
            gc.unfreeze()
        _restore_rows(report, scratch, cfg)
    report.print()


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])
