"""``Session.tool_history()``: request-header tools plus ``developer/message`` additions.

One test per rule of :mod:`dsh_store.model.tools` (the v4 spec's ``toolHistory()``),
plus the incremental contract: a fold over any prefix equals the live answer there.
"""

from __future__ import annotations

from typing import Any

import pytest

from dsh_store.errors import EventValidationError
from dsh_store.model import Session
from dsh_store.model.tools import fold_tool_history

from .builders import new_session, open_step, request_header, restore


def tool(name: str, description: str = "") -> dict[str, Any]:
    return {"name": name, "description": description or f"the {name} tool", "parameters": {}}


def header_with(session: Session, *tools: dict[str, Any], **extra: Any) -> int:
    reason = extra.pop("reason", "initial" if session.request_header() is None else "change")
    body = request_header(reason, **({"tools": list(tools)} if tools else {}))
    body.update(extra)
    return session.append("request/header", body).seq


def developer(
    session: Session,
    added: tuple[str, ...] = (),
    removed: tuple[str, ...] = (),
    header_seq: int | None = None,
    message_id: str | None = None,
) -> int:
    content = [{"type": "tool-addition", "toolName": name} for name in added] + [
        {"type": "tool-removal", "toolName": name} for name in removed
    ]
    if not content:
        content = [{"type": "text", "text": "a note"}]
    data: dict[str, Any] = {
        "turn": 1,
        "step": 1,
        "message": {
            "role": "developer",
            "id": message_id or f"m-dev-{session.seq}",
            "content": content,
            "source": {"kind": "tool-registry"},
        },
    }
    if header_seq is not None:
        data["headerSeq"] = header_seq
    return session.append("developer/message", data, surface_op="append").seq


@pytest.fixture
def live() -> Session:
    session = new_session()
    open_step(session)
    return session


def test_rule_1_no_header_no_tools(live: Session) -> None:
    assert live.tool_history() == {"tools": [], "updates": []}


def test_rule_2_the_first_header_starts_the_series(live: Session) -> None:
    header_with(live, tool("read"), tool("grep"))
    assert live.tool_history() == {"tools": [tool("read"), tool("grep")], "updates": []}
    bare = new_session()
    open_step(bare)
    header_with(bare)  # a tool-less request: no tools key at all
    assert bare.tool_history() == {"tools": [], "updates": []}


def test_rule_4_a_developer_message_adds_the_definitions_its_header_declares(
    live: Session,
) -> None:
    header_with(live, tool("read"))
    grown = header_with(live, tool("read"), tool("fetch"))  # a change, not a new series
    developer(live, added=("fetch",), header_seq=grown, message_id="m-add")
    assert live.tool_history() == {
        "tools": [tool("read")],
        "updates": [{"messageId": "m-add", "additions": [tool("fetch")]}],
    }


def test_rule_4_a_message_without_additions_is_an_empty_update(live: Session) -> None:
    first = header_with(live, tool("read"), tool("fetch"))
    header_with(live, tool("read"), tool("fetch"))
    header_with(live, tool("read"))
    developer(live, removed=("fetch",), message_id="m-rm")
    developer(live, message_id="m-note")
    history = live.tool_history()
    assert history["tools"] == [tool("read"), tool("fetch")]
    assert history["updates"] == [
        {"messageId": "m-rm", "additions": []},
        {"messageId": "m-note", "additions": []},
    ]
    assert first == 2


@pytest.mark.parametrize(
    "restart",
    [{"reason": "series"}, {"startsSeries": True}, {"redefine": True}],
    ids=["reason-series", "starts-series", "redeclared"],
)
def test_rule_3_a_new_series_starts_from_its_own_header(
    live: Session, restart: dict[str, Any]
) -> None:
    header_with(live, tool("read"))
    grown = header_with(live, tool("read"), tool("fetch"))
    developer(live, added=("fetch",), header_seq=grown)
    if restart.pop("redefine", False):
        header_with(live, tool("read", "read, now with globs"), tool("fetch"))
        expected = [tool("read", "read, now with globs"), tool("fetch")]
    else:
        header_with(live, tool("read"), tool("fetch"), **restart)
        expected = [tool("read"), tool("fetch")]
    assert live.tool_history() == {"tools": expected, "updates": []}


