"""The read path's upgrade equals the edge-by-edge reference, byte for byte, refusal for refusal.

What ``read_log``, ``verify`` and ``migrate_file`` run (:func:`dsh_store.upgrading.upgrade_located`
over a scanner's rows) differs from the reference in three ways that must not show:

- the one-generator driver with the combined 0->1 + 1->2 stage (:mod:`._pipeline`) instead
  of one stacked generator per edge (:func:`dsh_store.migrations.chain`);
- packed chunk rows folded as runs instead of member by member;
- the scanner's rows are owned (``MigrationContext.owned_rows``), so 2->3 and 3->4 rewrite
  payloads in place instead of copying them first.

The reference here is :func:`chain` over a deep copy of the rows, with every packed row
expanded into its per-chunk events and payloads copied; the two must emit the same v4 rows
(same values, same types, same canonical bytes) or raise the same refusal (rule, edge, seq,
event type, message). Logs: every corpus log, every fixture, generated format-0 sessions
(packed and unpacked chunk rows, tool rounds, forks, damaged rows). Files are also run
through ``migrate_file`` and ``read_log``/``examine``: the published bytes are the
reference's, and the three agree on a refusal's rule, edge, seq, line and message.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_store.errors import DshStoreError, MigrationRefusedError
from dsh_store.jsonl.scan import LogScanner
from dsh_store.migrate import migrate_file
from dsh_store.migrations import EDGES, MigrationContext, chain
from dsh_store.migrations._lenient import LenientLog
from dsh_store.migrations._pipeline import located_chain
from dsh_store.migrations._plain_chunks import FUSED_TYPES
from dsh_store.migrations.packed import expand_packed_row, is_packed_row
from dsh_store.model import SessionEvent
from dsh_store.restore import examine, read_log
from dsh_store.upgrading import scanned_rows
from tests.conftest import SHARED, shared_missing_reason, shared_params
from tests.corpus import loaded_copy
from tests.migrations.early_logs import header as early_header
from tests.migrations.early_logs import refused_v0_logs, sample, v0_logs
from tests.migrations.test_properties import HEADER, conversations

Row = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
CORPUS = SHARED / "corpus"

Outcome = tuple[list[bytes], list[Row], tuple[Any, ...] | None]


def _refusal(error: DshStoreError) -> tuple[Any, ...]:
    return (
        type(error).__name__,
        getattr(error, "rule", None),
        getattr(error, "edge", None),
        getattr(error, "seq", None),
        getattr(error, "event_type", None),
        str(error),
    )


def _run(stream: Any) -> tuple[list[Row], tuple[Any, ...] | None]:
    rows: list[Row] = []
    try:
        for row in stream:
            rows.append(copy.deepcopy(row))
    except DshStoreError as error:
        return rows, _refusal(error)
    return rows, None


def _expanded(rows: list[Row]) -> list[Row]:
    """Every packed row as its per-chunk events; a malformed one is left to the edges."""
    out: list[Row] = []
    for row in rows:
        if is_packed_row(row):
            try:
                out.extend(expand_packed_row(copy.deepcopy(row)))
                continue
            except MigrationRefusedError:
                pass
        out.append(row)
    return out


def _context(head: Row, *, owned: bool, lenient: bool = False) -> MigrationContext:
    return MigrationContext(
        path="equal.jsonl",
        session_id=head.get("id"),
        owned_rows=owned,
        lenient=LenientLog() if lenient else None,
    )


def reference(
    head: Row, rows: list[Row], *, expand: bool, lenient: bool = False
) -> tuple[list[Row], Any]:
    """The edge-by-edge chain over copies (packed rows expanded when ``expand``)."""
    source = _expanded(rows) if expand else copy.deepcopy(rows)
    try:
        context = _context(head, owned=False, lenient=lenient)
        _, stream = chain(copy.deepcopy(head), source, context)
    except DshStoreError as error:
        return [], _refusal(error)
    return _run(stream)


def read_path(head: Row, rows: list[Row], *, lenient: bool = False) -> tuple[list[Row], Any]:
    """The read path's driver over rows it owns (fresh copies, as a scanner hands them)."""
    fresh = orjson.loads(orjson.dumps(rows))
    try:
        context = _context(head, owned=True, lenient=lenient)
        _, stream, _ = located_chain(copy.deepcopy(head), iter(fresh), context)
    except DshStoreError as error:
        return [], _refusal(error)
    return _run(stream)


