"""Benchmark group ``model``: the cost of ``Session.append`` against ``orjson.dumps``.

Both sides run over the same realistic v4 event mix in the same process, alternately
(one pass of each measurement in turn, many rounds, medians); the ratio is what
docs/model.md reports. The breakdown rows split one append into its parts, each timed
over the same mix in the same rounds, so the distance to the target is visible in every
run. Nothing here asserts a time.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson
from benchlib import Report, alternating_medians, event_mix

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


def _dumps_kept(mix: list[dict[str, Any]]) -> list[bytes]:
    # A session keeps every line; fresh memory for each one costs extra on some machines.
    dumps = orjson.dumps
    return [dumps(event) for event in mix]


def _screen(mix: list[dict[str, Any]]) -> None:
    screen = jsonvalue._screen_accepts
    for event in mix:
        screen(event)


def _lossless_encode(mix: list[dict[str, Any]]) -> None:
    encode = jsonvalue.encode
    for event in mix:
        encode(event, event_type=event["type"], path="")


def _free_encode(value: object, *, event_type: str | None = None, **_: object) -> bytes:
    return b"\n"


def _free_encode_framed(
    frame: dict[str, Any], inner: object, *, event_type: str | None = None, **_: object
) -> bytes:
    return b"\n"


def _free_row(frame: dict[str, Any], inner: object) -> bytes:
    return b"\n"


def _replay_without_encoding(mix: list[dict[str, Any]]) -> None:
    # The model's own work: validation, stamping, the event object and the state folds
    # (the append path encodes through fast_row or encode_row, the others through encode).
    real = jsonvalue.encode, jsonvalue.encode_row, jsonvalue.fast_row
    jsonvalue.encode, jsonvalue.encode_row = _free_encode, _free_encode_framed
    if jsonvalue.fast_row is not None:
        jsonvalue.fast_row = _free_row
    try:
        _replay(mix)
    finally:
        jsonvalue.encode, jsonvalue.encode_row, jsonvalue.fast_row = real


def run(quick: bool) -> None:
    """Print ``Session.append`` per event divided by ``orjson.dumps`` per event."""
    mix = event_mix(turns=30 if quick else 100)
    works = {
        "ours": _replay,
        "baseline": _dumps,
        "checked": _lossless_encode,
        "kept": _dumps_kept,
        "screen": _screen,
        "model": _replay_without_encoding,
    }
    medians = alternating_medians(
        {name: functools.partial(work, mix) for name, work in works.items()},
        repeats=5 if quick else 25,
    )
    ours, baseline, checked, kept, screen, model = (medians[name] / len(mix) for name in works)
    report = Report("model")
    report.value("events in the mix", str(len(mix)))
    report.value("orjson.dumps per event", f"{baseline * 1e6:.2f} us")
    report.value("Session.append per event", f"{ours * 1e6:.2f} us")
    report.ratio("Session.append / orjson.dumps", ours, baseline, "<= 2.5x")
    # The breakdown: what one append spends, each part over the same mix.
    report.ratio("  jsonvalue.encode / orjson.dumps", checked, baseline, "lossless check + encode")
    report.ratio("    type screen / orjson.dumps", screen, baseline, "inside encode, after orjson")
    report.ratio("  model work / orjson.dumps", model, baseline, "append with encoding free")
    report.ratio("  orjson.dumps, lines kept / dumps", kept, baseline, "cost of keeping each line")
    report.print()


if __name__ == "__main__":
    run(quick=False)
