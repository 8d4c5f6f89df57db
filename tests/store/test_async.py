"""The asyncio API: ``aopen``/``anew``, a loop that keeps running, backpressure that awaits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh_store.errors import SessionLockedError
from tests.model.builders import user

from .helpers import CWD, make_store, wire_events


def test_anew_then_aopen_round_trip(tmp_path: Path) -> None:
    store = make_store(tmp_path)

    async def scenario() -> None:
        async with store.anew("a1", cwd=CWD, agent_preset="fast") as live:
            await live.append("turn/start", {"turn": 1})
            await live.append("step/start", {"turn": 1, "step": 1})
            await live.append("user/message", user(), surface_op="append")
            await live.flush()
            assert live.durable_seq == 2
            with pytest.raises(SessionLockedError, match="'a1' is open for writing elsewhere"):
                await store.aopen("a1")
            await live.append_many(
                [
                    ("step/end", {"turn": 1, "step": 1}),
                    ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
                ]
            )
        live = await store.aopen("a1")
        try:
            await live.append("turn/start", {"turn": 2})
            await live.flush()
            assert live.durable_seq == 6
        finally:
            await live.close()
        await live.close()  # idempotent

    asyncio.run(scenario())
    events = wire_events(store.locate("a1"))
    assert [e["type"] for e in events] == [
        "turn/start",
        "step/start",
        "user/message",
        "step/end",
        "turn/end",
        "session/end-seed",
        "turn/start",
    ]
    loaded = store.load("a1")
    assert loaded.header.agent_preset == "fast"
    assert loaded.events[-1].data == {"turn": 2, "reason": {"kind": "interrupted"}}


def test_the_loop_keeps_running_while_flushes_write(tmp_path: Path) -> None:
    store = make_store(tmp_path, window_s=0.0)
    ticks_during_flush = 0
    flushing = False

    async def heartbeat(stop: asyncio.Event) -> None:
        nonlocal ticks_during_flush
        while not stop.is_set():
            if flushing:
                ticks_during_flush += 1
            await asyncio.sleep(0)

    async def scenario() -> int:
        nonlocal flushing
        stop = asyncio.Event()
        beat = asyncio.create_task(heartbeat(stop))
        async with store.anew("a2", cwd=CWD) as live:
            for turn in range(1, 21):
                await live.append("turn/start", {"turn": turn})
                await live.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
                flushing = True
                await live.flush()
                flushing = False
            count = live.session.seq
        stop.set()
        await beat
        return count

    count = asyncio.run(scenario())
    assert count == 40
    assert ticks_during_flush >= 20  # at least one heartbeat inside every flush
    assert [e["seq"] for e in wire_events(store.locate("a2"))] == list(range(40))


def test_backpressure_awaits_instead_of_raising(tmp_path: Path) -> None:
    store = make_store(tmp_path, window_s=3600.0, max_pending_bytes=700, max_batch_bytes=None)

    async def scenario() -> None:
        async with store.anew("a3", cwd=CWD) as live:
            await live.append("turn/start", {"turn": 1})
            await live.append("step/start", {"turn": 1, "step": 1})
            # The cap is reached (an event is accepted whole while below it): the next waits.
            big = user("x" * 800, "m-big")
            await live.append("user/message", big, surface_op="append")
            blocked = asyncio.create_task(
                live.append("user/message", user("y" * 300, "m-big2"), surface_op="append")
            )
            for _ in range(20):
                await asyncio.sleep(0)
            assert not blocked.done()  # waiting for room, not failed
            assert live.durable_seq is None
            await live.flush()  # writes the queue, which frees room for the blocked append
            event = await blocked
            assert event.seq == 3
            await live.flush()
            assert live.durable_seq == 3
            # Blocked again, then closed: the close still writes the waiting event.
            await live.append("user/message", user("z" * 800, "m-big3"), surface_op="append")
            again = asyncio.create_task(
                live.append("user/message", user("w" * 300, "m-big4"), surface_op="append")
            )
            for _ in range(20):
                await asyncio.sleep(0)
            assert not again.done()

        assert (await again).seq == 5

    asyncio.run(scenario())
    assert [e["seq"] for e in wire_events(store.locate("a3"))] == [0, 1, 2, 3, 4, 5]
