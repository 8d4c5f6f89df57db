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

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_store.errors import DshStoreError, MigrationRefusedError
from dsh_store.jsonl.scan import LogScanner
from dsh_store.migrate import migrate_file
from dsh_store.migrations import MigrationContext, chain
from dsh_store.migrations._pipeline import located_chain
from dsh_store.migrations.packed import expand_packed_row, is_packed_row
from dsh_store.model import SessionEvent
from dsh_store.restore import examine, read_log
from dsh_store.upgrading import scanned_rows
from tests.conftest import SHARED, shared_missing_reason, shared_params
from tests.corpus import loaded_copy
from tests.migrations.early_logs import header as early_header
from tests.migrations.early_logs import v0_logs
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


def _context(head: Row, *, owned: bool) -> MigrationContext:
    return MigrationContext(path="equal.jsonl", session_id=head.get("id"), owned_rows=owned)


def reference(head: Row, rows: list[Row], *, expand: bool) -> tuple[list[Row], Any]:
    """The edge-by-edge chain over copies (packed rows expanded when ``expand``)."""
    source = _expanded(rows) if expand else copy.deepcopy(rows)
    try:
        _, stream = chain(copy.deepcopy(head), source, _context(head, owned=False))
    except DshStoreError as error:
        return [], _refusal(error)
    return _run(stream)


def read_path(head: Row, rows: list[Row]) -> tuple[list[Row], Any]:
    """The read path's driver over rows it owns (fresh copies, as a scanner hands them)."""
    fresh = orjson.loads(orjson.dumps(rows))
    try:
        _, stream, _ = located_chain(copy.deepcopy(head), iter(fresh), _context(head, owned=True))
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


def assert_same(head: Row, rows: list[Row]) -> tuple[list[Row], Any]:
    """The read path against the reference: same rows (values and types), same bytes,
    same refusal; a log that migrates also against the packed-rows-expanded reference."""
    expected_rows, expected_refusal = reference(head, rows, expand=False)
    got_rows, got_refusal = read_path(head, rows)
    assert got_refusal == expected_refusal
    assert got_rows == expected_rows
    assert repr(got_rows) == repr(expected_rows)  # also tells list from tuple, 0.0 from -0.0
    assert _canonical(got_rows) == _canonical(expected_rows)
    if expected_refusal is None:
        expanded_rows, expanded_refusal = reference(head, rows, expand=True)
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
    assert_same(early_header(), rows)


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
    assert_same(head, rows)


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