def _canonical(rows: list[Row]) -> list[bytes]:
    """Each v4 row as the model encodes it (a row the model refuses: its plain bytes)."""
    out = []
    for row in rows:
        try:
            out.append(SessionEvent.from_json(row).line)
        except DshStoreError:
            out.append(orjson.dumps(row))
    return out


def assert_same(head: Row, rows: list[Row], *, lenient: bool = False) -> tuple[list[Row], Any]:
    """The read path against the reference: same rows (values and types), same bytes,
    same refusal; a log that migrates also against the packed-rows-expanded reference.
    With ``lenient`` both run the opt-in, so the note (the last row) must match too."""
    expected_rows, expected_refusal = reference(head, rows, expand=False, lenient=lenient)
    got_rows, got_refusal = read_path(head, rows, lenient=lenient)
    assert got_refusal == expected_refusal
    assert got_rows == expected_rows
    assert repr(got_rows) == repr(expected_rows)  # also tells list from tuple, 0.0 from -0.0
    assert _canonical(got_rows) == _canonical(expected_rows)
    if expected_refusal is None:
        expanded_rows, expanded_refusal = reference(head, rows, expand=True, lenient=lenient)
        assert expanded_refusal is None
        assert _canonical(expanded_rows) == _canonical(got_rows)
    return got_rows, got_refusal


# -- files: corpus and fixtures ---------------------------------------------------------


def _file_rows(path: Path) -> tuple[Row, list[Row]] | None:
    """Header and committed rows as the scanner reads them; None for a file it refuses."""
    scanner = LogScanner(path)
    try:
        info = scanner.read_header()
        if info is None:
            return None
        return info.value, list(scanned_rows(scanner))
    except DshStoreError:
        return None


def _fixture_logs() -> list[Any]:
    logs = []
    for kind in ("valid", "refused", "demo"):
        for path in sorted((FIXTURES / kind).rglob("session*.jsonl")):
            if ".v4." in path.name:
                continue
            logs.append(pytest.param(path, id=str(path.relative_to(FIXTURES))))
    return logs


def _corpus_logs() -> list[Any]:
    if shared_missing_reason() is not None:
        return shared_params(list)
    entries = json.loads((CORPUS / "manifest.json").read_text())["files"]
    return [pytest.param(entry["path"], id=entry["path"]) for entry in entries]


def _located(error: DshStoreError) -> tuple[Any, ...]:
    return (
        type(error).__name__,
        getattr(error, "rule", None),
        getattr(error, "edge", None),
        getattr(error, "seq", None),
        getattr(error, "line", None),
        str(error),
    )


def assert_file_same(path: Path, tmp_path: Path) -> None:
    """Rows of ``path`` through :func:`assert_same`; then ``migrate_file`` publishes the
    reference's bytes, or ``migrate_file``, ``read_log`` and ``examine`` refuse alike."""
    read = _file_rows(path)
    if read is None or read[0].get("version") not in (0, 1, 2, 3):
        return
    head, rows = read
    expected_rows, expected_refusal = reference(head, rows, expand=False)
    assert_same(head, rows)
    output = tmp_path / "out.v4.jsonl"
    migrate_refusal: tuple[Any, ...] | None
    try:
        migrate_file(path, output=output)
    except DshStoreError as error:
        migrate_refusal = _located(error)
    else:
        migrate_refusal = None
        assert expected_refusal is None
        body = b"".join(SessionEvent.from_json(row).line for row in expected_rows)
        assert output.read_bytes().split(b"\n", 1)[1] == body
    try:
        read_log(path)
    except DshStoreError as error:
        assert migrate_refusal == _located(error)
    else:
        assert migrate_refusal is None or migrate_refusal[0] != "MigrationRefusedError"
    report = examine(path)
    if migrate_refusal is not None and migrate_refusal[0] == "MigrationRefusedError":
        assert report.classification == "refused"
        finding = report.findings[-1]
        assert finding.rule == f"refused: {migrate_refusal[1]}"
        assert (finding.seq, finding.line) == (migrate_refusal[3], migrate_refusal[4])


