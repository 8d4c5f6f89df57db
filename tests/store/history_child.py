"""A multi-producer writer process for the history test: K threads, one session each.

Usage: ``python -m tests.store.history_child ROOT SEED WINDOW_S THREADS TURNS``. One
``JsonlStore`` is shared; thread ``i`` owns session ``h-i``, opens it (repairing a crashed
log) or creates it, and appends up to ``TURNS`` complete turns, calling ``flush()`` after
randomly chosen events (an RNG seeded per thread from ``SEED``). Each thread writes its
client-side history to stdout, one line per operation, under one lock and flushed at once:

- ``INVOKE <session> <seq> <type>`` before the event is handed to ``append``;
- ``OK <session> <seq> <json {"type","data"}>`` for every event up to the last seq once the
  ``flush()`` covering it has returned, including the ``session/end-seed {}`` marker that
  ``open()`` of a stored session queues by itself (no INVOKE: it is the store's event).

Payloads are a pure function of (session, turn, position in the turn): see
:func:`turn_events`, which the parent uses to know what each INVOKE must carry. ``DONE``
is printed after every session closed (the parent kills the process long before).
"""

from __future__ import annotations

import random
import sys
import threading
from typing import Any

import orjson

from dsh_store.errors import SessionNotFoundError
from dsh_store.store import JsonlStore, LiveSession
from tests.model.builders import user
from tests.store.helpers import CWD

_out = threading.Lock()


def session_id(index: int) -> str:
    return f"h-{index}"


def turn_events(session: str, turn: int) -> list[tuple[str, dict[str, Any], str | None]]:
    """The ``(type, data, surface_op)`` of turn ``turn`` of ``session``, in append order."""
    text = f"{session} task {turn} " + "x" * (turn * 37 % 300)
    return [
        ("turn/start", {"turn": turn}, None),
        ("step/start", {"turn": turn, "step": 1}, None),
        ("user/message", user(text, f"{session}-u{turn}"), "append"),
        ("step/end", {"turn": turn, "step": 1}, None),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, None),
    ]


def _emit(lines: list[str]) -> None:
    if not lines:
        return
    with _out:
        sys.stdout.write("".join(lines))
        sys.stdout.flush()


def _ack(live: LiveSession, acked: int) -> int:
    """Flush, then report every event from seq ``acked`` on; returns the new watermark."""
    live.flush()
    events = live.session.events
    lines = []
    for event in events[acked:]:
        record = {"type": event.type, "data": event.data}
        lines.append(f"OK {live.id} {event.seq} {orjson.dumps(record).decode()}\n")
    _emit(lines)
    return len(events)


def _producer(store: JsonlStore, index: int, seed: int, turns: int, errors: list[str]) -> None:
    sid = session_id(index)
    rng = random.Random(seed * 1_000 + index)
    try:
        try:
            live = store.open(sid)
        except SessionNotFoundError:
            live = store.new(sid, cwd=CWD)
        with live:
            # Durable before this life: never re-acknowledged. The end-seed marker open()
            # queued is acknowledged by the first flush (the parent predicts it: open() may
            # write it before this thread could announce it).
            acked = live.session.first_live_seq
            done = sum(1 for e in live.session.events if e.type == "turn/start")
            for turn in range(done + 1, done + turns + 1):
                for type_, data, surface_op in turn_events(sid, turn):
                    seq = len(live.session.events)
                    _emit([f"INVOKE {sid} {seq} {type_}\n"])
                    event = live.append(type_, data, surface_op=surface_op)
                    assert event.seq == seq, (event.seq, seq)
                    if rng.random() < 0.3:
                        acked = _ack(live, acked)
            acked = _ack(live, acked)
    except BaseException as exc:  # reported, so a broken producer fails the parent's check
        errors.append(f"{sid}: {exc!r}")
        _emit([f"ERROR {sid} {exc!r}\n"])


def main(root: str, seed: int, window_s: float, threads: int, turns: int) -> None:
    store = JsonlStore(root, window_s=window_s)
    errors: list[str] = []
    workers = [
        threading.Thread(target=_producer, args=(store, i, seed, turns, errors), daemon=True)
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    _emit(["DONE\n"])
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
