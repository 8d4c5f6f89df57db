"""SessionHeader: construction rules, wire form and canonical line."""

from __future__ import annotations

import pickle
from typing import Any

import orjson
import pytest

from dsh_store.errors import EventValidationError
from dsh_store.model import SESSION_FORMAT_VERSION, SessionHeader


def wire(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "session",
        "version": 4,
        "id": "s1",
        "createdAt": 5,
        "isSeeded": False,
        "delegationDepth": 0,
    }
    base.update(extra)
    return base


def test_defaults_and_version() -> None:
    header = SessionHeader(id="s1", created_at=5)
    assert header.version == SESSION_FORMAT_VERSION == 4
    assert (header.is_seeded, header.delegation_depth, header.cwd) == (False, 0, None)


def test_to_json_key_order_and_omitted_optionals() -> None:
    header = SessionHeader(
        id="s1",
        created_at=5,
        is_seeded=True,
        delegation_depth=2,
        cwd="/work",
        parent_session="p",
        origin="subagent",
        agent_preset="standard",
    )
    assert list(header.to_json()) == [
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "isSeeded",
        "origin",
        "delegationDepth",
        "agentPreset",
    ]
    assert list(SessionHeader(id="s1", created_at=5).to_json()) == [
        "type",
        "version",
        "id",
        "createdAt",
        "isSeeded",
        "delegationDepth",
    ]


def test_encode_is_one_canonical_line() -> None:
    header = SessionHeader(id="s1", created_at=5, cwd="/w", agent_preset="standard")
    line = header.encode()
    assert line == (
        b'{"type":"session","version":4,"id":"s1","createdAt":5,"cwd":"/w","isSeeded":false,'
        b'"delegationDepth":0,"agentPreset":"standard"}\n'
    )
    assert SessionHeader.from_json(orjson.loads(line)) == header


def test_round_trip_sample_header() -> None:
    obj = wire(cwd="/dsh-snapshot-cwd", agentPreset="standard", createdAt=1788242710496)
    assert SessionHeader.from_json(obj).to_json() == obj


def test_header_is_frozen() -> None:
    header = SessionHeader(id="s1", created_at=5)
    with pytest.raises(AttributeError):
        header.id = "other"
    with pytest.raises(AttributeError, match="immutable"):
        del header.cwd
    with pytest.raises(AttributeError):
        header.extra = 1
    assert header.id == "s1"


def test_header_value_semantics() -> None:
    header = SessionHeader("s1", 5, True, 2, "/w", "p", "subagent", "standard")
    same = SessionHeader(
        id="s1",
        created_at=5,
        is_seeded=True,
        delegation_depth=2,
        cwd="/w",
        parent_session="p",
        origin="subagent",
        agent_preset="standard",
    )
    assert header == same and hash(header) == hash(same)
    assert header != SessionHeader(id="s1", created_at=6)
    assert header != header.to_json()
    assert pickle.loads(pickle.dumps(header)) == header
    assert repr(header) == (
        "SessionHeader(id='s1', created_at=5, is_seeded=True, delegation_depth=2, cwd='/w', "
        "parent_session='p', origin='subagent', agent_preset='standard')"
    )


@pytest.mark.parametrize(
    ("kwargs", "rule", "text"),
    [
        ({"id": ""}, "header-id", "non-empty string"),
        ({"id": 3}, "header-id", "non-empty string"),
        ({"created_at": -1}, "header-created-at", "createdAt must be"),
        ({"created_at": True}, "header-created-at", "createdAt must be"),
        ({"created_at": 2**53}, "header-created-at", "createdAt must be"),
        ({"created_at": -0.0}, "header-created-at", "createdAt must be"),
        ({"is_seeded": 1}, "header-is-seeded", "isSeeded must be a bool"),
        ({"delegation_depth": -1}, "header-delegation-depth", "delegationDepth must be"),
        ({"delegation_depth": False}, "header-delegation-depth", "delegationDepth must be"),
        ({"cwd": "relative/dir"}, "header-cwd", "absolute path"),
        ({"parent_session": ""}, "header-parent-session", "parentSession"),
        ({"origin": "other"}, "header-origin", '"subagent"'),
        ({"agent_preset": 3}, "header-agent-preset", "agentPreset must be a string"),
        ({"id": "bad\ud800"}, None, "lone surrogate"),
    ],
)
def test_invalid_fields(kwargs: dict[str, Any], rule: str | None, text: str) -> None:
    base: dict[str, Any] = {"id": "s1", "created_at": 5}
    base.update(kwargs)
    with pytest.raises((EventValidationError, ValueError)) as caught:
        SessionHeader(**base)
    if rule is not None:
        assert isinstance(caught.value, EventValidationError)
        assert caught.value.rule == rule
    assert text in str(caught.value)


@pytest.mark.parametrize("cwd", ["/", "/a/b", "C:\\work", "D:/x", "\\\\server\\share"])
def test_absolute_cwd_forms(cwd: str) -> None:
    assert SessionHeader(id="s1", created_at=0, cwd=cwd).cwd == cwd


@pytest.mark.parametrize(
    ("obj", "rule", "text"),
    [
        ([], "header-not-object", "must be a JSON object"),
        (wire(extra=1), "header-unknown-key", "'extra' is not part of format 4"),
        (wire(sandboxMode="x"), "header-retired-key", "retired"),
        (wire(seedLength=3), "header-retired-key", "retired"),
        (
            {k: v for k, v in wire().items() if k != "delegationDepth"},
            "header-missing-key",
            "'delegationDepth' is required",
        ),
        (
            {k: v for k, v in wire().items() if k != "isSeeded"},
            "header-missing-key",
            "'isSeeded' is required",
        ),
        (wire(type="event"), "header-type", 'must be "session"'),
        (wire(version=3), "header-version", "must be 4"),
        (wire(version=4.0), "header-version", "must be 4"),
        (wire(version=True), "header-version", "must be 4"),
        (wire(cwd=None), "header-null", "omit it instead"),
        (wire(createdAt="5"), "header-created-at", "createdAt"),
    ],
)
def test_from_json_refusals(obj: Any, rule: str, text: str) -> None:
    with pytest.raises(EventValidationError) as caught:
        SessionHeader.from_json(obj)
    assert caught.value.rule == rule
    assert text in str(caught.value)
    assert caught.value.event_type == "session"
