"""Orphan publish temps: a first publish killed before its link, whose log was never created.

Nothing in such a temp was acknowledged (the first flush never returned), but it is a real
file in the store: verify lists it, and repair deletes it once it is stale.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dsh_store.cli import main
from dsh_store.jsonl import layout
from dsh_store.jsonl.lock import SessionLock
from dsh_store.repair import delete_orphan_temps
from dsh_store.verify import NoLogsError, orphan_temps_in, verify_paths, verify_tree
from tests.cli.conftest import record_session
from tests.cli.schema_check import errors, load_schema

from .test_leftover_temps import HOUR, RECORD_CHILD, _age, _killed_at, _temps


def _orphaned_session(root: Path) -> Path:
    """Kill a new session's first publish before its link; return the temp it left."""
    _killed_at("materialize.before-link", RECORD_CHILD, root)
    directory = root / layout.NO_CWD_DIR / "crashed"
    assert not (directory / layout.LOG_NAME).exists()
    (temp,) = _temps(directory)
    assert temp.stat().st_size > 0
    return temp


def test_a_first_publish_killed_before_its_link_leaves_an_orphan_that_verify_lists(
    tmp_path: Path,
) -> None:
    temp = _orphaned_session(tmp_path)
    other = record_session(tmp_path, "fine")
    reports, orphans = verify_tree([tmp_path])
    assert [report.path for report in reports] == [str(other)]
    assert [report.findings for report in reports] == [()]  # not attributed to another log
    assert [(orphan.path, orphan.size) for orphan in orphans] == [(str(temp), temp.stat().st_size)]


def test_a_tree_holding_only_an_orphan_is_not_a_usage_error(tmp_path: Path) -> None:
    temp = _orphaned_session(tmp_path)
    reports, orphans = verify_tree([tmp_path])
    assert reports == [] and [orphan.path for orphan in orphans] == [str(temp)]
    with pytest.raises(NoLogsError):  # the log-only API keeps its contract
        verify_paths([tmp_path])
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoLogsError):  # a directory with nothing at all is still a usage error
        verify_tree([tmp_path / "empty"])


def test_orphans_are_temps_whose_final_name_and_generations_are_absent(tmp_path: Path) -> None:
    names = [
        "session.v4.jsonl.0123456789ab.tmp",  # orphan: no generation log here
        "out.jsonl.0123456789ab.tmp",  # orphan: out.jsonl absent
        "kept.jsonl.0123456789ab.tmp",  # owned: kept.jsonl exists
        "kept.jsonl",
        "session.lock",
        "notes.tmp",  # not a publish temp name
    ]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "link.jsonl.0123456789ab.tmp").symlink_to(tmp_path / "kept.jsonl")
    found = [Path(orphan.path).name for orphan in orphan_temps_in(str(tmp_path), names)]
    assert found == ["out.jsonl.0123456789ab.tmp", "session.v4.jsonl.0123456789ab.tmp"]
    # Beside a generation, a generation temp is that log's (a migration's), not an orphan.
    assert orphan_temps_in(str(tmp_path), [*names, "session.v2.jsonl"]) == [
        orphan
        for orphan in orphan_temps_in(str(tmp_path), names)
        if Path(orphan.path).name == "out.jsonl.0123456789ab.tmp"
    ]


def test_cli_verify_lists_orphans_and_fails_only_with_strict(tmp_path: Path) -> None:
    runner = CliRunner()

    def invoke(*args: str | Path) -> Result:
        return runner.invoke(main, [str(arg) for arg in args])

    temp = _orphaned_session(tmp_path)
    _age(temp, 2 * HOUR)
    text = invoke("verify", tmp_path)
    assert text.exit_code == 0, text.output
    assert f"{temp}: orphan temp" in text.stdout and "dsh-store repair deletes it" in text.stdout
    assert "0 file(s): none; 1 orphan temp(s); all pass" in text.stdout
    strict = invoke("verify", tmp_path, "--strict")
    assert strict.exit_code == 1 and "orphan temp FAIL" in strict.stdout
    document = json.loads(invoke("verify", tmp_path, "--json").stdout)
    assert errors(document, load_schema("verify")) == []
    (listed,) = document["orphanTemps"]
    assert listed["path"] == str(temp) and listed["bytes"] == temp.stat().st_size
    assert listed["ageSeconds"] >= 2 * HOUR - 60
    github = invoke("verify", tmp_path, "--format", "github").stdout
    assert github.startswith(f"::warning file={temp},title=leftover-temp::")


def test_repair_deletes_a_stale_orphan_under_the_session_lock_and_keeps_a_fresh_one(
    tmp_path: Path,
) -> None:
    temp = _orphaned_session(tmp_path)
    _, orphans = verify_tree([tmp_path])
    assert delete_orphan_temps(orphans) == [(temp, "kept")]  # seconds old: maybe still written
    _age(temp, 2 * HOUR)
    _, orphans = verify_tree([tmp_path])
    assert delete_orphan_temps(orphans, dry_run=True) == [(temp, "would-delete")]
    assert temp.exists()
    with SessionLock(temp.parent, "crashed"):  # a writer of that session is at work
        assert delete_orphan_temps(orphans) == [(temp, "kept")]
    assert delete_orphan_temps(orphans) == [(temp, "deleted")]
    assert not temp.exists()
    assert sorted(path.name for path in temp.parent.iterdir()) == ["session.lock"]


def test_repair_keeps_an_orphan_that_a_log_came_to_own(tmp_path: Path) -> None:
    temp = _orphaned_session(tmp_path)
    _age(temp, 2 * HOUR)
    _, orphans = verify_tree([tmp_path])
    # Between the listing and the repair, the session's writer published its log.
    (temp.parent / layout.LOG_NAME).write_bytes(temp.read_bytes())
    assert delete_orphan_temps(orphans) == [(temp, "kept")]
    assert temp.exists()


def test_cli_repair_deletes_stale_orphans_and_reports_them(tmp_path: Path) -> None:
    temp = _orphaned_session(tmp_path)
    other = record_session(tmp_path, "fine")
    runner = CliRunner()
    fresh = runner.invoke(main, ["repair", str(tmp_path)])
    assert fresh.exit_code == 0 and f"{temp}: kept recent orphan temp" in fresh.stdout
    _age(temp, 2 * HOUR)
    planned = json.loads(
        runner.invoke(main, ["repair", str(tmp_path), "--dry-run", "--json"]).stdout
    )
    assert errors(planned, load_schema("repair")) == []
    assert [(r["path"], r["status"], r["deletedTemps"]) for r in planned["files"]] == [
        (str(other), "clean", []),
        (str(temp), "would-repair", [str(temp)]),
    ]
    assert temp.exists()
    done = runner.invoke(main, ["repair", str(tmp_path)])
    assert done.exit_code == 0 and f"{temp}: deleted orphan temp" in done.stdout
    assert not temp.exists()
    after = runner.invoke(main, ["verify", str(tmp_path), "--strict"])
    assert after.exit_code == 0, after.stdout  # nothing left over
