"""The backend-neutral contract suite: fixtures.

Every case in this folder runs once per backend in :data:`BACKENDS`, per writer flavour
(sync :class:`LiveSession`, asyncio :class:`AsyncLiveSession`) and per write-behind window
(0: every event is written at once; the default window). A backend joins the suite by
implementing :class:`dsh_store.backend.StorageBackend` and adding one line to
:data:`BACKENDS`: a ``make_backend`` function that returns a :class:`Harness`.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dsh_store.backend import StorageBackend
from dsh_store.jsonl.writebehind import DEFAULT_WINDOW_S
from dsh_store.live import AsyncLiveSession, AsyncOpening, LiveSession
from dsh_store.memory import MemoryBackend
from dsh_store.model import SessionEvent
from dsh_store.store import JsonlStore, SessionStore
from tests.model.builders import ticking_clock

T = TypeVar("T")


@dataclass
class Harness:
    """A store over one backend plus the hooks that stand in for a crash or a full disk.

    ``tear(location, fragment)`` leaves a torn fragment after the last row;
    ``replace_row(location, index, record)`` damages committed row ``index`` at rest;
    ``fail_next_append(location)`` makes the next batch's durable write fail once;
    ``cut_tails(location)`` returns the tails repairs cut (they must be kept).
    """

    store: SessionStore
    tear: Callable[[Path, bytes], None]
    replace_row: Callable[[Path, int, bytes], None]
    fail_next_append: Callable[[Path], None]
    cut_tails: Callable[[Path], list[bytes]]

    @property
    def backend(self) -> StorageBackend:
        return self.store.backend


MakeBackend = Callable[[Path, pytest.MonkeyPatch, dict[str, Any]], Harness]


def jsonl_backend(root: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]) -> Harness:
    """The raw-JSONL backend under ``root``; faults are real ``os`` call failures."""
    store = JsonlStore(root / "store", **options)

    def tear(location: Path, fragment: bytes) -> None:
        with open(location, "ab") as log:
            log.write(fragment)

    def replace_row(location: Path, index: int, record: bytes) -> None:
        lines = location.read_bytes().split(b"\n")
        lines[index + 1] = record
        location.write_bytes(b"\n".join(lines))

    def fail_next_append(location: Path) -> None:
        inode = location.stat().st_ino
        original = os.fsync
        armed = [True]

        def fsync(fd: int) -> None:
            if armed[0] and os.fstat(fd).st_ino == inode:
                armed[0] = False
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            original(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    def cut_tails(location: Path) -> list[bytes]:
        found = sorted(location.parent.glob(location.name + ".torn-*"))
        return [path.read_bytes() for path in found if not path.name.endswith(".partial")]

    return Harness(store, tear, replace_row, fail_next_append, cut_tails)


def memory_backend(root: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]) -> Harness:
    """The in-memory reference backend; faults through its own hooks."""
    backend = MemoryBackend()
    store = SessionStore(backend, **options)

    def fail_next_append(location: Path) -> None:
        backend.fail_next("append", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))

    return Harness(store, backend.tear, backend.replace_row, fail_next_append, backend.cut_tails)


def postgres_backend(
    root: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> Harness:
    """The PostgreSQL backend in a fresh schema of the test server (tests/postgres)."""
    from tests.postgres.contract_harness import postgres_harness

    return postgres_harness(monkeypatch, options)


# Adding a backend: implement dsh_store.backend.StorageBackend, write its make_backend
# function (like the two above), and add ONE line here.
BACKENDS: dict[str, MakeBackend] = {
    "jsonl": jsonl_backend,
    "memory": memory_backend,
    "postgres": postgres_backend,
}

WINDOWS = {"window0": 0.0, "default-window": DEFAULT_WINDOW_S}


class Writer:
    """One live session driven the same way for the sync and the asyncio writer."""

    def __init__(self, mode: str, start: Callable[[], LiveSession | AsyncOpening]) -> None:
        self.mode = mode
        self._runner: asyncio.Runner | None = None
        opened = start()
        if isinstance(opened, LiveSession):
            self._sync: LiveSession | None = opened
            self._async: AsyncLiveSession | None = None
        else:
            self._sync = None
            self._runner = asyncio.Runner()
            self._async = self._run(_awaited(opened))

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        assert self._runner is not None
        return self._runner.run(coroutine)

    @property
    def live(self) -> LiveSession | AsyncLiveSession:
        live = self._sync if self._sync is not None else self._async
        assert live is not None
        return live

    def append(self, event_type: str, data: Any, **options: Any) -> SessionEvent:
        if self._sync is not None:
            return self._sync.append(event_type, data, **options)
        assert self._async is not None
        return self._run(self._async.append(event_type, data, **options))

    def flush(self) -> None:
        if self._sync is not None:
            self._sync.flush()
            return
        assert self._async is not None
        self._run(self._async.flush())

    def close(self) -> None:
        try:
            if self._sync is not None:
                self._sync.close()
            elif self._async is not None:
                self._run(self._async.close())
        finally:
            if self._runner is not None:
                self._runner.close()
                self._runner = None


async def _awaited(opening: AsyncOpening) -> AsyncLiveSession:
    return await opening


@dataclass
class Contract:
    """What a contract case gets: the harness and the writer flavour."""

    harness: Harness
    mode: str

    @property
    def store(self) -> SessionStore:
        return self.harness.store

    def new(self, session_id: str, **options: Any) -> Writer:
        if self.mode == "sync":
            return Writer(self.mode, lambda: self.store.new(session_id, **options))
        return Writer(self.mode, lambda: self.store.anew(session_id, **options))

    def open(self, session_id: str) -> Writer:
        if self.mode == "sync":
            return Writer(self.mode, lambda: self.store.open(session_id))
        return Writer(self.mode, lambda: self.store.aopen(session_id))


@pytest.fixture(
    params=[
        (backend, mode, window)
        for backend in BACKENDS
        for mode in ("sync", "asyncio")
        for window in WINDOWS
    ],
    ids=lambda param: "-".join(param),
)
def contract(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Contract]:
    backend, mode, window = request.param
    options = {"window_s": WINDOWS[window], "clock": ticking_clock(1_700_000_000_000)}
    harness = BACKENDS[backend](tmp_path, monkeypatch, options)
    try:
        yield Contract(harness, mode)
    finally:
        harness.backend.close()
