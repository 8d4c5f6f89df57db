"""The writer never publishes a header its own reader refuses as too long."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_store.errors import EventValidationError
from dsh_store.jsonl.scan import MAX_HEADER_BYTES
from dsh_store.model.header import MAX_HEADER_LINE_BYTES

from .helpers import make_store


def test_the_reader_and_the_writer_share_the_limit() -> None:
    assert MAX_HEADER_BYTES == MAX_HEADER_LINE_BYTES == 1 << 20


def _header_of(size: int) -> str:
    """A cwd that makes the header line exactly ``size`` bytes (newline included)."""
    store_header = b'{"type":"session","version":4,"id":"big","createdAt":1,"cwd":"/'
    rest = b'","isSeeded":false,"delegationDepth":0}\n'
    return "/" + "a" * (size - len(store_header) - len(rest))


def test_new_refuses_a_header_its_reader_would_refuse_before_writing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = make_store(root, clock=lambda: 1)
    with pytest.raises(EventValidationError) as caught:
        store.new("big", cwd=_header_of(MAX_HEADER_BYTES + 1))
    assert caught.value.rule == "header-too-long"
    assert f"the header line would be {MAX_HEADER_BYTES + 1} bytes" in str(caught.value)
    assert not root.exists()  # nothing was written


def test_a_header_of_exactly_the_limit_is_written_and_read(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", clock=lambda: 1)
    with store.new("big", cwd=_header_of(MAX_HEADER_BYTES)) as live:
        live.append("turn/start", {"turn": 1})
        path = live.path
    assert len(path.read_bytes().split(b"\n")[0]) + 1 == MAX_HEADER_BYTES
    assert store.inspect("big").classification == "open-turn"
