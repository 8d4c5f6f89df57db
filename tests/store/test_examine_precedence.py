"""How a file with two defects is classified: one case per pair of defect kinds.

Each file holds two defects; the case pins which one classifies it and whose finding the
report ends with (docs/format.md, "How a file is classified"). The kinds:

- ``C``: committed corruption (an unparsable line with a valid continuing row after it);
- ``M``: a committed v4 event that breaks a model rule (a second ``turn/start``);
- ``D``: a committed v4 row that does not decode as its event type (no ``surfaceOp``);
- ``E``: a v4 model rule checked at the end of the log (a seeded header, no marker);
- ``H``: a v4 header, or an older header the chain refuses, that is invalid;
- ``R``: an older event the migration chain refuses (an unknown required type);
- ``U``: an older event the chain passes and the v4 model refuses (``turn-already-open``);
- ``L``: an older line holding a lone surrogate;
- ``T``: a crash tail; ``O``: an open last turn.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from dsh_store.errors import CorruptLogError, EventValidationError, MigrationRefusedError
from dsh_store.migrate import migrate_file
from dsh_store.restore import decide, examine, read_log, read_outcome

from .helpers import CWD, complete_turn, make_store, open_tool_turn, snapshot

CORRUPT_LINE = b"{not json\n"
TORN = b'{"type":"turn/st'

V3_HEADER = {
    "type": "session",
    "version": 3,
    "id": "old",
    "createdAt": 1000,
    "isSeeded": False,
    "delegationDepth": 0,
}


def _row(kind: str, seq: int, data: dict[str, object]) -> bytes:
    return orjson.dumps({"type": kind, "seq": seq, "time": seq + 1, "data": data}) + b"\n"


def _second_turn_start(seq: int) -> bytes:
    """A ``turn/start`` while turn 1 is open: the model's ``turn-already-open``."""
    return _row("turn/start", seq, {"turn": 9})


def _v3_lines() -> list[bytes]:
    """A balanced format-3 log of two turns: the header, then seqs 0-8 on lines 2-10."""
    return [
        orjson.dumps(V3_HEADER) + b"\n",
        _row("turn/start", 0, {"turn": 1}),
        _row("step/start", 1, {"turn": 1, "step": 1}),
        orjson.dumps(
            {
                "type": "user/message",
                "seq": 2,
                "time": 3,
                "data": {
                    "role": "user",
                    "id": "u1",
                    "content": [{"type": "text", "text": "hi"}],
                    "source": {"kind": "user"},
                },
                "surfaceOp": "append",
            }
        )
        + b"\n",
        _row("step/end", 3, {"turn": 1, "step": 1}),
        _row("turn/end", 4, {"turn": 1, "reason": {"kind": "completed"}}),
        _row("turn/start", 5, {"turn": 2}),
        _row("step/start", 6, {"turn": 2, "step": 1}),
        _row("step/end", 7, {"turn": 2, "step": 1}),
        _row("turn/end", 8, {"turn": 2, "reason": {"kind": "completed"}}),
    ]