@pytest.mark.parametrize("path", _fixture_logs())
def test_fixture_logs_read_as_the_reference(path: Path, tmp_path: Path) -> None:
    assert_file_same(path, tmp_path)


@pytest.mark.requires("shared")
@pytest.mark.parametrize("name", _corpus_logs())
def test_corpus_logs_read_as_the_reference(name: str, tmp_path: Path) -> None:
    assert_file_same(loaded_copy(CORPUS / name, tmp_path / "session"), tmp_path)


# -- generated sessions ---------------------------------------------------------------

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(conversations())
def test_generated_conversations_read_as_the_reference(conversation: Any) -> None:
    rows, refusal = assert_same(HEADER, conversation.rows)
    assert refusal is None and rows


@_SETTINGS
@given(v0_logs())
def test_generated_early_logs_read_as_the_reference(rows: list[Row]) -> None:
    upgraded, refusal = assert_same(early_header(), rows)
    assert refusal is None and upgraded


@_SETTINGS
@given(v0_logs(), st.booleans())
def test_generated_forks_read_as_the_reference(rows: list[Row], cut_at_end: bool) -> None:
    """A seeded child (``seedLength``) cut at a turn boundary or at the end."""
    ends = [index + 1 for index, row in enumerate(rows) if row.get("type") == "turn/end"]
    events = 0
    for row in rows:
        events += len(row["data"].get("texts", row["data"].get("args", []))) or 1
    if cut_at_end or not ends:
        cut = events
    else:
        cut = sum(
            len(row["data"].get("texts", row["data"].get("args", []))) or 1
            for row in rows[: ends[0]]
        )
    head = early_header(seedLength=cut, parentSession="parent-session")
    upgraded, refusal = assert_same(head, rows)
    assert refusal is None and upgraded


@_SETTINGS
@given(refused_v0_logs())
def test_damaged_early_logs_are_refused_as_the_reference(
    damaged: tuple[list[Row], str, str],
) -> None:
    rows, edge, rule = damaged
    _, refusal = assert_same(early_header(), rows)
    assert refusal is not None and (refusal[2], refusal[1]) == (edge, rule)


_DAMAGE: list[tuple[str, Any]] = [
    ("seq", 10**6),
    ("time", -1),
    ("data", []),
    ("surfaceOp", {"op": "replace", "start": 0, "end": 0}),
    ("sourceEventSeqs", [10**6]),
    ("ignorable", False),
    ("extra", 1),
    ("type", "mode/set"),
    ("type", "request/header"),
]


@_SETTINGS
@given(conversations(), st.sampled_from(_DAMAGE), st.integers(min_value=0))
def test_a_damaged_row_is_refused_as_the_reference(
    conversation: Any, damage: tuple[str, Any], pick: int
) -> None:
    rows = copy.deepcopy(conversation.rows)
    key, value = damage
    rows[pick % len(rows)][key] = value
    assert_same(HEADER, rows)


def test_a_callers_rows_are_not_changed_by_the_upgrade() -> None:
    """Owned rows are rewritten in place; rows a caller hands to ``upgrade`` never are."""
    from dsh_store.migrate import upgrade

    path = FIXTURES / "valid" / "v0-basic" / "session.jsonl"
    read = _file_rows(path)
    assert read is not None
    head, rows = read
    before = copy.deepcopy(rows)
    _, events = upgrade(head, rows)
    assert list(events)
    assert rows == before


