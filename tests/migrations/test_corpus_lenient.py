"""The refused real format-0 logs of the shared corpus under the lenient opt-in.

The manifest's 18 ``refuse`` logs all hold a ``user/message`` before the first
``step/start``. Under ``lenient=True``:

- the 15 whose message lies inside a turn migrate with the system head placed before it,
  and the v4 log derives the conversation DSH's format-0 reader builds from the source
  (defined below);
- ``minimal-preset`` and ``web-search-round`` (pre-turn builds: no ``turn/start``,
  ``step/start`` or ``step/end`` at all) migrate too, with the turn and step framing
  synthesized and each synthesized event in the note, and derive the same conversation;
- ``cordis-tool-round`` stays refused as committed corruption (a seq gap followed by a
  ``turn/end``), as upstream's recoverable read refuses it, and ``verify`` does not count
  it among the files the opt-in would migrate.

The default verdicts are ``test_corpus_conformance.py``'s and do not change.

**The conversation compared.** DSH's format-0 reader derives the model-visible messages by
folding the surface events (``user/message``, ``assistant/message``, ``tool/result``) in
log order (``append`` adds, a replace swaps the covered nodes for the event), with its own
in-memory upgrade of id-less user messages (``legacy-message:<session>:<seq>``); the
system prompt of the next request is the latest ``request/header``'s ``system`` (none
without one). Each message is compared as (role, id, blocks), a block as its type and its
text, tool-call id/name/arguments or tool-result call id: the v4 projection of a format-0
tool result (a user-role wrapper) is its tool-role message, so both sides are put in
that form. The v4 side is ``Session.derive_messages()`` of the published log read back
by the default reader, whose first message must be the system prompt when there is one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_store.errors import CorruptLogError
from dsh_store.migrate import migrate_file
from dsh_store.model import Session
from dsh_store.restore import read_log
from dsh_store.verify import verify_path
from tests.conftest import shared_missing_reason
from tests.corpus import loaded_copy

from .test_corpus_conformance import CORPUS, MANIFEST

pytestmark = pytest.mark.requires("shared")

NO_TURN = {"minimal-preset", "web-search-round"}
CORRUPT = {"cordis-tool-round"}


def _refused_entries() -> list[Any]:
    if not MANIFEST.exists():
        return [pytest.param(None, id="no-corpus")]
    return [
        pytest.param(entry, id=entry["path"].split("/")[-2])
        for entry in json.loads(MANIFEST.read_text())["files"]
        if entry["expected"] == "refuse"
    ]


def _blocks(content: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for block in content:
        kind = block.get("type")
        if kind in ("text", "reasoning"):
            out.append((kind, block.get("text")))
        elif kind == "tool-call":
            out.append((kind, block.get("id"), block.get("name"), block.get("arguments")))
        else:
            out.append((kind, json.dumps(block, sort_keys=True)))
    return out


def _v0_message(message: dict[str, Any]) -> tuple[Any, ...]:
    content = message["content"]
    if (
        message.get("role") == "user"
        and len(content) == 1
        and content[0].get("type") == "tool-result"
    ):
        wrapper = content[0]
        return (
            "tool",
            message["id"],
            wrapper["toolCallId"],
            _blocks(wrapper["content"]),
            bool(wrapper.get("isError")),
        )
    return (message["role"], message["id"], _blocks(content))


def _v4_message(message: dict[str, Any]) -> tuple[Any, ...]:
    if message["role"] == "tool":
        return (
            "tool",
            message["id"],
            message["toolCallId"],
            _blocks(message["content"]),
            bool(message.get("isError")),
        )
    return (message["role"], message["id"], _blocks(message["content"]))


def _legacy_upgraded(kind: str, data: dict[str, Any], session_id: str, seq: int) -> dict[str, Any]:
    """The message of a surface event after the reader's in-memory upgrade of old shapes
    (pre-identity messages, steering messages)."""
    legacy_id = f"legacy-message:{session_id}:{seq}"
    if kind == "steering/message":
        data = data.get("message", {**data, "role": "user"})
        data = {key: value for key, value in data.items() if key != "turn"}
    if kind in ("user/message", "steering/message"):
        return {"id": legacy_id, "role": "user", **data}
    if "message" in data:
        return dict(data["message"])
    if kind == "assistant/message":  # {content, provenance}
        return {"id": legacy_id, "role": "assistant", "content": data["content"]}
    block = {  # a tool/result {callId, content, isError}
        "type": "tool-result",
        "toolCallId": data["callId"],
        "content": data["content"],
        "isError": data["isError"],
    }
    return {"id": legacy_id, "role": "user", "content": [block]}


def upstream_conversation(source: Path) -> tuple[str, list[tuple[Any, ...]]]:
    """(system prompt, messages) as DSH's format-0 reader derives them from ``source``."""
    lines = source.read_bytes().splitlines()
    session_id = orjson.loads(lines[0])["id"]
    surface: list[tuple[int, tuple[Any, ...]]] = []
    prompt = ""
    for line in lines[1:]:
        row = orjson.loads(line)
        kind = row.get("type")
        if kind == "request/header":
            prompt = row["data"]["header"].get("system", "")
            continue
        if kind not in ("user/message", "steering/message", "assistant/message", "tool/result"):
            continue
        seq = row["seq"]
        node = (seq, _v0_message(_legacy_upgraded(kind, row["data"], session_id, seq)))
        op = row.get("surfaceOp", "append")
        if op == "append":
            surface.append(node)
        else:
            covered = [i for i, (s, _) in enumerate(surface) if op["start"] <= s <= op["end"]]
            surface[covered[0] : covered[-1] + 1] = [node]
    return prompt, [message for _, message in surface]


