"""Hostile tails: zero-filled runs are never buffered, huge lines are held about twice.

Memory is measured as the peak RSS (``VmHWM``) of a fresh subprocess, with a bound
generous enough for any machine: the point is that a 4 GiB tail does not cost 4 GiB.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsh_store.errors import CorruptLogError
from dsh_store.jsonl.scan import CRASH_SPAN_BYTES, LogScanner
from tests.conftest import REPO
from tests.store.helpers import make_store, open_tool_turn

from .scan_logs import event, line, sparse_tail, store_log, v4_log

GIB = 1 << 30
MEMORY_BOUND_MIB = 200

_MEASURE = """
import os, sys
what, path = sys.argv[1], sys.argv[2]
if what in ("verify", "cat"):
    from dsh_store.cli import run
    sys.argv = ["dsh-store", what, path]
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    try:
        run()
    except SystemExit:
        pass
else:
    from dsh_store.restore import read_log
    view = read_log(path)
    print(view.torn.length if view.torn else 0, file=sys.stderr)
# VmHWM is this program's own peak: ru_maxrss would also count the RSS the forked copy of
# the test process had before exec, which grows as the suite runs.
with open("/proc/self/status") as status:
    peak_kib = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
print(peak_kib // 1024, file=sys.stderr)
"""


def _peak_mib(what: str, path: Path) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, what, str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    return int(lines[-1]), "\n".join(lines[:-1])


@pytest.mark.slow
@pytest.mark.parametrize("what", ["verify", "cat", "restore"])
def test_a_4_gib_zero_tail_is_scanned_in_bounded_memory(tmp_path: Path, what: str) -> None:
    # A power cut after the file grew but before its blocks were written: a zero tail past
    # the watermark, which is a crash tail, read without ever holding it.
    path = store_log(tmp_path)
    size = sparse_tail(path, 4 * GIB)
    peak, said = _peak_mib(what, path)
    assert peak < MEMORY_BOUND_MIB, (what, peak)
    if what == "restore":
        assert said == str(4 * GIB)
    scanner = LogScanner(path).exhaust()
    assert scanner.torn is not None
    assert (scanner.torn.offset, scanner.torn.length) == (size, 4 * GIB)
    assert "NUL bytes" in scanner.torn.reason


@pytest.mark.parametrize("chunk_size", [7, 1 << 20])
def test_a_zero_run_spanning_chunks_is_a_tail_without_being_kept(
    tmp_path: Path, chunk_size: int
) -> None:
    good = v4_log()
    path = tmp_path / "s.jsonl"
    path.write_bytes(good + b"\x00" * 100_000 + b"\n" + b"\x00" * 50_000)
    scanner = LogScanner(path, chunk_size=chunk_size).exhaust()
    assert scanner.torn is not None
    assert (scanner.torn.offset, scanner.torn.length) == (len(good), 150_001)
    assert scanner.torn.rule == "unparsable-line"


def _valid_after_zeros(zeros: int) -> bytes:
    return (
        v4_log()
        + b"\x00" * zeros
        + b"\n"
        + line(event(14, "tool/call", {"turn": 2, "step": 1, "callId": "x"}))
    )


def test_valid_lines_just_past_a_zero_run_are_one_torn_write(tmp_path: Path) -> None:
    # A power cut can leave a hole inside the write in flight and its later blocks: the
    # valid line after the hole is part of that one unacknowledged write.
    path = tmp_path / "s.jsonl"
    path.write_bytes(_valid_after_zeros(4096))
    scanner = LogScanner(path).exhaust()
    assert scanner.torn is not None and scanner.torn.offset == len(v4_log())


@pytest.mark.parametrize("chunk_size", [1 << 16, 1 << 20])
def test_valid_lines_far_past_a_zero_run_are_committed_history(
    tmp_path: Path, chunk_size: int
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_valid_after_zeros(CRASH_SPAN_BYTES + 10))
    with pytest.raises(CorruptLogError) as caught:
        LogScanner(path, chunk_size=chunk_size).exhaust()
    assert caught.value.offset == len(v4_log())
    assert "farther than one interrupted write reaches" in str(caught.value)


def test_a_line_longer_than_a_chunk_is_read_whole(tmp_path: Path) -> None:
    big = event(13, "user/message", {"text": "é" * 50_000})
    data = v4_log() + line(big) + line(event(14, "turn/end", {}))
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    rows = list(LogScanner(path, chunk_size=4096).rows())
    assert rows[-2].value == big
    assert rows[-1].offset == len(v4_log()) + len(line(big))


def test_a_long_torn_last_line_is_measured_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    torn = b'{"type":"user/message","seq":13,"data":"' + b"x" * 300_000
    path.write_bytes(v4_log() + torn)
    scanner = LogScanner(path, chunk_size=4096).exhaust()
    assert scanner.torn is not None and scanner.torn.rule == "torn-line"
    assert scanner.torn.reason == f"the last line has no newline ({len(torn)} byte(s) cut off)"


@pytest.mark.slow
def test_a_huge_valid_line_costs_about_twice_its_size(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store")
    with store.new("s", cwd="/w") as live:
        open_tool_turn(live, 1, (), logged=0)
        live.append(
            "tool/call",
            {"turn": 1, "step": 1, "callId": "c", "name": "x"} | {"arguments": "PLACEHOLDER"},
        )
        log = live.path
    template = log.read_bytes()
    head, rest = template.split(b"PLACEHOLDER")
    size = 128 << 20
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as out:
        out.write(head)
        block = b"a" * (1 << 20)
        for _ in range(size >> 20):
            out.write(block)
        out.write(rest)
    from dsh_store.restore import examine

    assert examine(path).classification == "open-turn"  # valid: read to its end
    for what in ("verify", "restore"):
        peak, _ = _peak_mib(what, path)
        # The line once and its decoded string once: 2.1x measured (272 MiB for this
        # 128 MiB line; 4.1x before the decoder's copy, the lossless re-encoding and the
        # event's copy of the line were removed). The bound leaves room for the
        # interpreter and allocator noise.
        assert peak < 2.25 * (size >> 20) + 40, (what, peak)
