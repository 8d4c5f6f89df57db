"""Builders shared by the 2->3 and 3->4 edge tests: headers, dense logs, runs, refusals, samples."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrations import EdgeStage
from tests.conftest import SHARED


def session_header(version: int) -> dict[str, Any]:
    """The unseeded header of session ``s-1`` in format ``version``."""
    return {
        "type": "session",
        "version": version,
        "id": "s-1",
        "createdAt": 1000,
        "isSeeded": False,
        "delegationDepth": 0,
    }


def drain(stage: EdgeStage, events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row ``stage`` emits for ``events``, then for its finish."""
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(stage.feed(event))
    out.extend(stage.finish())
    return out


def load_sample(name: str) -> list[dict[str, Any]]:
    """The rows of one recorded sample log of the shared reference."""
    path = SHARED / "reference" / "samples" / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def log(*specs: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Build dense events from ``(type, data[, extra envelope])`` tuples."""
    events = []
    for seq, spec in enumerate(specs):
        event: dict[str, Any] = {"type": spec[0], "seq": seq, "time": 100 + seq, "data": spec[1]}
        if len(spec) > 2:
            event.update(spec[2])
        events.append(event)
    return events


def user(
    text: str, message_id: str, source: dict[str, Any] | None = None, **extra: Any
) -> tuple[Any, ...]:
    data = {
        "role": "user",
        "id": message_id,
        "content": [{"type": "text", "text": text}],
        "source": source or {"kind": "user"},
        **extra,
    }
    return ("user/message", data, {"surfaceOp": "append"})


def pure_dense_run(
    run: Callable[[list[dict[str, Any]]], list[dict[str, Any]]], events: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``run(events)``, checked pure (input untouched), deterministic and dense."""
    snapshot = copy.deepcopy(events)
    out = run(events)
    assert events == snapshot  # pure: the input is untouched
    assert run(copy.deepcopy(events)) == out  # deterministic
    assert [e["seq"] for e in out] == list(range(len(out)))
    return out


def refusal_of(call: Callable[[], object], *, edge: str, path: str) -> Any:
    """Run ``call``; it must be refused by ``edge`` naming ``path``. Returns the error."""
    with pytest.raises(MigrationRefusedError) as caught:
        call()
    error: Any = caught.value
    assert error.edge == edge
    assert error.path == path
    return error
