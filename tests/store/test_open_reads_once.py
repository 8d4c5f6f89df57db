"""``open()`` of a crashed log reads it once and validates it once.

The read's validated session already holds the closers and the end-seed; the repair
writes exactly the closers after the committed region, so the log is not read back (the
appender's tail check refuses anything else). Counted with spies that call the real
scanner and the real model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_store.jsonl.scan import LogScanner
from dsh_store.model import Session

from .helpers import CWD, complete_turn, make_store


def _crashed_log(tmp_path: Path) -> Path:
    store = make_store(tmp_path)
    live = store.new("s1", cwd=CWD)
    complete_turn(live, 1, first=True)
    live.append("turn/start", {"turn": 2})
    live.append("step/start", {"turn": 2, "step": 1})
    live.close()
    with open(live.path, "ab") as log:
        log.write(b'{"type":"assistant/chunk","se')  # torn mid-write
    return live.path


def test_open_of_a_crashed_log_reads_and_validates_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _crashed_log(tmp_path)
    scans: list[str] = []
    validations: list[int] = []
    real_rows = LogScanner.rows
    real_from_restore = Session.from_restore.__func__  # type: ignore[attr-defined]

    def rows(self: LogScanner) -> Iterator[Any]:
        scans.append(self.path)
        return real_rows(self)

    def from_restore(cls: type[Session], *args: Any, **options: Any) -> Session:
        validations.append(1)
        session: Session = real_from_restore(cls, *args, **options)
        return session

    monkeypatch.setattr(LogScanner, "rows", rows)
    monkeypatch.setattr(Session, "from_restore", classmethod(from_restore))
    store = make_store(tmp_path)
    live = store.open("s1")
    assert (len(scans), len(validations)) == (1, 1)
    assert [event.type for event in live.session.events[-3:]] == [
        "step/end",
        "turn/end",
        "session/end-seed",
    ]
    live.append("turn/start", {"turn": 3})
    live.close()
    monkeypatch.undo()
    events = make_store(tmp_path).inspect("s1").events
    assert [event.seq for event in events] == list(range(len(events)))
    assert events[-3].data["reason"] == {"kind": "interrupted"}
    sidecars = list(path.parent.glob(path.name + ".torn-*"))
    assert [sidecar.read_bytes() for sidecar in sidecars] == [b'{"type":"assistant/chunk","se']