@pytest.fixture(scope="module")
def v4(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[bytes]]:
    """Lines of a balanced v4 log (header, then seqs 0-12 on lines 2-14) and of one whose
    last turn is open."""
    store = make_store(tmp_path_factory.mktemp("src"))
    with store.new("ok", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        complete_turn(live, 2)
    with store.new("open", cwd=CWD) as live:
        complete_turn(live, 1)
        open_tool_turn(live, 2, ("c",), logged=0)
    return {
        name: store.locate(name).read_bytes().splitlines(keepends=True) for name in ("ok", "open")
    }


def _replaced(lines: list[bytes], **by_index: bytes) -> bytes:
    """``lines`` joined, with ``lN=bytes`` replacing the line at index N (line N + 1)."""
    out = list(lines)
    for key, line in by_index.items():
        out[int(key[1:])] = line
    return b"".join(out)


def _seeded(lines: list[bytes]) -> list[bytes]:
    """``lines`` with a seeded header and no ``session/end-seed`` marker (rule ``E``)."""
    return [lines[0].replace(b'"isSeeded":false', b'"isSeeded":true'), *lines[1:]]


_REFUSED_V3_HEADER = orjson.dumps({**V3_HEADER, "createdAt": "x"}) + b"\n"
"""An older header whose upgrade is no valid v4 header (``header-created-at``)."""


def _v1_refused_at_its_header() -> bytes:
    """A format-1 header the 1->2 edge refuses (``malformed-seed-length``), one event."""
    header = {**V3_HEADER, "version": 1, "seedLength": -1}
    del header["isSeeded"]
    return orjson.dumps(header) + b"\n" + _row("turn/start", 0, {"turn": 1})


Build = Callable[[dict[str, list[bytes]]], bytes]

# case -> (builder, classification, the rules of the report's findings, the last one's line)
CASES: dict[str, tuple[Build, str, list[str], int | None]] = {
    # v4: the read stops at the first defect in file order, which decides.
    "M-before-C": (
        lambda v4: _replaced(v4["ok"], l6=_second_turn_start(5), l10=CORRUPT_LINE),
        "corrupt",
        ["turn-already-open"],
        7,
    ),
    "C-before-M": (
        lambda v4: _replaced(v4["ok"], l3=CORRUPT_LINE, l10=_second_turn_start(9)),
        "corrupt",
        ["unparsable-line"],
        4,
    ),
    "D-before-C": (
        lambda v4: _replaced(v4["ok"], l4=_row("user/message", 3, {}), l10=CORRUPT_LINE),
        "corrupt",
        ["surface-op-required"],
        5,
    ),
    "C-before-D": (
        lambda v4: _replaced(v4["ok"], l3=CORRUPT_LINE, l10=_row("user/message", 9, {})),
        "corrupt",
        ["unparsable-line"],
        4,
    ),
    # The end rule is checked on the rows before the corruption: the corruption wins.
    "E-and-C": (
        lambda v4: _replaced(_seeded(v4["ok"]), l9=CORRUPT_LINE),
        "corrupt",
        ["unparsable-line"],
        10,
    ),
    # A crash tail is no defect of the committed region: the end rule still applies.
    "E-and-T": (
        lambda v4: b"".join(_seeded(v4["ok"])) + TORN,
        "corrupt",
        ["torn-tail", "seeded-marker-mismatch"],
        None,
    ),
    "M-and-T": (
        lambda v4: _replaced(v4["ok"], l6=_second_turn_start(5)) + TORN,
        "corrupt",
        ["turn-already-open"],
        7,
    ),
    "M-and-O": (
        lambda v4: _replaced(v4["open"], l6=_second_turn_start(5)),
        "corrupt",
        ["turn-already-open"],
        7,
    ),
    "H-and-C": (
        lambda v4: _replaced(
            v4["ok"],
            l0=v4["ok"][0].replace(b'"isSeeded":false', b'"isSeeded":7'),
            l9=CORRUPT_LINE,
        ),
        "corrupt",
        ["header-field-type", "header-is-seeded"],
        1,
    ),
    # Older logs: after a refusal the rows are read to their end; corruption wins.
    "R-before-C": (
        lambda v4: _replaced(_v3_lines(), l2=_row("mystery/x", 1, {}), l7=CORRUPT_LINE),
        "corrupt",
        ["unparsable-line"],
        8,
    ),
    "C-before-R": (
        lambda v4: _replaced(_v3_lines(), l2=CORRUPT_LINE, l7=_row("mystery/x", 6, {})),
        "corrupt",
        ["unparsable-line"],
        3,
    ),
    "U-before-C": (
        lambda v4: _replaced(_v3_lines(), l2=_second_turn_start(1), l7=CORRUPT_LINE),
        "corrupt",
        ["unparsable-line"],
        8,
    ),
    "C-before-U": (
        lambda v4: _replaced(_v3_lines(), l2=CORRUPT_LINE, l7=_second_turn_start(6)),
        "corrupt",
        ["unparsable-line"],
        3,
    ),
    "R-before-L": (
        lambda v4: _replaced(
            _v3_lines(),
            l2=_row("mystery/x", 1, {}),
            l7=b'{"type":"step/start","seq":6,"time":7,"data":{"turn":2,"step":1,"x":"\\ud800"}}\n',
        ),
        "corrupt",
        ["lone-surrogate"],
        8,
    ),
    # The refusal is made once the rows are all read: the tail's finding comes first.
    "R-and-T": (
        lambda v4: _replaced(_v3_lines(), l2=_row("mystery/x", 1, {})) + b'{"ty',
        "refused",
        ["torn-tail", "refused: unknown required event"],
        3,
    ),
    "U-and-T": (
        lambda v4: _replaced(_v3_lines(), l2=_second_turn_start(1)) + b'{"ty',
        "refused",
        ["torn-tail", "refused: turn-already-open"],
        3,
    ),
    "C-and-T (older)": (
        lambda v4: _replaced(_v3_lines(), l2=CORRUPT_LINE) + b'{"ty',
        "corrupt",
        ["unparsable-line"],
        3,
    ),
    # An older header the chain refuses: the rows are read to their end after it too.
    "H-refused-and-C": (
        lambda v4: _replaced(_v3_lines(), l0=_REFUSED_V3_HEADER, l7=CORRUPT_LINE),
        "corrupt",
        ["header-field-type", "unparsable-line"],
        8,
    ),
    "H-refused-at-an-edge-and-C": (
        lambda v4: _v1_refused_at_its_header() + CORRUPT_LINE + _v3_lines()[5],
        "corrupt",
        ["header-field-type", "unparsable-line"],
        3,
    ),
    "H-refused-and-T": (
        lambda v4: _replaced(_v3_lines(), l0=_REFUSED_V3_HEADER) + b'{"ty',
        "refused",
        ["header-field-type", "torn-tail", "refused: header-created-at"],
        None,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_two_defects(tmp_path: Path, v4: dict[str, list[bytes]], case: str) -> None:
    build, classification, rules, line = CASES[case]
    path = tmp_path / "session.jsonl"
    path.write_bytes(build(v4))
    before = snapshot(path)
    report = examine(path)
    assert report.classification == classification
    assert [finding.rule for finding in report.findings] == rules
    assert report.findings[-1].line == line
    assert decide(read_outcome(path)).classification == classification
    assert snapshot(path) == before


def test_a_refusal_and_the_corruption_after_it_are_recorded_together(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(
        _replaced(_v3_lines(), l2=_row("mystery/x", 1, {}), l7=CORRUPT_LINE),
    )
    outcome = read_outcome(path)
    assert isinstance(outcome.failure, MigrationRefusedError)
    assert outcome.scanner.corruption is not None
    assert outcome.scanner.corruption.line == 8
    verdict = decide(outcome)
    assert verdict == ("corrupt", outcome.scanner.corruption)


def test_an_end_rule_on_the_rows_before_the_corruption_loses_to_it(
    tmp_path: Path, v4: dict[str, list[bytes]]
) -> None:
    path = tmp_path / "seeded.jsonl"
    path.write_bytes(_replaced(_seeded(v4["ok"]), l9=CORRUPT_LINE))
    outcome = read_outcome(path)
    # The rows end at the corruption; the model then finds no marker among them.
    assert isinstance(outcome.failure, CorruptLogError)
    assert outcome.failure.rule == "seeded-marker-mismatch"
    assert outcome.scanner.corruption is not None
    assert decide(outcome) == ("corrupt", outcome.scanner.corruption)


def test_a_v4_event_before_the_corruption_stops_the_read_there(
    tmp_path: Path, v4: dict[str, list[bytes]]
) -> None:
    path = tmp_path / "v4.jsonl"
    path.write_bytes(_replaced(v4["ok"], l6=_second_turn_start(5), l10=CORRUPT_LINE))
    outcome = read_outcome(path)
    assert outcome.scanner.corruption is None  # never reached
    assert isinstance(outcome.failure, CorruptLogError)
    assert (outcome.failure.rule, outcome.failure.line) == ("turn-already-open", 7)
    assert not isinstance(outcome.failure, EventValidationError)


@pytest.mark.parametrize("case", ["H-refused-and-C", "H-refused-at-an-edge-and-C"])
def test_a_refused_header_and_corruption_further_on_raise_the_corruption(
    tmp_path: Path, v4: dict[str, list[bytes]], case: str
) -> None:
    """``read_log`` and ``migrate`` agree with ``verify``: the corruption is raised."""
    path = tmp_path / "old.jsonl"
    path.write_bytes(CASES[case][0](v4))
    before = snapshot(path)
    with pytest.raises(CorruptLogError) as raised:
        read_log(path)
    assert raised.value.rule == "unparsable-line"
    for dry_run in (True, False):
        with pytest.raises(CorruptLogError) as raised:
            migrate_file(path, output=tmp_path / "out.v4.jsonl", dry_run=dry_run)
        assert raised.value.rule == "unparsable-line"
    assert snapshot(path) == before
    assert not (tmp_path / "out.v4.jsonl").exists()


def test_a_refused_header_alone_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(b"".join([_REFUSED_V3_HEADER, *_v3_lines()[1:]]))
    with pytest.raises(MigrationRefusedError, match="createdAt"):
        read_log(path)
    with pytest.raises(MigrationRefusedError, match="createdAt"):
        migrate_file(path, output=tmp_path / "out.v4.jsonl")
    assert examine(path).classification == "refused"