def test_rule_3_an_unchanged_redeclaration_keeps_the_series(live: Session) -> None:
    header_with(live, tool("read"))
    grown = header_with(live, tool("read"), tool("fetch"))
    developer(live, added=("fetch",), header_seq=grown, message_id="m-add")
    header_with(live, tool("read"), tool("fetch"), reason="resume")
    assert live.tool_history()["updates"] == [{"messageId": "m-add", "additions": [tool("fetch")]}]


def test_rule_5_additions_its_series_header_declares_add_no_update(live: Session) -> None:
    baseline = header_with(live, tool("read"), tool("fetch"))
    developer(live, added=("fetch",), header_seq=baseline)
    assert live.tool_history() == {"tools": [tool("read"), tool("fetch")], "updates": []}


def test_rule_6_a_removed_tool_keeps_its_definition_in_the_history(live: Session) -> None:
    header_with(live, tool("read"))
    grown = header_with(live, tool("read"), tool("fetch"))
    developer(live, added=("fetch",), header_seq=grown, message_id="m-add")
    header_with(live, tool("read"))
    developer(live, removed=("fetch",), message_id="m-rm")
    assert live.tool_history() == {
        "tools": [tool("read")],
        "updates": [
            {"messageId": "m-add", "additions": [tool("fetch")]},
            {"messageId": "m-rm", "additions": []},
        ],
    }


def test_rule_7_unlogged_changes_fall_back_to_the_active_header(live: Session) -> None:
    header_with(live, tool("read"))
    grown = header_with(live, tool("read"), tool("fetch"))  # no developer message yet
    assert live.tool_history() == {"tools": [tool("read"), tool("fetch")], "updates": []}
    developer(live, added=("fetch",), header_seq=grown, message_id="m-add")
    assert live.tool_history()["updates"] == [{"messageId": "m-add", "additions": [tool("fetch")]}]


def test_rule_8_an_undeclared_addition_is_refused_when_folded(live: Session) -> None:
    header_with(live, tool("read"))
    named = header_with(live, tool("read"), tool("fetch"))
    seq = developer(live, added=("write",), header_seq=named)
    for attempt in range(2):  # a refusal changes nothing: it is raised again
        with pytest.raises(EventValidationError) as caught:
            live.tool_history()
        assert caught.value.rule == "tool-addition-undefined", attempt
        assert (caught.value.seq, caught.value.event_type) == (seq, "developer/message")
    with pytest.raises(EventValidationError):
        fold_tool_history(live.events)


def test_snapshots_are_fresh_and_never_change_later(live: Session) -> None:
    header_with(live, tool("read"))
    first = live.tool_history()
    first["tools"].append("mutated")
    assert live.tool_history() == {"tools": [tool("read")], "updates": []}
    kept = live.tool_history()
    grown = header_with(live, tool("read"), tool("fetch"))
    developer(live, added=("fetch",), header_seq=grown)
    assert kept == {"tools": [tool("read")], "updates": []}


def test_the_live_fold_is_incremental_and_equals_a_fold_of_every_prefix(live: Session) -> None:
    steps: list[dict[str, Any]] = []
    header_with(live, tool("read"))
    steps.append(live.tool_history())
    grown = header_with(live, tool("read"), tool("fetch"))
    steps.append(live.tool_history())
    developer(live, added=("fetch",), header_seq=grown)
    steps.append(live.tool_history())
    header_with(live, tool("read"), reason="series")
    developer(live, removed=("fetch",))
    steps.append(live.tool_history())
    cuts = [3, 4, 5, 7]  # the log length at each snapshot
    for cut, snapshot in zip(cuts, steps, strict=True):
        assert fold_tool_history(live.events[:cut]) == snapshot
    assert restore(list(live.events)).tool_history() == live.tool_history()
