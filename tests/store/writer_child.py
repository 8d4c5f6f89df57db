"""A writer process for the kill tests: appends turns through ``LiveSession`` until killed.

Usage: ``python -m tests.store.writer_child ROOT SESSION_ID TURNS``. It opens the session
(repairing a crashed log) or creates it, then writes ``TURNS`` tool turns, calling
``flush()`` at the semantic checkpoints (after the tool call is logged, at turn end). After
each ``flush()`` returns it prints one ``ACK {"seq","type","data"}`` line per event that
became durable, flushing stdout line by line, so the parent knows exactly what was
acknowledged when it kills this process. It prints ``DONE`` after closing.

Failpoints come from the environment (``DSH_STORE_FAILPOINT``, ``DSH_STORE_FAILPOINT_SKIP``).
"""

from __future__ import annotations

import sys

import orjson

from dsh_store.errors import SessionNotFoundError
from dsh_store.store import JsonlStore, LiveSession
from tests.model.builders import assistant, tool_call, tool_result, user
from tests.store.helpers import CWD


def _ack(live: LiveSession, acked: int) -> int:
    """Flush, then report every event from ``acked`` on; returns the new watermark."""
    live.flush()
    events = live.session.events
    for event in events[acked:]:
        record = {"seq": event.seq, "type": event.type, "data": event.data}
        sys.stdout.write("ACK " + orjson.dumps(record).decode() + "\n")
    sys.stdout.flush()
    return len(events)


def main(root: str, session_id: str, turns: int) -> None:
    store = JsonlStore(root, window_s=0.001, max_batch_events=4)
    try:
        live = store.open(session_id)
    except SessionNotFoundError:
        live = store.new(session_id, cwd=CWD)
    acked = live.session.first_live_seq
    with live:
        done = sum(1 for event in live.session.events if event.type == "turn/start")
        for turn in range(done + 1, done + turns + 1):
            call = f"call-{turn}"
            live.append("turn/start", {"turn": turn})
            live.append("step/start", {"turn": turn, "step": 1})
            live.append("user/message", user(f"task {turn}", f"u{turn}"), surface_op="append")
            live.append(
                "assistant/message",
                assistant(turn, 1, "working " * (turn % 7), (call,), message_id=f"a{turn}"),
                surface_op="append",
            )
            started = live.append("tool/call", tool_call(turn, 1, call))
            acked = _ack(live, acked)  # the tool's intent is durable before it "runs"
            live.append(
                "tool/result",
                tool_result(turn, 1, call, f"output {turn}"),
                surface_op="append",
                source_event_seqs=[started.seq],
            )
            live.append("step/end", {"turn": turn, "step": 1})
            live.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            acked = _ack(live, acked)
    sys.stdout.write("DONE\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
