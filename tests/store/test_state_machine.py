"""A Hypothesis state machine: append / flush / crash / reopen against acknowledged events.

A crash copies the log, cut at a random length between the last acknowledged size and
what the writer has put on disk so far (optionally with junk appended), into a fresh
store root: that is what a killed writer can leave. Invariants after every reopen: each
acknowledged event is present with identical seq, type and data; seqs are dense; a
second restore changes nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dsh_store.store import JsonlStore, LiveSession
from tests.model.builders import user

from .helpers import CWD, make_store, new_scratch_dir, snapshot

SESSION = "sm"


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.scratch = new_scratch_dir()
        self.generation = 0
        self.store = self._fresh_store()
        self.live: LiveSession | None = self.store.new(SESSION, cwd=CWD)
        self.acked: list[tuple[int, str, Any]] = []
        self.acked_size = 0

    def _fresh_store(self) -> JsonlStore:
        self.generation += 1
        return make_store(self.scratch / f"root{self.generation}")

    @property
    def path(self) -> Path:
        return self.store.locate(SESSION, CWD)

    # -- rules -----------------------------------------------------------------------

    @precondition(lambda self: self.live is not None and self.live.session.is_balanced)
    @rule(text=st.text(max_size=20))
    def begin_turn(self, text: str) -> None:
        assert self.live is not None
        turn = sum(1 for e in self.live.session.events if e.type == "turn/start") + 1
        self.live.append("turn/start", {"turn": turn})
        self.live.append("step/start", {"turn": turn, "step": 1})
        self.live.append("user/message", user(text, f"u{turn}"), surface_op="append")

    @precondition(lambda self: self.live is not None and not self.live.session.is_balanced)
    @rule()
    def end_turn(self) -> None:
        assert self.live is not None
        events = self.live.session.events
        turn = sum(1 for e in events if e.type == "turn/start")
        self.live.append("step/end", {"turn": turn, "step": 1})
        self.live.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    @precondition(lambda self: self.live is not None)
    @rule()
    def flush(self) -> None:
        assert self.live is not None
        self.live.flush()
        if self.live.session.seq:
            self.acked = [(e.seq, e.type, e.data) for e in self.live.session.events]
            self.acked_size = self.path.stat().st_size

    @precondition(lambda self: self.live is not None)
    @rule(
        cut=st.floats(min_value=0, max_value=1), junk=st.sampled_from([b"", b"\x00" * 7, b'{"ty'])
    )
    def crash(self, cut: float, junk: bytes) -> None:
        assert self.live is not None
        on_disk = self.path.read_bytes() if self.path.exists() else b""
        floor = self.acked_size
        if on_disk and floor == 0:
            # Materialization is atomic: once the file exists it holds at least the header.
            floor = on_disk.index(b"\n") + 1
        length = floor + int((len(on_disk) - floor) * cut)
        old_path = self.path
        self.live.close()  # in the old root, which is thrown away
        self.store = self._fresh_store()
        self.live = None
        if length == 0:
            return  # never materialized: the crash leaves nothing
        self.path.parent.mkdir(parents=True)
        self.path.write_bytes(on_disk[:length] + junk)
        shutil.rmtree(old_path.parent.parent.parent)

    @precondition(lambda self: self.live is None)
    @rule()
    def reopen(self) -> None:
        if not self.path.exists():
            assert self.acked == []
            self.live = self.store.new(SESSION, cwd=CWD)
            return
        first = self.store.load(SESSION)
        before = snapshot(self.path)
        second = self.store.load(SESSION)
        assert snapshot(self.path) == before
        assert second.events == first.events
        events = first.events
        assert [e.seq for e in events] == list(range(len(events)))
        assert [(e.seq, e.type, e.data) for e in events[: len(self.acked)]] == self.acked
        self.live = self.store.open(SESSION)
        self.acked = [(e.seq, e.type, e.data) for e in events]
        self.acked_size = self.path.stat().st_size

    @invariant()
    def seqs_are_dense(self) -> None:
        assert [seq for seq, _, _ in self.acked] == list(range(len(self.acked)))

    def teardown(self) -> None:
        if self.live is not None:
            self.live.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