# -- adversarial chunk runs and the fused path ----------------------------------------
#
# The read path from format 0 takes plain rows of the renumbered types (turn/start,
# step/start, step/end, request/context, tool/call) through the fused path, and every
# other row, or one whose edge state says otherwise, through the edges' feed. These logs
# put such rows where a stage must decline them (inside a pending attempt, before the
# system head, with a seq gap, with a bad value) and damage chunk runs.

_RUN_KINDS = st.sampled_from(
    ["text", "reasoning", "tool", "finish", "packed-text", "packed-reasoning", "packed-tool"]
)
_ASIDES = st.sampled_from(
    ["request/context", "request/header", "tool/call", "step/start", "step/end", "none"]
)
_PROMPTS = st.sampled_from(["", "be brief", "be thorough"])


def _aside(kind: str, turn: int, step: int, prompt: str = "") -> Row | None:
    data: dict[str, Row | None] = {
        "request/context": {"provider": "p", "model": "m"},
        "request/header": {"header": {"system": prompt, "tools": []}, "reason": "initial"},
        "tool/call": {"turn": turn, "step": step, "callId": "c1", "name": "read", "arguments": {}},
        "step/start": {"turn": turn, "step": step},
        "step/end": {"turn": turn, "step": step},
        "none": None,
    }
    payload = data[kind]
    return None if payload is None else {"type": kind, "data": payload}


_PACKED_TYPES = {
    "packed-text": "text-chunks",
    "packed-reasoning": "reasoning-chunks",
    "packed-tool": "tool-call-chunks",
}


def _run_item(kind: str, turn: int, step: int, index: int, size: int) -> Row:
    if kind.startswith("packed-"):
        body: Row = {"turn": turn, "step": step, "index": index, "dt": [2] * (size - 1)}
        if kind == "packed-tool":
            body.update(id="call-1", name="read", args=["{"] * size)
        else:
            body["texts"] = ["x"] * size
        return {"type": _PACKED_TYPES[kind], "data": body}
    chunks: dict[str, Row] = {
        "text": {"type": "text-delta", "index": index, "text": "t"},
        "reasoning": {"type": "reasoning-delta", "index": index, "text": "r"},
        "tool": {
            "type": "tool-call-delta",
            "index": index,
            "id": "call-1",
            "name": "read",
            "argumentsDelta": "{",
        },
        "finish": {"type": "finish", "finishReason": "stop"},
    }
    return {
        "type": "assistant/chunk",
        "data": {"turn": turn, "step": step, "chunk": chunks[kind]},
    }


def _numbered(items: list[Row]) -> list[Row]:
    """Dense seqs (a packed row counts its members) and times; a claim cites the seqs of
    the chunk items listed under its ``cites``."""
    rows: list[Row] = []
    seq = 0
    where: dict[int, list[int]] = {}
    for item in items:
        row = {key: value for key, value in item.items() if key != "cites"}
        if is_packed_row(row):
            count = len(row["data"].get("texts", row["data"].get("args", [])))
            row = {"type": row["type"], "seq0": seq, "time0": 10_000 + 3 * seq, **row}
            where[id(item)] = list(range(seq, seq + count))
        else:
            row = {"type": row["type"], "seq": seq, "time": 10_000 + 3 * seq, **row}
            where[id(item)] = [seq]
            count = 1
        if "cites" in item:
            row["sourceEventSeqs"] = [s for cited in item["cites"] for s in where[id(cited)]]
        rows.append(row)
        seq += count
    return rows


