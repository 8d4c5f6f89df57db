"""Every outcome class of the real V0 corpus, built from the project's own fixtures.

The corpus (``../shared``) is absent from a user's clone; these cases keep each of its
manifest's classes covered there: a format-0 log that restores, one refused at an edge
(``surface before first step``), one with committed corruption (``seq gap``) and one whose
header has no version (``not-a-session``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.cli.schema_check import errors, load_schema
from tests.conftest import REPO

Invoke = Callable[..., Result]
FIXTURES = REPO / "fixtures"


def _with_seq_gap(source: Path, target: Path) -> None:
    """``source`` (a format-0 log) with every seq from its third event on raised by one."""
    header, *events = source.read_bytes().splitlines(keepends=True)
    out = [header]
    for index, raw in enumerate(events):
        row = json.loads(raw)
        if index >= 2 and "seq" in row:
            row["seq"] += 1
        out.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    target.write_bytes(b"".join(out))


def test_each_corpus_outcome_class_is_classified_as_the_corpus_expects(
    invoke: Invoke, tmp_path: Path
) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    shutil.copyfile(FIXTURES / "valid" / "v0-basic" / "session.jsonl", root / "restore.jsonl")
    refused = FIXTURES / "refused" / "2to3-surface-before-first-step" / "session.jsonl"
    shutil.copyfile(refused, root / "refuse.jsonl")
    _with_seq_gap(FIXTURES / "valid" / "v0-basic" / "session.jsonl", root / "seq-gap.jsonl")
    (root / "no-version.jsonl").write_bytes(
        b'{"type":"session","id":"x","createdAt":1}\n'
        b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
    )
    done = invoke("verify", root, "--json")
    assert done.exit_code == 1, done.output
    document = json.loads(done.stdout)
    assert errors(document, load_schema("verify")) == []
    files = {Path(f["path"]).name: f for f in document["files"]}
    assert files["restore.jsonl"]["classification"] == "needs-migration"
    assert files["restore.jsonl"]["version"] == 0
    assert [f["rule"] for f in files["refuse.jsonl"]["findings"]] == [
        "refused: surface before first step"
    ]
    assert files["refuse.jsonl"]["classification"] == "refused"
    gap = files["seq-gap.jsonl"]
    assert gap["classification"] == "corrupt"
    assert [(f["rule"], f["line"]) for f in gap["findings"]] == [("seq-gap", 4)]
    missing = files["no-version.jsonl"]
    assert missing["classification"] == "not-a-session"
    assert "the session header has no 'version'" in missing["findings"][0]["message"]
