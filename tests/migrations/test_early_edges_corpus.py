"""Every real format-0 log of the shared corpus through the 0->1 and 1->2 edges.

Each file is read with a plain loop (header = first line, events = the rest, a torn last
line skipped) after the placeholder substitution the upstream fixture loader performed.
Nothing may raise anything but MigrationRefusedError; a refusal whose manifest reason is
one of these edges' rules must carry that rule, and a ``restore`` file must pass both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrations import MigrationContext, v0_to_v1, v1_to_v2
from tests.conftest import SHARED, shared_missing_reason, shared_params
from tests.corpus import loaded

CORPUS = SHARED / "corpus"
MANIFEST = CORPUS / "manifest.json"
EARLY_RULES = {
    "removed-event-type",
    "fallback-request-reason",
    "unknown-event-type",
    "envelope-member",
    "malformed-legacy-shape",
    "replaced-message-without-id",
    "missing-payload-member",
    "unexpected-payload-member",
    "subagent-descriptor-version",
    "foreign-delivery-marker",
    "seed-beyond-log",
    "malformed-packed-row",
    "malformed-chunk",
    "claim-without-sources",
    "inexact-chunk-claim",
    "invalid-reference",
    "consumed-chunk-reference",
    "cut-splits-attempt",
    "turn-already-open",
    "malformed-goal-change",
}

pytestmark = pytest.mark.requires("shared")


def _entries() -> list[Any]:
    if shared_missing_reason() is not None:
        return shared_params(list)
    files = json.loads(MANIFEST.read_text())["files"]
    return [entry for entry in files if entry["expected"] != "not-a-session"]


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_bytes().split(b"\n")
    complete = lines[:-1]  # the part after the last newline is torn (or empty)
    rows = [loaded(json.loads(line), 0) for line in complete if line]  # every one is format 0
    header = rows[0]
    header.setdefault("delegationDepth", 0)
    return header, rows[1:]


def _migrate(header: dict[str, Any], events: list[dict[str, Any]], path: str) -> list[Any]:
    context = MigrationContext(path=path, session_id=header["id"])
    first = v0_to_v1.EDGE.stage(header, context)
    second = v1_to_v2.EDGE.stage(v0_to_v1.EDGE.header(header, context), context)
    out: list[Any] = []
    for event in events:
        for row in first.feed(event):
            out += second.feed(row)
    for row in first.finish():
        out += second.feed(row)
    out += second.finish()
    return out


@pytest.mark.parametrize("entry", _entries(), ids=lambda entry: entry["path"])
def test_corpus_file_migrates_or_is_refused_by_rule(entry: dict[str, Any]) -> None:
    header, events = _read(CORPUS / entry["path"])
    try:
        out = _migrate(header, events, entry["path"])
    except MigrationRefusedError as error:
        assert entry["expected"] == "refuse", f"restore file refused: {error}"
        reason_rule = entry.get("reason_class")
        if reason_rule in EARLY_RULES:
            assert error.rule == reason_rule
        return
    assert [row["seq"] for row in out] == list(range(len(out)))
    assert not any(row["type"] == "assistant/chunk" for row in out)


def test_corpus_is_covered() -> None:
    assert len(_entries()) == 145