@st.composite
def chunk_run_logs(draw: st.DrawFn) -> list[Row]:
    """Format-0 rows: turns of steps whose attempts mix plain and packed chunk rows of
    text, reasoning and tool calls, interleave a second step's or block's chunks, and hold
    renumbered rows between chunks; each attempt claimed or left to settle."""
    items: list[Row] = []
    for turn in range(1, draw(st.integers(1, 2)) + 1):
        items.append({"type": "turn/start", "data": {"turn": turn}})
        for step in range(1, draw(st.integers(1, 2)) + 1):
            items.append({"type": "step/start", "data": {"turn": turn, "step": step}})
            if step == 1:
                # As DSH writes it: the prompt's message inside the first step.
                user = {"role": "user", "id": f"u{turn}", "content": [], "source": {"kind": "user"}}
                items.append({"type": "user/message", "data": user, "surfaceOp": "append"})
            if draw(st.booleans()):
                items.append({"type": "request/context", "data": {"provider": "p", "model": "m"}})
                items.append(_aside("request/header", turn, step, draw(_PROMPTS)) or {})
            cited: list[Row] = []
            for kind in draw(st.lists(_RUN_KINDS, max_size=6)):
                # Mostly this step's block 0; sometimes another block or the next step.
                other_step = draw(st.integers(0, 5)) == 0
                item = _run_item(
                    kind,
                    turn,
                    step + 1 if other_step else step,
                    draw(st.integers(0, 1)),
                    draw(st.integers(1, 4)),
                )
                items.append(item)
                cited.append(item)
                aside = _aside(draw(_ASIDES), turn, step, draw(_PROMPTS))
                if aside is not None and draw(st.integers(0, 3)) == 0:
                    items.append(aside)
            claimed: bool = draw(st.booleans())
            if cited and claimed:
                message = {"role": "assistant", "id": f"a{turn}.{step}", "content": []}
                items.append(
                    {
                        "type": "assistant/message",
                        "data": {"turn": turn, "step": step, "message": message},
                        "surfaceOp": "append",
                        "cites": cited,
                    }
                )
            if draw(st.booleans()):
                items.append(_aside("tool/call", turn, step) or {})
            items.append({"type": "step/end", "data": {"turn": turn, "step": step}})
            # Between steps: a prompt change there has no open step to carry it.
            between = _aside(draw(_ASIDES), turn, step, draw(_PROMPTS))
            if between is not None and draw(st.booleans()):
                items.append(between)
        if draw(st.integers(0, 4)) == 0:
            # A legacy restart: the turn stays open and a next-turn splice precedes the
            # next turn/start, which then gets an interrupted turn/end first.
            inserted = [
                {"role": "user", "id": f"i{turn}", "content": [], "source": {"kind": "user"}}
            ]
            splice = {"target": "next-turn", "start": 0, "inserted": inserted}
            items.append({"type": "agent/inbox/spliced", "data": splice})
        else:
            end = {"turn": turn, "reason": {"kind": "completed"}}
            items.append({"type": "turn/end", "data": end})
    return _numbered(items)


_ROW_DAMAGE = st.sampled_from(
    [
        "none",
        "seq-gap",
        "seq-repeat",
        "packed-member",
        "packed-gap",
        "packed-time",
        "turn-text",
        "step-bool",
        "time-negative",
        "time-unsafe",
        "data-key",
        "ignorable",
        "trigger",
        "header-fallback",
        "header-prefix",
        "header-defer",
        "header-system",
        "header-adapter",
    ]
)


def _damage(rows: list[Row], damage: str, pick: int) -> None:
    """Damage one row of ``rows`` in place (a packed-row damage hits a packed row, a
    value damage a renumbered row; none there: nothing changes)."""
    packed = [row for row in rows if is_packed_row(row)]
    plain = [row for row in rows if row["type"] in FUSED_TYPES]
    headers = [row for row in rows if row["type"] == "request/header"]
    if damage in ("seq-gap", "seq-repeat"):
        row = rows[pick % len(rows)]
        key = "seq0" if is_packed_row(row) else "seq"
        row[key] += 1 if damage == "seq-gap" else -1
    elif damage.startswith("packed-") and packed:
        data = packed[pick % len(packed)]["data"]
        members = data["args" if "args" in data else "texts"]
        middle = len(members) // 2
        if damage == "packed-member":
            members[middle] = 7
        elif damage == "packed-gap" and data["dt"]:
            data["dt"][middle - 1 if middle else 0] = 1.5
        elif damage == "packed-time" and data["dt"]:
            data["dt"][middle - 1 if middle else 0] = -(10**9)
    elif damage.startswith("header-") and headers:
        data = headers[pick % len(headers)]["data"]
        if damage == "header-fallback":
            data["reason"] = "fallback"
        elif damage == "header-prefix":
            data["header"]["messagePrefix"] = []
        elif damage == "header-defer":
            data["header"]["tools"] = [{"name": "read", "deferLoading": True}]
        elif damage == "header-system":
            data["header"]["system"] = 5
        elif damage == "header-adapter":
            data["header"]["adapterDefaults"] = {}
    elif plain and not damage.startswith(("packed-", "header-")) and damage != "none":
        row = plain[pick % len(plain)]
        if damage == "turn-text":
            row["data"]["turn"] = "1"
        elif damage == "step-bool":
            row["data"]["step"] = True
        elif damage == "time-negative":
            row["time"] = -1
        elif damage == "time-unsafe":
            row["time"] = 2**60
        elif damage == "data-key":
            row["data"]["extra"] = 1
        elif damage == "ignorable":
            row["ignorable"] = True
        elif damage == "trigger" and row["type"] == "turn/start":
            row["data"]["trigger"] = "user"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk_run_logs(), _ROW_DAMAGE, st.integers(min_value=0), st.booleans())
