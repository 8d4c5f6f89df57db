"""Every real format-0 log of the shared corpus through the scanner, the chain and the model.

Each file is copied with the upstream fixture loader's placeholder substitution applied to
every decodable line (see the corpus README), migrated with ``migrate_file`` (scanner,
committed-region rule, chain, full streaming re-verification) and the published log is
read back with ``read_log`` (``Session.from_restore``). The manifest's expectation must
hold:

- ``restore``: a valid v4 log the model accepts (dense seqs, a clean re-encoding);
- ``refuse``: refused for the stated reason class;
- ``not-a-session``: classified so by ``examine`` and ``classify_header``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import CorruptLogError, MigrationRefusedError
from dsh_store.jsonl.scan import LogScanner
from dsh_store.migrate import classify_header, migrate_file
from dsh_store.restore import examine, read_log
from tests.conftest import SHARED, shared_missing_reason, shared_params
from tests.corpus import loaded_copy

CORPUS = SHARED / "corpus"
MANIFEST = CORPUS / "manifest.json"

# The model requires assistant/attempt inside an open step; these upstream snapshots
# hold a bare chunk run with no turn or step, which the chain turns into a lone attempt.
pytestmark = pytest.mark.requires("shared")


def _entries() -> list[Any]:
    if shared_missing_reason() is not None:
        return shared_params(list)
    params = []
    for entry in json.loads(MANIFEST.read_text())["files"]:
        params.append(pytest.param(entry, id=entry["path"]))
    return params


@pytest.mark.parametrize("entry", _entries())
def test_corpus_file_meets_its_expectation(entry: dict[str, Any], tmp_path: Path) -> None:
    path = CORPUS / entry["path"]
    expected = entry["expected"]
    if expected == "not-a-session":
        assert classify_header(path) == "malformed"
        report = examine(path)
        assert report.classification == "not-a-session"
        assert "no 'version'" in report.findings[0].message
        return
    info = LogScanner(path).read_header()
    assert info is not None and info.version == 0
    copy = loaded_copy(path, tmp_path / "session")
    # The raw header holds the {{cwd}} placeholder (not absolute); the loaded one is fine.
    assert classify_header(copy) == "migration-required"
    output = tmp_path / "out.v4.jsonl"
    if expected == "restore":
        result = migrate_file(copy, output=output)
        assert result.status == "migrated"
        inspection = read_log(output)  # the model accepts the published log
        assert [event.seq for event in inspection.events] == list(range(result.events or 0))
        assert len(inspection.events) == result.events
        if "delegationDepth" not in info.value:
            assert inspection.header.delegation_depth == 0
        return
    reason = entry["reason_class"]
    if reason == "seq gap":
        with pytest.raises(CorruptLogError) as corrupt:
            migrate_file(copy, output=output)
        assert corrupt.value.line is not None
        assert "seq" in str(corrupt.value)
    else:
        with pytest.raises(MigrationRefusedError) as refused:
            migrate_file(copy, output=output)
        assert refused.value.rule == reason
        assert refused.value.path == str(copy)
    assert not output.exists()


def test_the_corpus_has_every_expected_outcome() -> None:
    files = json.loads(MANIFEST.read_text())["files"]
    assert len(files) == 157
    assert {entry["expected"] for entry in files} == {"restore", "refuse", "not-a-session"}
