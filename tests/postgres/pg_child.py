"""A writer process for the PostgreSQL process tests.

Usage: ``python -m tests.postgres.pg_child URL SESSION_ID MODE [N]``. Modes:

- ``hold``: create (or open) the session, commit one turn start, print ``READY``, then
  append ``N`` events that are never flushed (a 60 s window) and wait to be killed;
- ``batches``: create the session, commit ``N`` events with ``flush()`` and print
  ``ACKED <count>``, then append ``N`` more and flush (the failpoint kills it mid-batch);
- ``write``: create the session and write ``N`` turns with a flush after each, print
  ``DONE <events>``;
- ``contend``: try to open the session; print ``LOCKED`` on ``SessionLockedError``.
- ``open``: open the stored session (its repair commits first), print ``OPENED``.

Failpoints come from the environment (``DSH_STORE_FAILPOINT``, ``DSH_STORE_FAILPOINT_SKIP``).
"""

from __future__ import annotations

import sys
import time

from dsh_store.errors import SessionLockedError, SessionNotFoundError
from dsh_store.payloads import step_end, step_start, turn_end, turn_start, user_message
from dsh_store.postgres.store import PostgresStore


def _turn(live: object, turn: int) -> None:
    append = live.append  # type: ignore[attr-defined]
    append("turn/start", turn_start(turn))
    append("step/start", step_start(turn, 1))
    append("user/message", user_message(f"task {turn}", id=f"u{turn}"), surface_op="append")
    append("step/end", step_end(turn, 1))
    append("turn/end", turn_end(turn))


def main(url: str, session_id: str, mode: str, count: int) -> None:
    if mode == "open":
        PostgresStore(url).open(session_id).close()
        print("OPENED", flush=True)
        return
    if mode == "contend":
        try:
            PostgresStore(url).open(session_id).close()
        except SessionLockedError:
            print("LOCKED", flush=True)
            return
        print("OPENED", flush=True)
        return
    # A 60 s window: only flush() writes, each flush one batch of everything queued.
    store = PostgresStore(url, window_s=60.0 if mode in ("hold", "batches") else 0.001)
    if mode == "hold":
        try:
            live = store.open(session_id)
        except SessionNotFoundError:
            live = store.new(session_id)
        live.append("turn/start", turn_start(1))
        live.flush()
        print("READY", flush=True)
        for index in range(count):
            live.append("user/message", user_message(f"unflushed {index}"), surface_op="append")
        time.sleep(120)
        return
    live = store.new(session_id)
    if mode == "batches":
        live.append("turn/start", turn_start(1))
        live.append("step/start", step_start(1, 1))
        for index in range(count - 2):
            live.append("user/message", user_message(f"acked {index}"), surface_op="append")
        live.flush()
        print(f"ACKED {len(live.session.events)}", flush=True)
        for index in range(count):
            live.append("user/message", user_message(f"torn {index}"), surface_op="append")
        live.flush()
        print("NOT KILLED", flush=True)
        return
    for turn in range(1, count + 1):
        _turn(live, turn)
        live.flush()
    live.close()
    print(f"DONE {len(live.session.events)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
