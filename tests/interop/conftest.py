"""Fixtures of the interop suite: the upstream install, the seed, the upstream-written stores."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.interop.harness import run_driver
from tests.interop.scenarios import CWD, Script
from tests.interop.upstream import Upstream, UpstreamUnavailable, install

DEFAULT_SEED = 20261201
SEED = int(os.environ.get("DSH_STORE_INTEROP_SEED", DEFAULT_SEED))
INSTALL_TIMEOUT_S = float(os.environ.get("DSH_STORE_UPSTREAM_TIMEOUT", "300"))
CLOCK = 1_790_000_000_000


def pytest_report_header() -> str:
    return f"interop seed: {SEED} (set DSH_STORE_INTEROP_SEED to override)"


@pytest.fixture(scope="session")
def upstream() -> Upstream:
    """The installed upstream packages; the whole suite skips with the reason if absent."""
    try:
        return install(timeout_s=INSTALL_TIMEOUT_S)
    except UpstreamUnavailable as error:
        pytest.skip(f"upstream DSH packages unavailable: {error.reason}")


@dataclass(frozen=True)
class Written:
    """One store root written by the upstream backend, and what is in it."""

    root: Path
    packed: bool
    sessions: tuple[str, ...]
    lenient_only: frozenset[str]
    """Sessions dsh-store refuses by default and migrates with ``lenient=True``."""
    compression: str = "none"
    """The upstream backend's ``compression`` option: ``none`` or ``zstd``."""

    @property
    def log_name(self) -> str:
        return "session.jsonl.zstd" if self.compression == "zstd" else "session.jsonl"

    def log(self, session: str) -> Path:
        matches = list(self.root.glob(f"*/{session}/{self.log_name}"))
        assert len(matches) == 1, (session, matches)
        return matches[0]


OPEN_STOPS = ("not-started", "outcome-unknown", "mid-stream", "step-open", "turn-open")


def _write(
    upstream: Upstream, root: Path, packed: bool, rng: random.Random, compression: str = "none"
) -> Written:
    base = {"op": "write", "root": str(root), "compression": compression, "packChunks": packed}
    first = Script(rng)
    sessions: list[str] = []
    lenient: set[str] = set()

    def new(name: str) -> str:
        sessions.append(name)
        first.create(name)
        return name

    complete = new("complete")
    first.turn(complete, 1)
    first.turn(complete, 2, system="You are a careful assistant. Be brief.")
    for stop in OPEN_STOPS:
        session = new(f"open-{stop}")
        if stop in {"outcome-unknown", "turn-open"}:
            first.turn(session, 1)
        first.turn(session, 2 if stop in {"outcome-unknown", "turn-open"} else 1, stop=stop)
    first.fork(complete, "forked")
    sessions.append("forked")
    first.turn("forked", 3, stop=rng.choice(OPEN_STOPS))
    resumed = new("resumed")
    first.turn(resumed, 1)
    surface = new("surface-first")
    first.turn(surface, 1, user_first=True)
    first.turn(surface, 2, user_first=True, stop="outcome-unknown")
    lenient.add(surface)
    ignorable = new("ignorable")
    first.turn(ignorable, 1)
    lenient.add(ignorable)
    run_driver(upstream, {**base, "clock": CLOCK, "actions": first.actions})

    second = Script(rng)
    note = {"type": "plugin-notes/marker", "data": {"note": "kept"}, "ignorable": True}
    second.actions.append({"do": "store-append", "id": ignorable, "events": [note]})
    second.resume(ignorable)
    second.turn(ignorable, 2, stop="not-started")
    second.resume(resumed)
    second.turn(resumed, 2)
    second.fork(resumed, "forked-mid", {"turnEnd": 1})  # inside the log: turn 2 follows
    second.turn("forked-mid", 2, stop=rng.choice(OPEN_STOPS))
    sessions.append("forked-mid")
    second.turn(resumed, 3, stop="mid-stream")
    run_driver(upstream, {**base, "clock": CLOCK + 10_000_000, "actions": second.actions})
    return Written(root, packed, tuple(sessions), frozenset(lenient), compression)


@pytest.fixture(scope="session")
def written(
    upstream: Upstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[bool, Written]]:
    """Two store roots written by the real upstream backend: packed chunk rows on and off."""
    stores = {}
    for packed in (True, False):
        rng = random.Random(f"{SEED}-write-{packed}")
        root = tmp_path_factory.mktemp(f"upstream-{'packed' if packed else 'unpacked'}")
        stores[packed] = _write(upstream, root / "store", packed, rng)
    yield stores


@pytest.fixture(scope="session")
def written_zstd(
    upstream: Upstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[bool, Written]]:
    """The same two roots, written by the upstream backend in its default zstd encoding."""
    stores = {}
    for packed in (True, False):
        rng = random.Random(f"{SEED}-write-{packed}")
        root = tmp_path_factory.mktemp(f"upstream-zstd-{'packed' if packed else 'unpacked'}")
        stores[packed] = _write(upstream, root / "store", packed, rng, "zstd")
    yield stores


def copy_root(written: Written, target: Path) -> Path:
    """A copy of a written root (for operations that mutate it)."""
    shutil.copytree(written.root, target, symlinks=True)
    return target


def inspect_all(
    upstream: Upstream,
    root: Path,
    sessions: tuple[str, ...],
    mode: str = "inspect",
    compression: str = "none",
) -> dict[str, Any]:
    """The upstream backend's report per session of ``root``."""
    command = {
        "op": "inspect",
        "root": str(root),
        "ids": list(sessions),
        "mode": mode,
        "compression": compression,
    }
    results: dict[str, Any] = run_driver(upstream, command)["results"]
    return results


__all__ = ["CWD", "SEED", "Written", "copy_root", "inspect_all"]
