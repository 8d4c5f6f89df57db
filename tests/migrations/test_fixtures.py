"""Every committed fixture through the real file pipeline, compared with its golden output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrate import classify_header, migrate_file
from dsh_store.restore import examine, read_log

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
VALID = sorted(path for path in (FIXTURES / "valid").iterdir() if path.is_dir())
REFUSED = sorted(path for path in (FIXTURES / "refused").iterdir() if path.is_dir())
DEMO = sorted(path for path in (FIXTURES / "demo").iterdir() if path.is_dir())


def _source(directory: Path) -> Path:
    (source,) = directory.glob("session*.jsonl")
    return source


def test_committed_fixtures_match_the_generator() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_fixtures.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fixtures up to date" in result.stdout


def test_fixtures_cover_every_version_and_both_outcomes() -> None:
    versions = {json.loads(_source(d).read_bytes().split(b"\n")[0])["version"] for d in VALID}
    assert versions == {0, 1, 2, 3, 4}
    assert {path.name.split("-")[0] for path in REFUSED} == {"0to1", "1to2", "2to3", "3to4"}
    demo_versions = [json.loads(_source(d).read_bytes().split(b"\n")[0])["version"] for d in DEMO]
    assert sorted(demo_versions) == [0, 1, 2, 3]


@pytest.mark.parametrize("directory", VALID, ids=lambda path: path.name)
def test_valid_fixture_migrates_to_its_golden_bytes(directory: Path, tmp_path: Path) -> None:
    source = _source(directory)
    golden = (directory / "expected.v4.jsonl").read_bytes()
    before = source.read_bytes()
    output = tmp_path / "out.jsonl"
    result = migrate_file(source, output=output)
    assert source.read_bytes() == before
    if classify_header(source) == "current":
        # A v4 log is already what the chain produces: migrating it is the identity, and
        # an output still receives it (a copy, published by the same protocol).
        assert before == golden
    assert result.status == "migrated"
    assert output.read_bytes() == golden
    assert result.events == golden.count(b"\n") - 1
    assert read_log(directory / "expected.v4.jsonl").classification == "ok"


@pytest.mark.parametrize("directory", REFUSED, ids=lambda path: path.name)
def test_refused_fixture_is_refused_with_its_rule(directory: Path, tmp_path: Path) -> None:
    source = _source(directory)
    expected = json.loads((directory / "expected.json").read_text())
    output = tmp_path / "out.jsonl"
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(source, output=output)
    error = caught.value
    assert (error.rule, error.edge, error.seq, error.event_type) == (
        expected["rule"],
        expected["edge"],
        expected["seq"],
        expected["eventType"],
    )
    assert error.path == str(source)
    assert f"[rule: {expected['rule']}]" in str(error)
    assert "the source log is unchanged" in str(error)
    assert list(tmp_path.iterdir()) == []  # no target, no temp left behind
    report = examine(source)
    assert report.classification == "refused"
    assert report.findings[0].rule == f"refused: {expected['rule']}"


@pytest.mark.parametrize("directory", DEMO, ids=lambda path: path.name)
def test_demo_sessions_migrate_cleanly(directory: Path, tmp_path: Path) -> None:
    copy = tmp_path / _source(directory).name
    copy.write_bytes(_source(directory).read_bytes())
    result = migrate_file(copy)
    assert result.status == "migrated"
    assert result.target == tmp_path / "session.v4.jsonl"
    assert read_log(result.target).classification == "ok"
