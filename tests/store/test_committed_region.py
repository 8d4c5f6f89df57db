"""A defect in acknowledged history is refused, never cut as a crash tail (format.md §3.1).

The normal case a turn/end cannot prove anything for: a long open turn (hundreds of tool
calls, no later turn/end). Bytes are flipped one at a time (XOR 0xFF, which makes an ASCII
byte invalid UTF-8, so every flip is a defect of the line holding it), in place, so the log
keeps its inode and its watermark still binds it; then again with the watermark removed, as
DSH leaves a log. Within one line every byte but its newline damages the same line the same
way, so the sweep of that 200-call turn flips every byte of the last step (the lines nothing
valid follows) and, in every other line of the open turn, its first byte, a middle byte and
its newline; a small log of the same shape (a few KB) has every byte of its open turn
flipped, with and without its watermark.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_store.cli import main
from dsh_store.errors import CorruptLogError
from dsh_store.jsonl.scan import LogScanner
from dsh_store.jsonl.watermark import read_watermark, watermark_path
from dsh_store.store import JsonlStore
from tests.model.builders import assistant, tool_call, tool_result, user

from .helpers import CWD, complete_turn, make_store, sidecars, snapshot

TOOL_CALLS = 200


def _long_open_turn(store: JsonlStore, tool_calls: int = TOOL_CALLS, flush_every: int = 20) -> Path:
    """One finished turn, then an open one: one step per tool call, each with its result."""
    with store.new("long", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        live.append("turn/start", {"turn": 2})
        for step in range(1, tool_calls + 1):
            live.append("step/start", {"turn": 2, "step": step})
            if step == 1:
                live.append("user/message", user("go", "m-u2"), surface_op="append")
            call = f"c{step}"
            live.append(
                "assistant/message",
                assistant(2, step, None, (call,), message_id=f"m-a{step}"),
                surface_op="append",
            )
            live.append("tool/call", tool_call(2, step, call))
            live.append("tool/result", tool_result(2, step, call), surface_op="append")
            if step < tool_calls:
                live.append("step/end", {"turn": 2, "step": step})
            if step % flush_every == 0:
                live.flush()  # several acknowledged batches
        path = live.path
    return path


@pytest.fixture(scope="module")
def long_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, int]:
    """(log bytes, offset where the open turn starts); written once through the store."""
    path = _long_open_turn(make_store(tmp_path_factory.mktemp("long")))
    data = path.read_bytes()
    assert data.isascii()  # so XOR 0xFF makes every byte invalid UTF-8
    start = data.index(b'{"type":"turn/start","seq":7,')
    return data, start


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    starts.extend(index + 1 for index in range(len(data)) if data[index] == 0x0A)
    return starts[:-1]


def _line_of(starts: list[int], position: int) -> tuple[int, int]:
    """(1-based line, offset of its start) holding byte ``position``."""
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if starts[middle] <= position:
            low = middle
        else:
            high = middle - 1
    return low + 1, starts[low]


@pytest.fixture
def log_copy(tmp_path: Path, long_log: tuple[bytes, int]) -> Iterator[Path]:
    store = make_store(tmp_path / "store")
    path = _long_open_turn(store)
    assert path.read_bytes() == long_log[0]
    yield path


def _sweep(data: bytes, start: int) -> list[int]:
    """The flipped positions: see the module docstring."""
    starts = [s for s in _line_starts(data) if s >= start]
    last_step = data.rindex(b'{"type":"step/start",')
    chosen = set(range(last_step, len(data)))
    for begin, end in zip(starts, [*starts[1:], len(data)], strict=True):
        chosen.update((begin, (begin + end) // 2, end - 1))
    return sorted(chosen)


def _flip(path: Path, position: int) -> int:
    """XOR one byte with 0xFF in place (same inode); returns the original byte."""
    fd = os.open(path, os.O_RDWR)
    try:
        original = os.pread(fd, 1, position)[0]
        os.pwrite(fd, bytes([original ^ 0xFF]), position)
    finally:
        os.close(fd)
    return original


def _restore(path: Path, position: int, original: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, bytes([original]), position)
    finally:
        os.close(fd)


def test_the_watermark_covers_the_whole_acknowledged_log(log_copy: Path) -> None:
    watermark = read_watermark(log_copy)
    assert watermark is not None
    assert watermark.size == log_copy.stat().st_size
    assert (watermark.dev, watermark.ino) == (log_copy.stat().st_dev, log_copy.stat().st_ino)


def test_every_flipped_byte_of_a_long_open_turn_is_refused(
    log_copy: Path, long_log: tuple[bytes, int]
) -> None:
    data, start = long_log
    starts = _line_starts(data)
    for position in _sweep(data, start):
        original = _flip(log_copy, position)
        try:
            with pytest.raises(CorruptLogError) as caught:
                LogScanner(log_copy).exhaust()
        finally:
            _restore(log_copy, position, original)
        line, offset = _line_of(starts, position)
        assert (caught.value.line, caught.value.offset) == (line, offset), position
        assert "which its writer saw fsynced" in str(caught.value), position
    assert log_copy.read_bytes() == data


def test_without_a_watermark_every_flip_followed_by_a_valid_line_is_refused(
    log_copy: Path, long_log: tuple[bytes, int]
) -> None:
    data, start = long_log
    os.unlink(watermark_path(log_copy))  # as DSH writes a log
    starts = _line_starts(data)
    last_line = starts[-1]
    for position in _sweep(data, start):
        original = _flip(log_copy, position)
        try:
            if position >= last_line - 1:
                # The last line, or the newline that joins it to the one before: nothing
                # valid follows, so without a watermark it is a crash tail as it always was.
                scanner = LogScanner(log_copy).exhaust()
                assert scanner.torn is not None, position
                continue
            with pytest.raises(CorruptLogError) as caught:
                LogScanner(log_copy).exhaust()
        finally:
            _restore(log_copy, position, original)
        line, offset = _line_of(starts, position)
        assert (caught.value.line, caught.value.offset) == (line, offset), position
        assert "this region was committed" in str(caught.value), position


@pytest.mark.parametrize("watermark", [True, False], ids=["watermark", "no-watermark"])
def test_every_byte_of_a_small_open_turn_flipped_is_refused(
    tmp_path: Path, watermark: bool
) -> None:
    # Exhaustive where the sweep above samples within lines: every byte of the open turn,
    # newlines included, of a log small enough to scan once per byte in-process.
    path = _long_open_turn(make_store(tmp_path / "store"), tool_calls=6, flush_every=2)
    data = path.read_bytes()
    assert data.isascii() and 2_000 < len(data) < 8_000
    if not watermark:
        os.unlink(watermark_path(path))
    start = data.index(b'{"type":"turn/start","seq":7,')
    starts = _line_starts(data)
    tail_from = len(data) if watermark else starts[-1] - 1
    refused = 0
    for position in range(start, len(data)):
        original = _flip(path, position)
        flipped = path.read_bytes()
        try:
            if position >= tail_from:
                # Without a watermark, the last line (or the newline joining it to the one
                # before) is followed by nothing valid: a crash tail, as it always was.
                assert LogScanner(path).exhaust().torn is not None, position
                continue
            with pytest.raises(CorruptLogError) as caught:
                LogScanner(path).exhaust()
            assert path.read_bytes() == flipped, position  # the file is left untouched
        finally:
            _restore(path, position, original)
        line, offset = _line_of(starts, position)
        assert (caught.value.line, caught.value.offset) == (line, offset), position
        refused += 1
    assert refused == tail_from - start
    assert path.read_bytes() == data


def _sample(start: int, end: int, starts: list[int]) -> list[int]:
    """Positions for the slow, whole-stack checks: a stride, each line end, the last line."""
    chosen = set(range(start, end, 4099))
    chosen.update(s - 1 for s in starts[::97] if start < s <= end)  # some newlines
    chosen.update(range(starts[-1], end, 17))  # the last line, which nothing follows
    return sorted(chosen)


@pytest.mark.parametrize("watermark", [True, False], ids=["watermark", "no-watermark"])
def test_open_and_verify_refuse_and_leave_the_file_untouched(
    log_copy: Path, long_log: tuple[bytes, int], watermark: bool
) -> None:
    data, start = long_log
    if not watermark:
        os.unlink(watermark_path(log_copy))
    store = JsonlStore(log_copy.parents[2])
    starts = _line_starts(data)
    runner = CliRunner()
    checked = 0
    for position in _sample(start, len(data), starts):
        if not watermark and position >= starts[-1] - 1:
            continue  # a tail without a watermark (previous test)
        original = _flip(log_copy, position)
        try:
            before = snapshot(log_copy)
            with pytest.raises(CorruptLogError) as caught:
                store.open("long")
            assert (caught.value.line, caught.value.offset) == _line_of(starts, position)
            result = runner.invoke(main, ["verify", "--allow-repairable", str(log_copy)])
            assert result.exit_code == 1, (position, result.output)
            assert ": corrupt (format 4" in result.output
            assert snapshot(log_copy) == before
            assert sidecars(log_copy) == []
        finally:
            _restore(log_copy, position, original)
        checked += 1
    assert checked > 40
    assert log_copy.read_bytes() == data
