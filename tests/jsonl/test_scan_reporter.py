"""The scanner reports: with ``report=True`` committed corruption ends the rows and is
recorded in ``LogScanner.corruption`` (the same facts the default scanner raises), and a
refusal met mid-stream reads the rest of the same pass instead of scanning again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import CorruptLogError
from dsh_store.jsonl.scan import LogScanner, ScannedRow
from dsh_store.jsonl.watermark import watermark_path
from dsh_store.restore import examine, read_log
from tests.cli.conftest import record_session
from tests.test_restore_findings import _wrong_step_end


def _damaged(tmp_path: Path, kind: str) -> Path:
    log = record_session(tmp_path, "s", turns=2, open_turn=kind == "torn")
    lines = log.read_bytes().splitlines(keepends=True)
    if kind == "unparsable":  # a later turn/end shows the region was committed
        lines[2] = b"this line is not json\n"
    elif kind == "seq-gap":  # a later valid row continues the seqs
        lines[3] = lines[3].replace(b'"seq":2,', b'"seq":7,')
    elif kind == "torn":  # cut inside the last batch, as a crash leaves it
        lines[-1] = lines[-1][:-5]
        Path(watermark_path(log)).unlink()  # no record of the cut bytes having been fsynced
    log.write_bytes(b"".join(lines))
    return log


def _facts(error: CorruptLogError) -> tuple[object, ...]:
    return (type(error), error.rule, error.line, error.offset, error.seq, error.message)


@pytest.mark.parametrize("kind", ["unparsable", "seq-gap"])
def test_the_reporter_records_exactly_what_the_default_scanner_raises(
    tmp_path: Path, kind: str
) -> None:
    log = _damaged(tmp_path, kind)
    with pytest.raises(CorruptLogError) as raised:
        LogScanner(log).exhaust()
    reporter = LogScanner(log, report=True)
    rows = list(reporter.rows())  # no raise: the rows end at the defect
    assert reporter.corruption is not None
    assert _facts(reporter.corruption) == _facts(raised.value)
    assert raised.value.line is not None
    assert len(rows) == raised.value.line - 2  # every row before the defect
    assert reporter.torn is None and not reporter.finished


def test_a_crash_tail_is_no_corruption(tmp_path: Path) -> None:
    log = _damaged(tmp_path, "torn")
    reporter = LogScanner(log, report=True).exhaust()
    assert reporter.corruption is None and reporter.torn is not None and reporter.finished


def test_the_default_scanner_also_keeps_what_it_raised(tmp_path: Path) -> None:
    scanner = LogScanner(_damaged(tmp_path, "unparsable"))
    with pytest.raises(CorruptLogError) as raised:
        scanner.exhaust()
    assert scanner.corruption is raised.value


def test_corruption_after_a_refusal_is_found_without_a_second_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edge refuses line 20 of an older log; line 21 on is read once, in the same pass,
    and its committed corruption wins (DESIGN §6.3)."""
    log = _wrong_step_end(tmp_path)
    lines = log.read_bytes().splitlines(keepends=True)
    lines[-2] = b"this line is not json\n"
    log.write_bytes(b"".join(lines))
    scans: list[str] = []
    real_scan = LogScanner._scan

    def counting_scan(self: LogScanner, *args: Any) -> Iterator[ScannedRow]:
        scans.append(self.path)
        return real_scan(self, *args)

    monkeypatch.setattr(LogScanner, "_scan", counting_scan)
    report = examine(log)
    assert report.classification == "corrupt"
    assert scans == [str(log)]  # one pass of rows: no rescan from the first byte
    scans.clear()
    with pytest.raises(CorruptLogError) as raised:
        read_log(log)
    assert raised.value.rule == "unparsable-line" and raised.value.line == len(lines) - 1
    assert scans == [str(log)]