def test_adversarial_chunk_runs_read_as_the_reference(
    rows: list[Row], damage: str, pick: int, lenient: bool
) -> None:
    """Interleaved streams, renumbered rows inside pending attempts, a bad member or gap
    in the middle of a packed row, seq gaps and bad values in renumbered rows: the fused
    read path gives the reference's rows and bytes, or its refusal, with and without the
    lenient opt-in (whose note is a row compared like any other)."""
    _damage(rows, damage, pick)
    assert_same(early_header(), rows, lenient=lenient)


@contextlib.contextmanager
def _late_feeds() -> Iterator[list[str]]:
    """The types of the events the 3->4 stage's ``feed`` sees while the block runs (what the
    fused path leaves to it)."""
    late_stage = type(EDGES[3].stage(early_header(version=3), MigrationContext()))
    fed: list[str] = []
    original = late_stage.feed

    def recording(stage: Any, event: Row) -> Any:
        fed.append(event["type"])
        return original(stage, event)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(late_stage, "feed", recording)
        yield fed


def test_fused_path_takes_most_plain_rows_of_generated_logs() -> None:
    """The generated early logs exercise ``take_plain``, not only the ``feed`` fallback:
    of their rows of the fused types, most never reach the 3->4 stage's ``feed``."""
    logs = sample(v0_logs(), 100)
    with _late_feeds() as fed:
        for rows in logs:
            upgraded, refusal = read_path(early_header(), rows)
            assert refusal is None and upgraded
    plain = sum(row["type"] in FUSED_TYPES for rows in logs for row in rows)
    assert sum(event_type in FUSED_TYPES for event_type in fed) < plain / 2