@pytest.mark.parametrize("entry", _refused_entries())
def test_refused_corpus_log_under_the_lenient_opt_in(
    entry: dict[str, Any] | None, tmp_path: Path
) -> None:
    missing = shared_missing_reason()
    if entry is None or missing is not None:
        pytest.skip(missing or "the shared corpus manifest is absent")
    name = entry["path"].split("/")[-2]
    copy = loaded_copy(CORPUS / entry["path"], tmp_path / "session")
    output = tmp_path / "out.v4.jsonl"
    (report,) = verify_path(copy)
    assert report.lenient_would_migrate is (None if name in CORRUPT else True)
    if name in CORRUPT:
        assert report.classification == "corrupt"
        with pytest.raises(CorruptLogError):
            migrate_file(copy, output=output, lenient=True)
        return
    assert migrate_file(copy, output=output, lenient=True).status == "migrated"
    published = read_log(output)  # the default reader accepts it: plain v4
    note = published.events[-1]
    assert (note.type, note.ignorable) == ("migration/note", True)
    changes = note.data["changes"]
    head = next(c for c in changes if c["change"] == "system-head-before-first-step")
    assert head["sourceType"] == "user/message"
    framing = [c["change"] for c in changes if c is not head]
    if name in NO_TURN:
        assert framing[0] == "synthesized-turn-start" and "synthesized-step-start" in framing
        starts = [e for e in published.events if e.type in ("turn/start", "step/start")]
        assert len(starts) == framing.count("synthesized-turn-start") + framing.count(
            "synthesized-step-start"
        )
    else:
        assert framing == []
    derived = Session.from_restore(published.header, list(published.events)).derive_messages()
    prompt, messages = upstream_conversation(copy)
    if prompt:
        assert derived[0]["role"] == "system"
        assert derived[0]["content"] == [{"type": "text", "text": prompt}]
        derived = derived[1:]
    assert [_v4_message(message) for message in derived] == messages
    assert messages  # the comparison is not vacuous


def test_the_manifest_refusals_are_the_eighteen_expected() -> None:
    missing = shared_missing_reason()
    if missing is not None or not MANIFEST.exists():
        pytest.skip(missing or "the shared corpus manifest is absent")
    refused = [e for e in json.loads(MANIFEST.read_text())["files"] if e["expected"] == "refuse"]
    names = {entry["path"].split("/")[-2] for entry in refused}
    assert len(refused) == 18
    assert names >= NO_TURN | CORRUPT
