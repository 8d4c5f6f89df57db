"""The packed-row fast path against the per-chunk path it replaces: identical outcomes.

The 1->2 stage folds a packed row as one run (:meth:`V1ToV2Stage.fold_packed_row`) and
takes the usual claim without decoding it (``_cited``). The reference below is the
earlier, per-chunk path: expand the row into its ``assistant/chunk`` events and fold each,
decode every claim. Both must give byte-identical v4 output, or the identical refusal
(class, rule, edge, source seq, line, message), on every fixture, every corpus log and
generated format-0 logs with packed rows of every kind (including malformed ones).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_store.errors import DshStoreError
from dsh_store.migrate import migrate_file
from dsh_store.migrations import Row
from dsh_store.migrations.packed import expand_packed_row
from dsh_store.migrations.seqmap import expand_seq_list
from dsh_store.migrations.v1_to_v2 import V1ToV2Stage
from tests.conftest import SHARED, shared_missing_reason
from tests.corpus import loaded_copy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HEADER = {"type": "session", "version": 0, "id": "gen", "createdAt": 1, "delegationDepth": 0}


def _per_chunk_fold(
    self: V1ToV2Stage, row: Row, out: list[Row], *, shape_checked: bool = False
) -> None:
    for chunk in expand_packed_row(row, path=self._path, edge="1->2"):
        self._admit_seq(chunk)
        self._chunk(chunk, out)


def _decoded_claim(raw: object, seq: int, pending: object) -> list[int] | None:
    return expand_seq_list(raw, seq)


@contextlib.contextmanager
def _per_chunk_path() -> Iterator[None]:
    saved = V1ToV2Stage.fold_packed_row, V1ToV2Stage.__dict__["_cited"]
    V1ToV2Stage.fold_packed_row = _per_chunk_fold  # type: ignore[method-assign]
    V1ToV2Stage._cited = staticmethod(_decoded_claim)  # type: ignore[method-assign]
    try:
        yield
    finally:
        V1ToV2Stage.fold_packed_row = saved[0]  # type: ignore[method-assign]
        V1ToV2Stage._cited = saved[1]  # type: ignore[method-assign]


def _outcome(source: Path, target: Path) -> tuple[Any, ...]:
    target.unlink(missing_ok=True)
    try:
        migrate_file(source, output=target)
    except DshStoreError as error:
        facts = (getattr(error, name, None) for name in ("rule", "edge", "seq", "line"))
        return (type(error).__name__, *facts, str(error))
    return ("migrated", target.read_bytes())


def _assert_same(source: Path, directory: Path) -> tuple[Any, ...]:
    fast = _outcome(source, directory / "fast.v4.jsonl")
    with _per_chunk_path():
        slow = _outcome(source, directory / "slow.v4.jsonl")
    assert fast == slow
    return fast


def test_the_reference_really_is_the_per_chunk_path(tmp_path: Path) -> None:
    # A packed row whose second member has an unsafe time: the fast path checks every
    # time before folding, as the expansion did; the reference must refuse it the same way.
    rows = [
        {"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}},
        {
            "type": "text-chunks",
            "seq0": 1,
            "time0": 5,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [-9], "texts": ["a", "b"]},
        },
    ]
    source = _write(tmp_path / "session.jsonl", rows)
    outcome = _assert_same(source, tmp_path)
    assert outcome[:2] == ("MigrationRefusedError", "malformed-packed-row")
    assert "member 1 has an unsafe time" in outcome[-1]


@pytest.mark.parametrize(
    "source",
    sorted(FIXTURES.glob("*/*/session*.jsonl")) + sorted(FIXTURES.glob("demo/*/*/*/*.jsonl")),
    ids=lambda path: str(path.relative_to(FIXTURES)),
)
def test_every_fixture_migrates_identically(source: Path, tmp_path: Path) -> None:
    _assert_same(source, tmp_path)


def _corpus_logs() -> list[Any]:
    if shared_missing_reason() is not None:
        return [pytest.param(None, id="corpus", marks=pytest.mark.requires("shared"))]
    manifest = json.loads((SHARED / "corpus" / "manifest.json").read_text())
    return [
        pytest.param(entry["path"], id=entry["path"], marks=pytest.mark.requires("shared"))
        for entry in manifest["files"]
    ]


@pytest.mark.parametrize("relative", _corpus_logs())
def test_every_corpus_log_migrates_identically(relative: str, tmp_path: Path) -> None:
    source = loaded_copy(SHARED / "corpus" / relative, tmp_path / "copy")
    _assert_same(source, tmp_path)


# -- generated format-0 logs with packed rows -------------------------------------------

TEXT = st.text(alphabet='ab z\n"é', min_size=0, max_size=4)


def _write(path: Path, rows: list[Row], header: Row = HEADER) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in [header, *rows]))
    return path


@st.composite
def packed_logs(draw: st.DrawFn) -> list[Row]:
    """Turns of steps whose streams are packed rows (cut at random batch ends), plain
    chunk rows, block and finish chunks, claimed or unclaimed; sometimes one row damaged."""
    rows: list[Row] = []
    seq = 0
    time = 100

    def event(kind: str, data: Row, **envelope: Any) -> None:
        nonlocal seq, time
        time += draw(st.integers(0, 3))
        rows.append({"type": kind, "seq": seq, "time": time, "data": data, **envelope})
        seq += 1

    for turn in range(1, draw(st.integers(1, 3)) + 1):
        event("turn/start", {"turn": turn})
        for step in range(1, draw(st.integers(1, 2)) + 1):
            event("step/start", {"turn": turn, "step": step})
            if step == 1:
                message = {
                    "role": "user",
                    "id": f"u{turn}",
                    "content": [{"type": "text", "text": "hi"}],
                    "source": {"kind": "user"},
                }
                event("user/message", message, surfaceOp="append")
            chunk_seqs: list[int] = []
            texts: list[str] = []
            for index, kind in enumerate(draw(st.lists(st.sampled_from("rtc"), max_size=3))):
                members = draw(st.lists(TEXT, min_size=1, max_size=9))
                row_type = {"r": "reasoning-chunks", "t": "text-chunks", "c": "tool-call-chunks"}
                call = {"id": draw(st.sampled_from(["c1", ""]))} if kind == "c" else {}
                if kind == "c" and draw(st.booleans()):
                    call["name"] = draw(st.sampled_from(["bash", ""]))
                while members:
                    size = draw(st.integers(1, len(members)))
                    run, members = members[:size], members[size:]
                    if size == 1 and draw(st.booleans()):
                        delta = {"type": "text-delta", "index": index, "text": run[0]}
                        if kind == "r":
                            delta["type"] = "reasoning-delta"
                        if kind == "c":
                            delta = {"type": "tool-call-delta", "index": index, **call}
                            delta["argumentsDelta"] = run[0]
                        chunk_seqs.append(seq)
                        event("assistant/chunk", {"turn": turn, "step": step, "chunk": delta})
                    else:
                        gaps = draw(
                            st.lists(st.integers(-3, 5), min_size=size - 1, max_size=size - 1)
                        )
                        data: Row = {"turn": turn, "step": step, "index": index, **call, "dt": gaps}
                        data["args" if kind == "c" else "texts"] = run
                        time += draw(st.integers(0, 3))
                        rows.append(
                            {"type": row_type[kind], "seq0": seq, "time0": time, "data": data}
                        )
                        chunk_seqs.extend(range(seq, seq + size))
                        seq += size
                        time += sum(gaps)
                    if kind == "t":
                        texts.extend(run)
            with_finish: bool = draw(st.booleans())
            if chunk_seqs and with_finish:
                finish = {"type": "finish", "reason": {"kind": "stop"}}
                chunk_seqs.append(seq)
                event("assistant/chunk", {"turn": turn, "step": step, "chunk": finish})
            if draw(st.booleans()):
                message = {
                    "role": "assistant",
                    "id": f"a{turn}-{step}",
                    "content": [{"type": "text", "text": "".join(texts) or "ok"}],
                    "source": {"kind": "model", "provider": "p", "model": "m"},
                }
                claim: Any = chunk_seqs
                if chunk_seqs and draw(st.integers(0, 5)) == 0:
                    claim = draw(
                        st.sampled_from(
                            [
                                chunk_seqs[:-1],
                                [chunk_seqs[0], chunk_seqs[-1]],
                                [float(s) for s in chunk_seqs],
                            ]
                        )
                    )
                usage = {"inputTokens": 1, "outputTokens": 1}
                data = {"turn": turn, "step": step, "message": message, "usage": usage}
                event("assistant/message", data, surfaceOp="append", sourceEventSeqs=claim)
            event("step/end", {"turn": turn, "step": step})
        event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    if draw(st.integers(0, 3)) == 0:
        _damage(draw, rows)
    return rows


def _damage(draw: st.DrawFn, rows: list[Row]) -> None:
    packed = [row for row in rows if "seq0" in row]
    if not packed:
        return
    row = draw(st.sampled_from(packed))
    damage = draw(st.sampled_from(["seq0", "time0", "dt", "member", "key", "index"]))
    if damage == "seq0":
        row["seq0"] += draw(st.sampled_from([-1, 1]))
    elif damage == "time0":
        row["time0"] = draw(st.sampled_from([0, -1, 2**53]))
    elif damage == "dt":
        row["data"]["dt"] = (
            [*row["data"]["dt"], 1] if draw(st.booleans()) else [-(10**6)] * len(row["data"]["dt"])
        )
    elif damage == "member":
        members = row["data"].get("texts", row["data"].get("args"))
        members[-1] = 7
    elif damage == "key":
        row["data"]["extra"] = 1
    else:
        row["data"]["index"] = -1


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=packed_logs(), seeded=st.booleans())
def test_generated_packed_logs_migrate_identically(
    rows: list[Row], seeded: bool, tmp_path: Path
) -> None:
    header = dict(HEADER)
    if seeded and rows:
        header["seedLength"] = len([row for row in rows if "seq" in row]) // 2
    source = _write(tmp_path / "session.jsonl", rows, header)
    _assert_same(source, tmp_path)