def test_fused_path_takes_the_plain_rows_of_a_plain_log() -> None:
    """Not a vacuous comparison: on a log of claimed attempts the 3->4 stage's ``feed``
    sees only what the fused path leaves to it: the first ``step/start`` (the system head
    follows it), the head, the first ``request/header`` (its prompt replaces the head)
    and that replacement, the message and the ``turn/end``."""
    packed = _run_item("packed-text", 1, 1, 0, 3)
    message = {"role": "assistant", "id": "a1", "content": []}
    rows = _numbered(
        [
            {"type": "turn/start", "data": {"turn": 1}},
            {"type": "step/start", "data": {"turn": 1, "step": 1}},
            {"type": "request/context", "data": {"provider": "p", "model": "m"}},
            _aside("request/header", 1, 1, "be brief") or {},
            packed,
            {
                "type": "assistant/message",
                "data": {"turn": 1, "step": 1, "message": message},
                "surfaceOp": "append",
                "cites": [packed],
            },
            _tool_call(1, 1),
            {"type": "step/end", "data": {"turn": 1, "step": 1}},
            {"type": "step/start", "data": {"turn": 1, "step": 2}},
            _aside("request/header", 1, 2, "be brief") or {},
            {"type": "step/end", "data": {"turn": 1, "step": 2}},
            {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
        ]
    )
    with _late_feeds() as fed:
        upgraded, refusal = read_path(early_header(), rows)
    assert refusal is None and len(upgraded) == 13
    assert fed == [
        "step/start",
        "system/message",
        "system/message",
        "request/header",
        "assistant/message",
        "turn/end",
    ]
    assert_same(early_header(), rows)


def _tool_call(turn: int, step: int) -> Row:
    data = {"turn": turn, "step": step, "callId": "c1", "name": "read", "arguments": {}}
    return {"type": "tool/call", "data": data}


def _write_log(path: Path, head: Row, rows: list[Row], tail: bytes = b"") -> Path:
    lines = [orjson.dumps(head)] + [orjson.dumps(row) for row in rows]
    path.write_bytes(b"\n".join(lines) + b"\n" + tail)
    return path


def _file_log(case: str) -> tuple[list[Row], bytes]:
    items = [
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "step/start", "data": {"turn": 1, "step": 1}},
        _run_item("packed-reasoning", 1, 1, 0, 4),
        _tool_call(1, 1),
        _run_item("packed-tool", 1, 1, 1, 3),
        _run_item("text", 1, 1, 0, 1),
        {"type": "step/end", "data": {"turn": 1, "step": 1}},
        {"type": "step/start", "data": {"turn": 1, "step": 2}},
        # The same prompt as the head's: this request header takes the fused path.
        _aside("request/header", 1, 2, "") or {},
        {"type": "step/end", "data": {"turn": 1, "step": 2}},
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
    rows = _numbered(items)
    tail = b""
    header = rows[8]["data"]
    if case == "bad-member-mid-row":
        rows[4]["data"]["args"][1] = None
    elif case == "bad-gap-mid-row":
        rows[2]["data"]["dt"][1] = "3"
    elif case == "unsafe-time-mid-row":
        rows[2]["data"]["dt"][1] = -(10**15)
    elif case == "seq-gap-after-row":
        rows[3]["seq"] += 1
    elif case == "bad-renumbered-value":
        rows[3]["data"]["turn"] = "1"
    elif case == "defer-loading-tool":
        header["header"]["tools"] = [{"name": "read", "deferLoading": True}]
    elif case == "fallback-header":
        header["reason"] = "fallback"
    elif case == "message-prefix-header":
        header["header"]["messagePrefix"] = [{"role": "user"}]
    elif case == "torn-packed-tail":
        torn = _numbered([*items, _run_item("packed-text", 1, 1, 0, 5)])[-1]
        tail = orjson.dumps(torn)[:-9]
    return rows, tail


@pytest.mark.parametrize(
    "case",
    [
        "plain",
        "bad-member-mid-row",
        "bad-gap-mid-row",
        "unsafe-time-mid-row",
        "seq-gap-after-row",
        "bad-renumbered-value",
        "defer-loading-tool",
        "fallback-header",
        "message-prefix-header",
        "torn-packed-tail",
    ],
)
def test_adversarial_chunk_run_files_migrate_as_the_reference(case: str, tmp_path: Path) -> None:
    """On files: ``migrate_file`` publishes the reference's bytes, or ``migrate_file``,
    ``read_log`` and ``examine`` refuse with the reference's rule, edge, seq, line and
    message (a torn packed row at the tail is cut as any torn tail). A row the scanner
    itself refuses (a packed row with a non-string member or gap, a seq gap) is committed
    corruption: ``migrate_file`` and ``read_log`` report it alike."""
    rows, tail = _file_log(case)
    path = _write_log(tmp_path / "session.jsonl", early_header(), rows, tail)
    if _file_rows(path) is not None:
        assert_file_same(path, tmp_path)
        return
    with pytest.raises(DshStoreError) as migrating:
        migrate_file(path, output=tmp_path / "out.v4.jsonl")
    with pytest.raises(DshStoreError) as reading:
        read_log(path)
    assert _located(migrating.value) == _located(reading.value)
    assert type(migrating.value).__name__ == "CorruptLogError"
