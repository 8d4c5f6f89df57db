"""The real V0 corpus through the installed console script: every file as its manifest says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import CORPUS, corpus_manifest, prepare_corpus_file, run_script
from tests.cli.schema_check import VerifyFile, errors, load_schema
from tests.conftest import shared_params

pytestmark = pytest.mark.requires("shared")

# The migrated corpus may hold an open turn or a torn tail; both still "restore".
RESTORED = {"ok", "needs-migration", "open-turn", "torn-tail"}


def _expected(entry: dict[str, object]) -> set[str]:
    if entry["expected"] == "restore":
        return RESTORED
    if entry["expected"] == "not-a-session":
        return {"not-a-session"}
    return {"corrupt"} if entry.get("reason_class") == "seq gap" else {"refused"}


@pytest.fixture(scope="module")
def corpus_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, VerifyFile]]:
    root = tmp_path_factory.mktemp("corpus")
    for entry in corpus_manifest():
        prepare_corpus_file(CORPUS / str(entry["path"]), root / str(entry["path"]))
    done = run_script("verify", root, "--json", "--jobs", "2")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert errors(document, load_schema("verify")) == []
    files = {str(Path(f["path"]).relative_to(root)): f for f in document["files"]}
    return root, files


def test_corpus_covers_every_manifest_entry(
    corpus_report: tuple[Path, dict[str, VerifyFile]],
) -> None:
    _, files = corpus_report
    assert set(files) == {str(entry["path"]) for entry in corpus_manifest()}


@pytest.mark.parametrize(
    "entry", shared_params(corpus_manifest), ids=lambda entry: str(entry["path"])
)
def test_corpus_file_is_classified_as_the_manifest_expects(
    entry: dict[str, object],
    corpus_report: tuple[Path, dict[str, VerifyFile]],
) -> None:
    _, files = corpus_report
    report = files[str(entry["path"])]
    assert report["classification"] in _expected(entry), report
    if entry["expected"] == "refuse" and entry.get("reason_class") != "seq gap":
        # The refusal comes last, after what the scanner noticed first (V0 headers lacking
        # delegationDepth get a header-missing-field finding).
        *noticed, refusal = report["findings"]
        assert refusal["rule"] == f"refused: {entry['reason_class']}"
        assert all(finding["rule"].startswith("header-") for finding in noticed), noticed
    if entry["expected"] == "restore":
        assert report["version"] == 0
        assert report["events"] is not None


def test_seq_gap_is_corrupt_with_its_location(
    corpus_report: tuple[Path, dict[str, VerifyFile]],
) -> None:
    _, files = corpus_report
    gaps = [e for e in corpus_manifest() if e.get("reason_class") == "seq gap"]
    assert gaps
    for entry in gaps:
        *noticed, finding = files[str(entry["path"])]["findings"]
        assert [noticed_finding["rule"] for noticed_finding in noticed] == ["header-missing-field"]
        assert finding["rule"] == "seq-gap"
        assert f"physical line {finding['line']}" in str(entry["reason"])
