"""The one-generator driver gives exactly what the stacked ``chain`` generators give.

``fused_chain`` (with the combined 0->1 + 1->2 stage and its short path for ordinary chunk
rows) must emit the same rows in the same order and raise the same refusal at the same
point as ``chain``, for valid logs and for logs with a damaged row.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrations import MigrationContext, chain
from dsh_store.migrations._pipeline import fused_chain
from dsh_store.migrations._plain_chunks import plain_chunk
from tests.migrations.early_logs import header, refused_v0_logs, v0_logs
from tests.migrations.test_properties import HEADER, conversations

Row = dict[str, Any]
_PATH = "pipeline.jsonl"


def _outcome(driver: Any, head: Row, rows: list[Row]) -> tuple[list[Row], str | None]:
    """Rows emitted before the end or the refusal, and the refusal's text and rule."""
    emitted: list[Row] = []
    context = MigrationContext(path=_PATH, session_id=head.get("id"))
    try:
        _, stream = driver(copy.deepcopy(head), copy.deepcopy(rows), context)
        for row in stream:
            emitted.append(row)
    except MigrationRefusedError as error:
        return emitted, f"{error} [{error.rule}]"
    return emitted, None


def _same(head: Row, rows: list[Row]) -> tuple[list[Row], str | None]:
    expected = _outcome(chain, head, rows)
    assert _outcome(fused_chain, head, rows) == expected
    return expected


# Damage applied to one chunk row: each must leave the short path and meet the full rules.
_DAMAGE = [
    ("seq", True),
    ("seq", -1),
    ("time", 2**53),
    ("time", 1.5),
    ("ignorable", True),
    ("ignorable", False),
    ("surfaceOp", "append"),
    ("data.turn", "1"),
    ("data.step", None),
    ("data.chunk", []),
    ("data.chunk.type", 3),
    ("data.extra", 1),
    ("type", "assistant/chunks"),
]


def _damaged(row: Row, where: str, value: object) -> Row:
    row = copy.deepcopy(row)
    *parents, key = where.split(".")
    holder = row
    for name in parents:
        holder = holder[name]
    holder[key] = value
    return row


@settings(max_examples=40, deadline=None)
@given(conversations())
def test_complete_conversations_migrate_alike(conversation: Any) -> None:
    emitted, refusal = _same(HEADER, conversation.rows)
    assert refusal is None
    assert emitted


@settings(max_examples=40, deadline=None)
@given(v0_logs())
def test_early_edge_logs_migrate_alike(rows: list[Row]) -> None:
    emitted, refusal = _same(header(), rows)
    assert refusal is None
    assert emitted


def _refusal(driver: Any, head: Row, rows: list[Row]) -> tuple[Any, ...]:
    context = MigrationContext(path=_PATH, session_id=head.get("id"))
    with pytest.raises(MigrationRefusedError) as caught:
        list(driver(copy.deepcopy(head), copy.deepcopy(rows), context)[1])
    error = caught.value
    return error.edge, error.rule, error.seq, error.event_type


@settings(max_examples=40, deadline=None)
@given(refused_v0_logs())
def test_damaged_early_edge_logs_are_refused_alike(damaged: tuple[list[Row], str, str]) -> None:
    rows, edge, rule = damaged
    _, refusal = _same(header(), rows)
    assert refusal is not None
    expected = _refusal(chain, header(), rows)
    assert _refusal(fused_chain, header(), rows) == expected
    assert expected[:2] == (edge, rule)
    assert expected[2] is not None


@settings(max_examples=60, deadline=None)
@given(conversations(), st.sampled_from(_DAMAGE), st.integers(min_value=0))
def test_a_damaged_chunk_row_is_handled_alike(
    conversation: Any, damage: tuple[str, object], pick: int
) -> None:
    rows = conversation.rows
    chunks = [index for index, row in enumerate(rows) if row["type"] == "assistant/chunk"]
    if not chunks:
        return
    index = chunks[pick % len(chunks)]
    rows = [*rows[:index], _damaged(rows[index], *damage), *rows[index + 1 :]]
    _, refusal = _same(HEADER, rows)
    # An ignorable chunk is still a valid chunk; every other damage is refused.
    assert (refusal is None) == (damage == ("ignorable", True))


def test_a_malformed_chunk_names_its_rule_on_either_path() -> None:
    rows: list[Row] = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 2, "data": {"turn": 1, "step": 1}},
        {
            "type": "assistant/chunk",
            "seq": 2,
            "time": 3,
            "data": {"turn": "1", "step": 1, "chunk": {"type": "x"}},
        },
    ]
    _, refusal = _same(header(), rows)
    assert refusal is not None
    assert "assistant/chunk data must be {turn, step, chunk}" in refusal
    assert refusal.endswith("[malformed-chunk]")


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            {
                "type": "assistant/chunk",
                "seq": 4,
                "time": 9,
                "data": {"turn": 1, "step": 2, "chunk": {"type": "t"}},
            },
            (4, 9, 1, 2, {"type": "t"}),
        ),
        ({"type": "assistant/chunk", "seq": 5, "time": 9, "data": {}}, None),
        ({"type": "assistant/chunk", "seq": 4, "time": 9, "data": {}, "ignorable": True}, None),
        ({"type": "user/message", "seq": 4, "time": 9, "data": {}}, None),
        ({"type": ["assistant/chunk"], "seq": 4, "time": 9, "data": {}}, None),
    ],
)
def test_plain_chunk_recognizes_only_the_ordinary_row(row: Row, expected: object) -> None:
    assert plain_chunk(row, 4) == expected
