"""Invalid session ids: one typed error, raised before anything touches the disk.

An empty id used to surface as a bare ``ValueError`` and a non-``str`` id as an
``AttributeError`` from deep inside the name encoding. Both are now
``InvalidSessionIdError``, which is a ``DshStoreError`` and still a ``ValueError``.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import DshStoreError, InvalidSessionIdError
from dsh_store.jsonl.layout import (
    check_session_id,
    decode_session_id,
    encode_session_id,
    log_path,
    session_dir,
)
from dsh_store.store import JsonlStore

CLOCK_MS = 1_767_225_600_000

NOT_STRINGS: list[object] = [5, None, b"abc", ["a"], 1.5, True]


def _check_error(error: InvalidSessionIdError, bad: object, rule: str) -> None:
    assert isinstance(error, ValueError)
    assert isinstance(error, DshStoreError)
    assert error.rule == rule
    assert error.session_id is bad or error.session_id == bad
    assert repr(bad) in str(error)
    assert f"[rule: {rule}]" in str(error)


def test_an_empty_id_is_refused_by_rule() -> None:
    with pytest.raises(InvalidSessionIdError) as caught:
        encode_session_id("")
    _check_error(caught.value, "", "empty")
    assert "a session id must not be empty" in str(caught.value)


def test_the_old_value_error_still_catches_it() -> None:
    with pytest.raises(ValueError, match="a session id must not be empty"):
        encode_session_id("")


@pytest.mark.parametrize("bad", NOT_STRINGS, ids=repr)
def test_a_non_string_id_is_refused_by_rule(bad: Any) -> None:
    with pytest.raises(InvalidSessionIdError) as caught:
        encode_session_id(bad)
    _check_error(caught.value, bad, "not-a-str")
    assert f"must be a str, not {type(bad).__name__}" in str(caught.value)


def test_a_long_bad_id_is_shown_truncated() -> None:
    bad = b"x" * 10_000
    with pytest.raises(InvalidSessionIdError) as caught:
        check_session_id(bad)
    message = str(caught.value)
    assert len(message) < 300
    assert "b'xxxx" in message
    assert "..." in message
    assert caught.value.session_id is bad  # the attribute keeps the value whole


def test_check_session_id_returns_a_good_id() -> None:
    assert check_session_id("a") == "a"
    assert check_session_id("\x00") == "\x00"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda bad: session_dir("/r", bad, None), id="session_dir"),
        pytest.param(lambda bad: log_path("/r", bad, "/p"), id="log_path"),
    ],
)
@pytest.mark.parametrize("bad", ["", *NOT_STRINGS], ids=repr)
def test_every_name_function_refuses_it(call: Callable[[Any], object], bad: Any) -> None:
    with pytest.raises(InvalidSessionIdError):
        call(bad)


def test_decoding_never_raises_for_a_name() -> None:
    assert decode_session_id("") is None
    assert decode_session_id("a") == "a"


def test_the_error_pickles() -> None:
    error = InvalidSessionIdError("", "a session id must not be empty", rule="empty")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InvalidSessionIdError
    assert str(copy) == str(error)
    assert (copy.session_id, copy.rule, copy.detail) == ("", "empty", error.detail)


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    store = JsonlStore(tmp_path / "root", clock=lambda: CLOCK_MS, window_s=0)
    with store.new("a", cwd="/p") as live:
        live.append("turn/start", {"turn": 1})
        live.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        live.flush()
    return store


_STORE_CALLS: list[Any] = [
    pytest.param(lambda store, bad: store.new(bad), id="new"),
    pytest.param(lambda store, bad: store.new(bad, cwd="/p"), id="new-cwd"),
    pytest.param(lambda store, bad: store.open(bad), id="open"),
    pytest.param(lambda store, bad: store.inspect(bad), id="inspect"),
    pytest.param(lambda store, bad: store.load(bad), id="load"),
    pytest.param(lambda store, bad: store.locate(bad), id="locate"),
    pytest.param(lambda store, bad: store.locate(bad, cwd="/p"), id="locate-cwd"),
    pytest.param(lambda store, bad: store.read_from(bad, 0), id="read_from"),
    pytest.param(lambda store, bad: store.append(bad, store.inspect("a").events[:1]), id="append"),
    pytest.param(lambda store, bad: store.fork(bad), id="fork"),
]


@pytest.mark.parametrize("call", _STORE_CALLS)
@pytest.mark.parametrize("bad", ["", 5, None], ids=repr)
def test_store_entry_points_raise_the_typed_error(
    store: JsonlStore, call: Callable[[JsonlStore, Any], object], bad: Any
) -> None:
    before = sorted(p.relative_to(store.root) for p in store.root.rglob("*"))
    with pytest.raises(InvalidSessionIdError) as caught:
        call(store, bad)
    assert caught.value.session_id == bad
    assert sorted(p.relative_to(store.root) for p in store.root.rglob("*")) == before
