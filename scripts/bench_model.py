"""Benchmark group ``model``: the cost of ``Session.append`` against ``orjson.dumps``.

Both sides run over the same realistic v4 event mix in the same process; the ratio is
what docs/model.md reports. Nothing here asserts a time.
"""

from __future__ import annotations

from typing import Any

import orjson
from benchlib import Report, event_mix, median_seconds

from dsh_store import jsonvalue
from dsh_store.model import Session


def _replay(mix: list[dict[str, Any]]) -> Session:
    session = Session.create("bench", clock=lambda: 1_780_000_000_000)
    append = session.append
    for event in mix:
        append(
            event["type"],
            event["data"],
            surface_op=event.get("surfaceOp"),
            source_event_seqs=event.get("sourceEventSeqs"),
        )
    return session


def _dumps(mix: list[dict[str, Any]]) -> None:
    dumps = orjson.dumps
    for event in mix:
        dumps(event)


def _lossless_encode(mix: list[dict[str, Any]]) -> None:
    encode = jsonvalue.encode
    for event in mix:
        encode(event, event_type=event["type"], path="")


def run(quick: bool) -> None:
    """Print ``Session.append`` per event divided by ``orjson.dumps`` per event."""
    mix = event_mix(turns=30 if quick else 100)
    repeats = 3 if quick else 7
    ours = median_seconds(lambda: _replay(mix), repeats) / len(mix)
    baseline = median_seconds(lambda: _dumps(mix), repeats) / len(mix)
    checked = median_seconds(lambda: _lossless_encode(mix), repeats) / len(mix)
    report = Report("model")
    report.value("events in the mix", str(len(mix)))
    report.value("orjson.dumps per event", f"{baseline * 1e6:.2f} us")
    report.value("Session.append per event", f"{ours * 1e6:.2f} us")
    report.ratio("Session.append / orjson.dumps", ours, baseline, "<= 1.5x")
    # The lossless check + encode every append must make, for reading the ratio above.
    report.ratio("jsonvalue.encode / orjson.dumps", checked, baseline, "(floor of the above)")
    report.print()


if __name__ == "__main__":
    run(quick=False)
