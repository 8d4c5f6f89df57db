"""LogScanner: committed prefix, crash tails, committed corruption, framing oddities."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_store.errors import (
    CorruptLogError,
    DshStoreError,
    LoneSurrogateError,
    NotASessionError,
    UnsupportedVersionError,
)
from dsh_store.jsonl.scan import LogScanner, ScannedRow
from tests.conftest import SHARED, shared_params

from .scan_logs import (
    closed_turn,
    event,
    header,
    line,
    line_ends,
    packed_row,
    v4_events,
    v4_log,
    write,
)

CORPUS = SHARED / "corpus"
SAMPLES = SHARED / "reference" / "samples"


def scan(path: Path, **kwargs: Any) -> tuple[LogScanner, list[ScannedRow]]:
    scanner = LogScanner(path, **kwargs)
    return scanner, list(scanner.rows())


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


# -- the committed prefix ------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1 << 20])
def test_clean_log_yields_every_row_with_exact_positions(tmp_path: Path, chunk_size: int) -> None:
    data = v4_log()
    path = write(tmp_path / "session.v4.jsonl", data)
    scanner, rows = scan(path, chunk_size=chunk_size)
    events = v4_events()
    ends = line_ends(data)
    assert [r.value for r in rows] == events
    assert [r.line for r in rows] == list(range(2, len(events) + 2))
    assert [r.offset for r in rows] == ends[:-1]
    assert [r.raw for r in rows] == [line(e)[:-1] for e in events]
    assert [(r.first_seq, r.seq_count) for r in rows] == [(i, 1) for i in range(len(events))]
    assert scanner.header is not None and scanner.header.version == 4
    assert scanner.header.size == ends[0]
    assert scanner.torn is None
    assert scanner.committed_size == len(data) == scanner.file_size
    assert scanner.event_count == len(events)
    assert scanner.findings == []
    assert scanner.finished


@pytest.mark.requires("shared")
@pytest.mark.parametrize(
    "sample", shared_params(lambda: sorted(p.name for p in SAMPLES.glob("*.jsonl")))
)
def test_reference_samples_scan_clean(sample: str) -> None:
    path = SAMPLES / sample
    scanner, rows = scan(path)
    physical = path.read_bytes().count(b"\n")
    assert scanner.header is not None
    assert scanner.header.version == int(sample.split(".v")[1].split(".")[0])
    assert len(rows) == scanner.event_count == physical - 1
    assert scanner.torn is None and scanner.committed_size == path.stat().st_size


def test_empty_file_is_empty_not_an_error(tmp_path: Path) -> None:
    scanner, rows = scan(write(tmp_path / "s.jsonl", b""))
    assert rows == []
    assert scanner.empty and scanner.header is None and scanner.torn is None
    assert scanner.committed_size == 0 and scanner.event_count == 0
    assert LogScanner(tmp_path / "s.jsonl").read_header() is None


def test_header_only_log_has_no_events(tmp_path: Path) -> None:
    data = line(header())
    scanner, rows = scan(write(tmp_path / "s.jsonl", data))
    assert rows == [] and not scanner.empty
    assert scanner.committed_size == len(data) and scanner.event_count == 0
    assert scanner.torn is None


def test_read_header_reads_only_the_first_line(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", line(header(2)) + b"garbage that is never looked at\n")
    info = LogScanner(path, chunk_size=5).read_header()
    assert info is not None and info.version == 2 and info.size == len(line(header(2)))


def test_scanner_opens_nothing_until_iterated(tmp_path: Path) -> None:
    scanner = LogScanner(tmp_path / "missing.jsonl")
    assert scanner.header is None and not scanner.finished
    with pytest.raises(FileNotFoundError):
        list(scanner.rows())


def test_rescanning_starts_over(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", v4_log())
    scanner = LogScanner(path)
    first = list(scanner.rows())
    path.write_bytes(path.read_bytes() + b'{"par')
    second = list(scanner.rows())
    assert first == second
    assert scanner.torn is not None and scanner.torn.length == 5


# -- version first -------------------------------------------------------------------


def test_newer_version_with_garbage_body_is_unsupported(tmp_path: Path) -> None:
    body = b"\x00\xff not json at all\n" * 3 + line({"type": "turn/end", "seq": 9})
    path = write(tmp_path / "s.jsonl", line({"type": "session", "version": 5}) + body)
    before = snapshot(path)
    with pytest.raises(UnsupportedVersionError) as caught:
        list(LogScanner(path).rows())
    assert str(caught.value) == (
        f"{path}: session format version 5 is not supported (this dsh-store reads versions "
        "0-4): written by a newer writer; upgrade dsh-store"
    )
    assert snapshot(path) == before


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_older_versions_scan_with_their_framing(tmp_path: Path, version: int) -> None:
    events = [*closed_turn(0, 1), *closed_turn(2, 2)]
    data = line(header(version)) + b"".join(line(e) for e in events)
    scanner, rows = scan(write(tmp_path / "s.jsonl", data))
    assert scanner.header is not None and scanner.header.version == version
    assert [r.value for r in rows] == events and scanner.torn is None


def test_torn_header_is_not_a_session(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", line(header())[:30])
    with pytest.raises(NotASessionError, match="the first line is incomplete"):
        list(LogScanner(path).rows())


# -- crash tails ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tail", "rule", "reason"),
    [
        (b"\x00", "torn-line", "the last line has no newline (1 byte(s) cut off)"),
        (b"\x00" * 4096, "torn-line", "the last line has no newline (4096 byte(s) cut off)"),
        (
            b"\xde\xad\xbe\xef garbage",
            "torn-line",
            "the last line has no newline (12 byte(s) cut off)",
        ),
        (b'{"type":"turn/end","seq":13', "torn-line", "the last line has no newline"),
        (b"garbage\n", "unparsable-line", "line is not valid JSON"),
        (b"\x00" * 10 + b"\n" + b"\x00" * 10, "unparsable-line", "line is not valid JSON"),
        (b"\n", "unparsable-line", "line is not valid JSON"),
        (line(event(14, "turn/start", {"turn": 3})), "seq-gap", "expected seq 13, found 14"),
        (line(event(12, "turn/start", {"turn": 3})), "seq-duplicate", "expected seq 13, found 12"),
        (line({"type": "x", "seq": 13, "data": {}}), "bad-row", "row 'x' has no integer 'time'"),
        (line(event(13, "turn/start", {})) + b"\x00\x00", "torn-line", "the last line has no"),
    ],
)
def test_crash_tails_are_torn_not_corrupt(
    tmp_path: Path, tail: bytes, rule: str, reason: str
) -> None:
    good = v4_log()
    if rule == "torn-line" and tail.startswith(b'{"type":"turn/start"'):
        good += tail[: tail.index(b"\n") + 1]
        tail = tail[tail.index(b"\n") + 1 :]
    path = write(tmp_path / "s.jsonl", good + tail)
    before = snapshot(path)
    scanner, rows = scan(path, chunk_size=4096)
    assert scanner.committed_size == len(good)
    assert rows[-1].offset + len(rows[-1].raw) + 1 == len(good)
    torn = scanner.torn
    assert torn is not None
    assert (torn.offset, torn.length, torn.rule) == (len(good), len(tail), rule)
    assert torn.reason.startswith(reason)
    assert torn.line == good.count(b"\n") + 1
    assert torn.seq == scanner.event_count
    finding = scanner.findings[-1]
    assert finding.rule == "torn-tail"
    assert finding.message.startswith(f"crash tail of {len(tail)} byte(s) from line {torn.line}: ")
    assert (finding.line, finding.offset, finding.seq) == (torn.line, torn.offset, torn.seq)
    assert snapshot(path) == before


def test_defect_after_the_last_turn_end_is_a_tail(tmp_path: Path) -> None:
    events = closed_turn(0, 1)
    later = [line(event(3, "turn/start", {"turn": 2})), b"garbage\n", b'{"type":"step/st']
    data = line(header()) + b"".join(line(e) for e in events) + b"".join(later)
    scanner, rows = scan(write(tmp_path / "s.jsonl", data))
    assert len(rows) == 2
    assert scanner.torn is not None and scanner.torn.rule == "seq-gap"
    assert scanner.torn.length == sum(map(len, later))


def test_a_seq_gap_followed_by_a_continuing_row_is_corruption(tmp_path: Path) -> None:
    # A line vanished from the middle: no crash does that, even without a later turn/end.
    events = closed_turn(0, 1)
    later = [line(event(3, "turn/start", {"turn": 2})), line(event(4, "step/start", {}))]
    data = line(header()) + b"".join(line(e) for e in events) + b"".join(later)
    with pytest.raises(CorruptLogError) as caught:
        scan(write(tmp_path / "s.jsonl", data))
    assert (caught.value.line, caught.value.rule, caught.value.seq) == (4, "seq-gap", 2)
    assert "line 5 is a complete, valid row continuing the seqs (seq 4)" in str(caught.value)


def test_turn_end_on_an_unterminated_last_line_does_not_commit(tmp_path: Path) -> None:
    data = v4_log() + b"junk\n" + line(event(14, "turn/end", {}))[:-1]
    scanner, _ = scan(write(tmp_path / "s.jsonl", data))
    assert scanner.torn is not None and scanner.torn.rule == "unparsable-line"


@pytest.mark.parametrize("seq", [1, 0, 5])
def test_a_complete_turn_end_with_a_wrong_seq_is_committed_corruption(
    tmp_path: Path, seq: int
) -> None:
    # The last turn/end written again (or misnumbered): a whole line no torn write leaves,
    # and itself the marker of a closed turn. DSH refuses it too.
    events = closed_turn(0, 1)
    repeated = event(seq, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    data = line(header()) + b"".join(line(e) for e in events) + line(repeated)
    path = write(tmp_path / "s.jsonl", data)
    before = snapshot(path)
    with pytest.raises(CorruptLogError) as caught:
        scan(path)
    rule = "seq-gap" if seq > 2 else "seq-duplicate"
    error = caught.value
    assert (error.line, error.offset, error.seq, error.rule) == (
        4,
        len(data) - len(line(repeated)),
        2,
        rule,
    )
    assert f"expected seq 2, found {seq} [{rule}]; the line is a complete turn/end row" in str(
        error
    )
    assert snapshot(path) == before


def test_a_misnumbered_row_that_is_no_turn_end_stays_a_tail(tmp_path: Path) -> None:
    # Unchanged, as in DSH: without a turn/end at or after it, a seq defect is a tail.
    events = closed_turn(0, 1)
    data = line(header()) + b"".join(line(e) for e in events) + line(events[0])
    scanner, rows = scan(write(tmp_path / "s.jsonl", data))
    assert len(rows) == 2
    assert scanner.torn is not None and scanner.torn.rule == "seq-duplicate"


# -- committed corruption ------------------------------------------------------------


def _corrupt_case(kind: str) -> tuple[bytes, int, int, str, str]:
    """(file bytes, defect line, defect offset, rule, detail start) for one damage kind."""
    events = [*closed_turn(0, 1), *closed_turn(2, 2), *closed_turn(4, 3)]
    lines = [line(header()), *(line(e) for e in events)]
    bad_index = 3  # physical line 4, which should carry seq 2
    if kind == "unparsable-line":
        lines[bad_index] = lines[bad_index][:10] + b"\xff" + lines[bad_index][11:]
        detail = "line is not valid JSON [unparsable-line]"
    elif kind == "seq-gap":
        del lines[bad_index]
        detail = "expected seq 2, found 3 [seq-gap]"
    elif kind == "seq-duplicate":
        lines.insert(bad_index, lines[bad_index - 1])
        detail = "expected seq 2, found 1 [seq-duplicate]"
    elif kind == "bad-row":
        lines[bad_index] = line({"type": "turn/start", "seq": 2, "time": "noon", "data": {}})
        detail = "row 'turn/start' has no integer 'time' [bad-row]"
    else:  # zero bytes overwrote a committed line (a lost page)
        lines[bad_index] = b"\x00" * (len(lines[bad_index]) - 1) + b"\n"
        detail = (
            "line is not valid JSON (it holds NUL bytes, as a zero-filled region does) "
            "[unparsable-line]"
        )
    offset = sum(map(len, lines[:bad_index]))
    return b"".join(lines), bad_index + 1, offset, kind.replace("zeroed", "unparsable-line"), detail


@pytest.mark.parametrize(
    "kind", ["unparsable-line", "seq-gap", "seq-duplicate", "bad-row", "zeroed"]
)
@pytest.mark.parametrize("chunk_size", [3, 1 << 20])
def test_defect_before_a_later_turn_end_is_corruption(
    tmp_path: Path, kind: str, chunk_size: int
) -> None:
    data, line_no, offset, rule, detail = _corrupt_case(kind)
    path = write(tmp_path / "session.v4.jsonl", data)
    before = snapshot(path)
    scanner = LogScanner(path, chunk_size=chunk_size)
    yielded: list[ScannedRow] = []
    with pytest.raises(CorruptLogError) as caught:
        for row in scanner.rows():
            yielded.append(row)
    error = caught.value
    assert (error.line, error.offset, getattr(error, "seq", None), error.rule) == (
        line_no,
        offset,
        2,
        rule,
    )
    if kind.startswith("seq-"):  # the valid row right after the defect is the evidence
        found = 4 if kind == "seq-gap" else 2
        evidence = (
            f"line {line_no + 1} is a complete, valid row continuing the seqs (seq {found}) "
            "and a crash leaves no valid line after damage that holds no NUL byte, so this "
            "region was committed"
        )
    else:
        evidence = f"the turn/end at line {line_no + 1} shows this region was committed"
    assert str(error) == (
        f"{path}:{line_no} (byte {offset}, seq 2): corrupt session log: {detail}; {evidence}; "
        "the file was not modified — restore it from a backup or inspect it with "
        "`dsh-store inspect`"
    )
    assert [r.first_seq for r in yielded] == [0, 1]
    assert snapshot(path) == before


def test_unparsable_later_lines_do_not_hide_a_commit(tmp_path: Path) -> None:
    data = (
        line(header())
        + line(event(0, "turn/start", {"turn": 1}))
        + b"broken\n"
        + b'{"type":"turn/end" broken\n'
        + line(event(1, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}))
    )
    with pytest.raises(CorruptLogError) as caught:
        LogScanner(write(tmp_path / "s.jsonl", data)).exhaust()
    assert caught.value.line == 3
    assert "the turn/end at line 5 shows" in str(caught.value)


# -- V0/V1 packed rows ---------------------------------------------------------------


def _packed_log(version: int, rows: list[dict[str, Any]]) -> bytes:
    return line(header(version)) + b"".join(line(r) for r in rows)


def test_packed_rows_pass_through_unexpanded_in_v0_and_v1(tmp_path: Path) -> None:
    body = [
        event(0, "turn/start", {"turn": 1}),
        packed_row(1, ["a", "b", "c"]),
        packed_row(4, ["{", "}"], kind="tool-call-chunks"),
        event(6, "turn/end", {"turn": 1}),
    ]
    for version in (0, 1):
        scanner, rows = scan(write(tmp_path / f"v{version}.jsonl", _packed_log(version, body)))
        assert [(r.first_seq, r.seq_count) for r in rows] == [(0, 1), (1, 3), (4, 2), (6, 1)]
        assert rows[1].value == body[1]
        assert scanner.event_count == 7 and scanner.torn is None


def test_packed_row_seq_gap_without_commit_drops_the_whole_row(tmp_path: Path) -> None:
    body = [event(0, "turn/start", {"turn": 1}), packed_row(2, ["a", "b", "c"])]
    data = _packed_log(0, body)
    scanner, rows = scan(write(tmp_path / "s.jsonl", data))
    assert len(rows) == 1
    assert scanner.torn is not None and scanner.torn.rule == "seq-gap"
    assert scanner.committed_size == len(data) - len(line(body[1]))


def test_malformed_packed_row_before_a_commit_is_corruption(tmp_path: Path) -> None:
    bad = packed_row(1, ["a", "b", "c"])
    bad["data"]["dt"] = [1]
    body = [event(0, "turn/start", {"turn": 1}), bad, event(4, "turn/end", {"turn": 1})]
    with pytest.raises(CorruptLogError) as caught:
        LogScanner(write(tmp_path / "s.jsonl", _packed_log(1, body))).exhaust()
    assert caught.value.rule == "bad-row"
    assert "packed row has 3 members but 1 time gaps [bad-row]" in str(caught.value)


def test_packed_row_in_a_v2_log_is_a_bad_row(tmp_path: Path) -> None:
    body = [event(0, "turn/start", {"turn": 1}), packed_row(1, ["a", "b", "c"])]
    scanner, rows = scan(write(tmp_path / "s.jsonl", _packed_log(2, body)))
    assert len(rows) == 1 and scanner.torn is not None
    assert scanner.torn.reason == "packed chunk row 'text-chunks' is not allowed in a version 2 log"


# -- BOM and CRLF --------------------------------------------------------------------


def test_crlf_lines_are_accepted_and_reported_once(tmp_path: Path) -> None:
    data = v4_log().replace(b"\n", b"\r\n")
    scanner, rows = scan(write(tmp_path / "s.jsonl", data), chunk_size=5)
    assert [r.value for r in rows] == v4_events()
    assert all(not r.raw.endswith(b"\r") for r in rows)
    assert scanner.committed_size == len(data) and scanner.torn is None
    (crlf,) = scanner.findings  # the header line is counted with the others, once
    assert crlf.rule == "crlf"
    assert crlf.message == "14 line(s) end in CRLF; DSH writes LF only (accepted)"
    assert (crlf.line, crlf.offset) == (1, 0)


def test_crlf_only_after_the_header_is_reported_at_its_first_line(tmp_path: Path) -> None:
    header_line, body = v4_log().split(b"\n", 1)
    data = header_line + b"\n" + body.replace(b"\n", b"\r\n")
    scanner, rows = scan(write(tmp_path / "s.jsonl", data), chunk_size=5)
    (crlf,) = scanner.findings
    assert crlf.message == "13 line(s) end in CRLF; DSH writes LF only (accepted)"
    assert (crlf.line, crlf.offset) == (2, rows[0].offset)


def test_a_crlf_header_alone_is_one_finding(tmp_path: Path) -> None:
    header_line, body = v4_log().split(b"\n", 1)
    scanner, _ = scan(write(tmp_path / "s.jsonl", header_line + b"\r\n" + body))
    assert [(f.rule, f.message, f.line, f.offset) for f in scanner.findings] == [
        ("crlf", "1 line(s) end in CRLF; DSH writes LF only (accepted)", 1, 0)
    ]
    header_only = LogScanner(tmp_path / "s.jsonl")
    info = header_only.read_header()
    assert info is not None and [f.rule for f in header_only.findings] == ["crlf"]


def test_bom_and_crlf_header_then_crlf_lines_keep_file_order(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + v4_log().replace(b"\n", b"\r\n")
    scanner, _ = scan(write(tmp_path / "s.jsonl", data), chunk_size=7)
    assert [(f.rule, f.line) for f in scanner.findings] == [("bom", 1), ("crlf", 1)]
    assert scanner.findings[1].message.startswith("14 line(s) end in CRLF")


def test_bom_is_skipped_and_reported(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + v4_log()
    scanner, rows = scan(write(tmp_path / "s.jsonl", data))
    assert [r.value for r in rows] == v4_events()
    assert rows[0].offset == len(line(header())) + 3
    assert [f.rule for f in scanner.findings] == ["bom"]


# -- streaming -----------------------------------------------------------------------


def test_scan_memory_is_bounded_by_chunk_not_file(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    filler = "x" * 2000
    with open(path, "wb") as out:
        out.write(line(header()))
        for seq in range(4000):
            out.write(line(event(seq, "tool/result", {"text": filler, "n": seq})))
    size = path.stat().st_size
    assert size > 8_000_000
    scanner = LogScanner(path, chunk_size=128 * 1024)
    tracemalloc.start()
    try:
        count = sum(1 for _ in scanner.rows())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 4000 and scanner.torn is None
    assert peak < size // 8, (peak, size)


# -- corpus smoke --------------------------------------------------------------------


def _manifest() -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = json.loads((CORPUS / "manifest.json").read_text())["files"]
    return files


@pytest.mark.requires("shared")
def test_corpus_every_file_is_listed() -> None:
    listed = {CORPUS / f["path"] for f in _manifest()}
    assert set(CORPUS.rglob("*.jsonl")) == listed


@pytest.mark.requires("shared")
@pytest.mark.parametrize("entry", shared_params(_manifest), ids=lambda f: f["path"])
def test_corpus_scans_without_untyped_errors(entry: dict[str, Any]) -> None:
    path = CORPUS / entry["path"]
    before = snapshot(path)
    scanner = LogScanner(path)
    try:
        scanner.exhaust()
    except NotASessionError as error:
        assert entry["expected"] == "not-a-session", str(error)
        assert "the session header has no 'version'" in str(error)
    except CorruptLogError as error:
        assert entry.get("reason_class") == "seq gap", str(error)
        assert error.rule == "seq-gap"
        assert f"physical line {error.line}" in entry["reason"]
    except DshStoreError as error:  # pragma: no cover - would be a new typed outcome
        pytest.fail(f"unexpected typed error {error!r}")
    else:
        assert scanner.header is not None and scanner.header.version == entry["version"]
        assert scanner.event_count == entry["events"]
        assert scanner.torn is None
        assert scanner.committed_size == os.path.getsize(path)
    assert snapshot(path) == before


# -- arbitrary damage ----------------------------------------------------------------


@given(
    cut=st.integers(min_value=0, max_value=len(v4_log())),
    junk=st.binary(max_size=64) | st.sampled_from([b"\n", b"\x00" * 9, b'{"type":"turn/end"}\n']),
    chunk_size=st.sampled_from([1, 5, 1 << 20]),
)
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_damage_is_either_a_tail_or_typed_corruption(
    tmp_path: Path, cut: int, junk: bytes, chunk_size: int
) -> None:
    data = v4_log()
    body_start = len(line(header()))
    damaged = data[: max(cut, body_start)] + junk + data[max(cut, body_start) :]
    path = write(tmp_path / "s.jsonl", damaged)
    scanner = LogScanner(path, chunk_size=chunk_size)
    try:
        rows = list(scanner.rows())
    except CorruptLogError as error:
        assert error.offset is not None and damaged.count(b"\n", 0, error.offset) + 1 == error.line
        return
    assert scanner.committed_size == body_start + sum(len(r.raw) + 1 for r in rows) + sum(
        1 for r in rows if damaged[r.offset + len(r.raw)] == 13
    )
    assert all(damaged[r.offset : r.offset + len(r.raw)] == r.raw for r in rows)
    assert [r.first_seq for r in rows] == list(range(len(rows)))
    torn = scanner.torn
    if torn is None:
        assert scanner.committed_size == len(damaged)
    else:
        assert torn.offset == scanner.committed_size
        assert torn.offset + torn.length == len(damaged)


# -- lone surrogates -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("escaped", "json_path", "unit"),
    [
        (b'{"text":"broken \\ud83d emoji"}', "$.data.text", "U+D83D"),
        (b'{"parts":[{"t":"ok"},{"t":"\\uDE00"}]}', "$.data.parts[1].t", "U+DE00"),
        (b'{"k\\udbff y":1}', '$.data["k\\udbff y"]', "U+DBFF"),
    ],
)
@pytest.mark.parametrize("last", [True, False])
def test_a_lone_surrogate_is_refused_by_its_own_rule_wherever_it_is(
    tmp_path: Path, escaped: bytes, json_path: str, unit: str, last: bool
) -> None:
    # JSON.stringify writes a lone surrogate as an escape; the line is complete and valid
    # JSON, so it is no crash tail even as the last line, and not "unparsable" either.
    events = closed_turn(0, 1)
    bad = b'{"type":"tool/progress","seq":2,"time":3,"data":' + escaped + b"}\n"
    after = b"" if last else line(event(3, "turn/start", {"turn": 2}))
    data = line(header()) + b"".join(line(e) for e in events) + bad + after
    path = write(tmp_path / "s.jsonl", data)
    before = snapshot(path)
    with pytest.raises(LoneSurrogateError) as caught:
        scan(path)
    error = caught.value
    assert isinstance(error, CorruptLogError)
    assert (error.line, error.offset, error.seq, error.rule) == (
        4,
        len(data) - len(bad + after),
        2,
        "lone-surrogate",
    )
    assert (error.json_path, error.code_unit) == (json_path, unit)
    assert f"the string at {json_path} holds a lone UTF-16 surrogate ({unit})" in str(error)
    assert "no v4 writer produces such a line" in str(error)
    assert snapshot(path) == before


def test_a_paired_surrogate_escape_reads_as_its_character(tmp_path: Path) -> None:
    bad = b'{"type":"tool/progress","seq":13,"time":3,"data":{"t":"\\ud83d\\ude00"}}\n'
    scanner, rows = scan(write(tmp_path / "s.jsonl", v4_log() + bad))
    assert rows[-1].value["data"] == {"t": "\U0001f600"}
    assert scanner.torn is None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type":"x","seq":13,"time":3,"data":{"t":"\xed\xa0\x80"}}\n',  # raw bytes: no UTF-8
        b'{"type":"x","seq":13,"time":3,"data":{"t":"\\ud800","n":NaN}}\n',  # NaN: no JSON
        b'{"type":"x","seq":13,"time":3,"data":{"t":"\\ud800"}\n',  # unbalanced
    ],
)
def test_a_surrogate_in_a_line_that_is_not_json_stays_unparsable(
    tmp_path: Path, raw: bytes
) -> None:
    scanner, _ = scan(write(tmp_path / "s.jsonl", v4_log() + raw))
    assert scanner.torn is not None and scanner.torn.rule == "unparsable-line"


def test_a_lone_surrogate_in_an_older_log_names_its_reader(tmp_path: Path) -> None:
    bad = b'{"type":"turn/start","seq":0,"time":3,"data":{"turn":1,"t":"\\ud800"}}\n'
    path = write(tmp_path / "session.jsonl", line(header(0)) + bad)
    with pytest.raises(LoneSurrogateError, match="DSH, which writes such strings, still reads"):
        scan(path)
