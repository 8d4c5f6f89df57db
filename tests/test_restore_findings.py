"""``restore.examine`` keeps what the scanner noticed when a file cannot be restored.

A corrupt, refused or unsupported file used to report only the error's finding, dropping
the BOM, CRLF and header-shape findings collected before it. The classification and its
precedence stay as they were; the findings now list every problem, in file order, with the
error's finding last.
"""

from __future__ import annotations

import json
from pathlib import Path

from dsh_store.restore import examine
from dsh_store.verify import verify_json
from tests.cli.conftest import record_session, write_header
from tests.cli.schema_check import errors, load_schema
from tests.conftest import REPO

BOM = b"\xef\xbb\xbf"


def _lines(log: Path) -> list[bytes]:
    return log.read_bytes().splitlines(keepends=True)


def _committed_corruption(tmp_path: Path) -> Path:
    """A two-turn v4 log whose third line is garbage, followed by a later turn/end."""
    log = record_session(tmp_path, "s", turns=2)
    lines = _lines(log)
    lines[2] = b"this line is not json\n"
    log.write_bytes(b"".join(lines))
    return log


def test_bom_and_committed_corruption_are_both_reported(tmp_path: Path) -> None:
    log = _committed_corruption(tmp_path)
    log.write_bytes(BOM + log.read_bytes())
    report = examine(log)
    assert report.classification == "corrupt" and report.events is None
    assert [f.rule for f in report.findings] == ["bom", "unparsable-line"]
    bom, corrupt = report.findings
    assert (bom.line, bom.offset) == (1, 0)
    assert corrupt.line == 3 and corrupt.message.startswith("committed corruption: ")
    assert errors(verify_json([report]), load_schema("verify")) == []


def test_crlf_lines_before_committed_corruption_are_reported(tmp_path: Path) -> None:
    log = _committed_corruption(tmp_path)
    log.write_bytes(BOM + log.read_bytes().replace(b"\n", b"\r\n"))
    report = examine(log)
    assert report.classification == "corrupt"
    assert [(f.rule, f.line) for f in report.findings] == [
        ("bom", 1),
        ("crlf", 1),
        ("unparsable-line", 3),
    ]
    # The header, line 2 and the damaged line 3 were read before the scan stopped.
    assert report.findings[1].message.startswith("3 line(s) end in CRLF")


def test_a_model_rule_broken_in_a_v4_log_keeps_the_bom(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=2)
    lines = _lines(log)
    event = json.loads(lines[2])
    assert event["type"] == "step/start"
    event["data"]["turn"] = 7  # a step of a turn that is not open
    lines[2] = json.dumps(event, separators=(",", ":")).encode() + b"\n"
    log.write_bytes(BOM + b"".join(lines))
    report = examine(log)
    assert report.classification == "corrupt"
    bom, corrupt = report.findings
    assert bom.rule == "bom" and corrupt.seq == 1 and corrupt.line == 3


def test_an_unsupported_version_keeps_its_bom_and_crlf(tmp_path: Path) -> None:
    log = tmp_path / "newer.jsonl"
    write_header(log, 5)
    log.write_bytes(BOM + log.read_bytes().replace(b"\n", b"\r\n"))
    report = examine(log)
    assert report.classification == "unsupported-version" and report.version == 5
    assert [f.rule for f in report.findings] == ["bom", "crlf", "unsupported-version"]


def test_a_refused_log_keeps_the_findings_before_the_refusal(tmp_path: Path) -> None:
    log = tmp_path / "refused.jsonl"
    # A format-0 header without delegationDepth, as the real V0 logs have, then a refusal.
    source = REPO / "fixtures" / "refused" / "2to3-surface-before-first-step" / "session.jsonl"
    header, _, body = source.read_bytes().partition(b"\n")
    assert header.endswith(b',"delegationDepth":0}')
    log.write_bytes(BOM + header.removesuffix(b',"delegationDepth":0}') + b"}\n" + body)
    report = examine(log)
    assert report.classification == "refused"
    rules = [f.rule for f in report.findings]
    assert rules[:2] == ["bom", "header-missing-field"]
    assert rules[-1].startswith("refused: ") and len(rules) == 3


def test_a_clean_file_and_a_plain_corrupt_file_are_unchanged(tmp_path: Path) -> None:
    clean = record_session(tmp_path / "clean", "s", turns=1)
    assert examine(clean).findings == ()
    corrupt = examine(_committed_corruption(tmp_path / "corrupt"))
    assert [f.rule for f in corrupt.findings] == ["unparsable-line"]


# -- a model refusal of an upgraded log names the source event, as migrate does ----------


def _wrong_step_end(tmp_path: Path) -> Path:
    """v0-chunk-attempts whose source seq 20 (a step/end, line 20) names step 3, not 2.

    The chain folds chunks: that event's upgraded seq is 13, an assistant/chunk's in the
    source. Returns the log, in a session directory of its own.
    """
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "valid" / "v0-chunk-attempts"
    log = tmp_path / "sess" / "session.jsonl"
    log.parent.mkdir(parents=True)
    row = b'"seq":20,"time":1780000000210,"data":{"turn":1,"step":2}'
    data = (fixture / "session.jsonl").read_bytes()
    assert data.count(row) == 1
    log.write_bytes(data.replace(row, row.replace(b'"step":2', b'"step":3')))
    assert b'"type":"step/end","seq":20,' in _lines(log)[19]
    return log


def test_a_model_refusal_of_an_upgraded_log_names_the_source_line_and_seq(
    tmp_path: Path,
) -> None:
    log = _wrong_step_end(tmp_path)
    report = examine(log)
    assert (report.classification, report.version, report.events) == ("refused", 0, None)
    (refusal,) = report.findings
    assert (refusal.rule, refusal.line, refusal.seq) == ("refused: step-mismatch", 20, 20)
    assert refusal.message.startswith(
        "the migration chain refuses this log at edge model (step/end): "
    )
    assert "upgraded seq 13, from source seq 20" in refusal.message
    assert errors(verify_json([report]), load_schema("verify")) == []


def test_a_model_refusal_keeps_the_findings_before_it(tmp_path: Path) -> None:
    log = _wrong_step_end(tmp_path)
    log.write_bytes(BOM + log.read_bytes())
    report = examine(log)
    assert report.classification == "refused"
    bom, refusal = report.findings
    assert (bom.rule, bom.line) == ("bom", 1)
    assert (refusal.line, refusal.seq) == (20, 20)


def test_committed_corruption_after_a_model_refusal_still_wins(tmp_path: Path) -> None:
    log = _wrong_step_end(tmp_path)
    lines = _lines(log)
    lines[-2] = b"this line is not json\n"
    log.write_bytes(b"".join(lines))
    report = examine(log)
    assert report.classification == "corrupt"
    assert [(f.rule, f.line) for f in report.findings] == [("unparsable-line", len(lines) - 1)]
