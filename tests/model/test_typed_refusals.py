"""Inputs that used to escape the typed errors or the round trip between append and restore."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_store.errors import CorruptLogError, EventValidationError, LosslessJsonError
from dsh_store.model import Session, SessionHeader
from dsh_store.restore import classify, read_log


def _log(tmp_path: Path, *rows: bytes) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(SessionHeader(id="s", created_at=0).encode() + b"".join(rows))
    return path


def test_append_refuses_an_inherited_marker_that_restore_would_refuse() -> None:
    session = Session.create("s", clock=lambda: 1)
    with pytest.raises(EventValidationError) as caught:
        session.append("session/end-seed", {"inherited": True})
    assert (caught.value.rule, caught.value.seq) == ("seeded-marker-mismatch", 0)
    assert session.events == ()
    assert session.append("session/end-seed", {}).seq == 0  # the resume marker is fine


@pytest.mark.parametrize("reason", [[], {}, ["initial"]])
def test_a_request_header_reason_of_the_wrong_type_is_a_typed_refusal(
    tmp_path: Path, reason: object
) -> None:
    data = {"header": {"config": {"provider": "p", "model": "m"}}, "reason": reason}
    with pytest.raises(EventValidationError, match=r"data\.reason must be one of"):
        Session.create("s", clock=lambda: 1).append("request/header", data)
    row = b'{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":'
    row += b'"p","model":"m"}},"reason":[]}}\n'
    end = b'{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'
    with pytest.raises(CorruptLogError):
        read_log(_log(tmp_path, row, end))


@pytest.mark.parametrize("kind", [b"[1]", b"{}", b"null", b"5"])
def test_a_row_type_that_is_not_a_string_is_a_bad_row_not_a_crash(
    tmp_path: Path, kind: bytes
) -> None:
    row = b'{"type":%s,"seq":0,"time":0,"data":{}}\n' % kind
    end = b'{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'
    with pytest.raises(CorruptLogError) as caught:  # a later turn/end commits the defect
        read_log(_log(tmp_path, row, end))
    assert caught.value.rule == "bad-row"
    assert classify(_log(tmp_path, row)) == "torn-tail"


@pytest.mark.parametrize(
    "literal",
    [b"123456789012345678901234567890", b"18446744073709551617", b"-9223372036854775809"],
)
def test_restore_refuses_integer_literals_that_decoding_turns_into_other_floats(
    tmp_path: Path, literal: bytes
) -> None:
    row = b'{"type":"todo/write","seq":0,"time":0,"data":{"n":%s}}\n' % literal
    with pytest.raises(CorruptLogError, match="integer literal beyond 64 bits") as caught:
        read_log(_log(tmp_path, row))
    assert caught.value.rule == "not-lossless-json"
    with pytest.raises(LosslessJsonError):  # append refuses the same value
        Session.create("s", clock=lambda: 1).append("todo/write", {"n": int(literal)})


@pytest.mark.parametrize(
    ("literal", "value"),
    [(b"100000000000000000000", 1e20), (b"18446744073709551616", 2.0**64), (b"1e+20", 1e20)],
)
def test_a_large_number_the_decoded_float_holds_exactly_is_kept(
    tmp_path: Path, literal: bytes, value: float
) -> None:
    # 100000000000000000000 is how JavaScript writes 1e20; a long digit run in a string
    # beside it changes nothing.
    row = b'{"type":"todo/write","seq":0,"time":0,"data":{"x":%s,' % literal
    row += b'"id":"1234567890123456789012"}}\n'
    assert read_log(_log(tmp_path, row)).events[0].data == {
        "x": value,
        "id": "1234567890123456789012",
    }


def test_a_lossless_refusal_on_append_names_the_seq_it_would_have_had() -> None:
    session = Session.create("s", clock=lambda: 1)
    session.append("turn/start", {"turn": 1})
    with pytest.raises(LosslessJsonError) as caught:
        session.append("todo/write", {"x": float("nan")})
    assert (caught.value.seq, caught.value.event_type, caught.value.json_path) == (
        1,
        "todo/write",
        "data.x",
    )
    assert "in event 'todo/write' (seq 1)" in str(caught.value)
    assert len(session.events) == 1


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        ({"inherited_event_count": "1"}, "inherited-count"),
        ({"inherited_event_count": None}, "inherited-count"),
        ({"header": {"type": "session", "id": "s"}}, "session-header"),
    ],
)
def test_session_create_refuses_bad_arguments_with_typed_errors(
    options: dict[str, object], rule: str
) -> None:
    with pytest.raises(EventValidationError) as caught:
        Session.create("s", **options)  # type: ignore[arg-type]
    assert caught.value.rule == rule


@pytest.mark.parametrize("sources", [5, "12", {1: 2}])
def test_session_event_refuses_source_seqs_that_are_not_a_sequence(sources: object) -> None:
    from dsh_store.model import SessionEvent

    with pytest.raises(EventValidationError) as caught:
        SessionEvent("tool/result", 3, 1, {}, source_event_seqs=sources)  # type: ignore[arg-type]
    assert caught.value.rule == "source-seqs-shape"
