"""Leftover publish temps: verify reports them, repair deletes the stale ones (real files)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dsh_store.repair
from dsh_store.bulk import RepairOutcome, repair_paths
from dsh_store.cli.repair import repair_text
from dsh_store.errors import SessionLockedError
from dsh_store.jsonl import files, layout
from dsh_store.migrate import migrate_file
from dsh_store.repair import TEMP_GRACE_S, repair_file
from dsh_store.restore import examine
from dsh_store.store import JsonlStore
from dsh_store.verify import by_directory, counts_as_failure, leftover_temps, verify_paths
from tests.cli.conftest import record_session, snapshot_tree, write_header

REPO = Path(__file__).resolve().parents[2]
V0_FIXTURE = REPO / "fixtures" / "valid" / "v0-packed-tool-round" / "session.jsonl"
HOUR = 3600.0

# Records a one-turn session through the store; run with a failpoint, it dies mid-publish.
RECORD_CHILD = (
    "import sys\n"
    "from pathlib import Path\n"
    "from tests.cli.conftest import record_session\n"
    "record_session(Path(sys.argv[1]), 'crashed', turns=1)\n"
)
MIGRATE_CHILD = (
    "import sys\nfrom dsh_store.migrate import migrate_file\nmigrate_file(sys.argv[1])\n"
)


def _killed_at(failpoint: str, child: str, argument: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_STORE_")}
    env.update(DSH_STORE_FAILPOINT=failpoint, PYTHONPATH=str(REPO))
    process = subprocess.run(
        [sys.executable, "-c", child, str(argument)], env=env, cwd=REPO, timeout=120, check=False
    )
    assert process.returncode == -signal.SIGKILL


def _temps(directory: Path) -> list[Path]:
    return sorted(path for path in directory.iterdir() if layout.temp_final_name(path.name))


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def leave_temp(beside: Path, *, age_s: float, final: str | None = None) -> Path:
    """A publish temp named by ``layout.temp_path`` holding real log bytes, ``age_s`` old."""
    temp = layout.temp_path(beside.with_name(final or beside.name), secrets.token_hex(6))
    temp.write_bytes(beside.read_bytes())
    _age(temp, age_s)
    return temp


# --- real crashes ----------------------------------------------------------------------------


def test_a_first_publish_killed_after_its_link_leaves_a_temp_of_the_log(tmp_path: Path) -> None:
    _killed_at("materialize.after-link", RECORD_CHILD, tmp_path)
    log = tmp_path / layout.NO_CWD_DIR / "crashed" / layout.LOG_NAME
    (temp,) = _temps(log.parent)
    assert layout.is_temp_of(layout.LOG_NAME, temp.name)
    assert temp.read_bytes() == log.read_bytes()

    assert temp.samefile(log)  # killed between the link and the unlink of the temp name

    (report,) = verify_paths([tmp_path])
    assert report.classification == examine(log).classification == "open-turn"
    leftover = report.findings[-1]
    assert leftover.rule == "leftover-temp"
    assert leftover.message == (
        f"{temp.name}: a second name of this log ({log.stat().st_size} bytes, no space of its "
        "own) left by an interrupted publish; dsh-store repair deletes it"
    )
    assert (leftover.line, leftover.offset, leftover.seq) == (None, None, None)
    assert temp.exists()

    # Its publish is over, so its age does not matter (its mtime is the live log's).
    plan = repair_file(log)
    assert plan.applied and plan.closers and plan.stale_temps == (temp,) and not plan.fresh_temps
    assert _temps(log.parent) == []
    (report,) = verify_paths([tmp_path])
    assert report.classification == "ok" and report.findings == ()


def test_a_migration_killed_before_its_link_leaves_a_temp_of_its_source(tmp_path: Path) -> None:
    # Filed where its header (id fixture-session, cwd /work/project) puts it.
    session = layout.session_dir(tmp_path / "store", "fixture-session", "/work/project")
    session.mkdir(parents=True)
    source = session / "session.jsonl"
    shutil.copyfile(V0_FIXTURE, source)
    _killed_at("migrate.before-link", MIGRATE_CHILD, source)
    (temp,) = _temps(session)
    assert layout.is_temp_of(layout.LOG_NAME, temp.name)  # named after the target
    assert not (session / layout.LOG_NAME).exists()

    (report,) = verify_paths([tmp_path / "store"])
    assert report.path == str(source) and report.classification == "needs-migration"
    assert [f.rule for f in report.findings] == ["needs-migration", "leftover-temp"]
    assert report.findings[-1].message.startswith(f"{temp.name}: {temp.stat().st_size} bytes")

    _age(temp, 2 * 24 * HOUR)
    (result,) = [outcome.to_json() for outcome in repair_paths([tmp_path / "store"])]
    assert result["status"] == "repaired" and result["deletedTemps"] == [str(temp)]
    assert not temp.exists() and source.read_bytes() == V0_FIXTURE.read_bytes()
    assert migrate_file(source).status == "migrated"
    assert _temps(session) == []


# --- ownership --------------------------------------------------------------------------------


def test_temps_belong_to_their_log_or_to_the_source_of_an_unlinked_upgrade() -> None:
    token = "0a1b2c3d4e5f"
    v4_temp = f"session.v4.jsonl.{token}.tmp"
    assert layout.temp_owner(v4_temp, {"session.v4.jsonl", "session.jsonl"}) == "session.v4.jsonl"
    assert layout.temp_owner(v4_temp, {"session.v2.jsonl", "session.jsonl"}) == "session.v2.jsonl"
    assert layout.temp_owner(v4_temp, {"session.lock"}) is None  # a new session never linked
    assert layout.temp_owner(f"out.jsonl.{token}.tmp", {"session.jsonl"}) is None
    assert layout.temp_owner(f"out.jsonl.{token}.tmp", {"out.jsonl"}) == "out.jsonl"
    assert layout.temp_owner("session.v4.jsonl.tmp", {"session.v4.jsonl"}) is None


# --- verify -----------------------------------------------------------------------------------


def test_verify_reports_temps_never_deletes_and_keeps_the_classification(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s1", turns=1)
    stale = leave_temp(log, age_s=3 * HOUR)
    fresh = leave_temp(log, age_s=30)
    other = leave_temp(log, age_s=3 * HOUR, final="notes.jsonl")  # belongs to no log
    before = snapshot_tree(tmp_path)

    (report,) = verify_paths([tmp_path])
    assert report.classification == "ok"
    by_name = {f.message.split(":")[0]: f for f in report.findings}
    assert set(by_name) == {stale.name, fresh.name} and other.name not in by_name
    assert by_name[stale.name].message == (
        f"{stale.name}: {stale.stat().st_size} bytes left by an interrupted publish 3 h ago; "
        "dsh-store repair deletes it"
    )
    assert by_name[fresh.name].message.endswith("deletes it once it is 10 min old")
    assert all(f.rule == "leftover-temp" for f in report.findings)
    assert not counts_as_failure(report)
    assert counts_as_failure(report, strict=True)
    assert verify_paths([tmp_path], jobs=2) == [report]
    assert snapshot_tree(tmp_path) == before


def test_each_directory_is_listed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = []
    for directory in ("a", "b"):
        for index in range(30):
            write_header(tmp_path / directory / f"log{index}.jsonl", 4, f"{directory}{index}")
            logs.append(tmp_path / directory / f"log{index}.jsonl")
    temp = leave_temp(logs[5], age_s=HOUR)
    assert list(by_directory(map(str, logs))) == [str(tmp_path / "a"), str(tmp_path / "b")]

    listed: list[str] = []
    real_scandir = os.scandir

    def counting_scandir(path: str) -> os._ScandirIterator[str]:
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    found = leftover_temps(map(str, logs))
    assert sorted(listed) == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert {log: [t.path for t in temps] for log, temps in found.items()} == {
        str(logs[5]): [str(temp)]
    }


# --- repair -----------------------------------------------------------------------------------


def test_repair_deletes_stale_temps_keeps_fresh_ones_and_fsyncs_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = record_session(tmp_path, "s1", turns=1)
    loose = log.with_name("other.jsonl")
    write_header(loose, 4, "other")
    stale = leave_temp(log, age_s=TEMP_GRACE_S + 5)
    fresh = leave_temp(log, age_s=TEMP_GRACE_S - 60)
    not_ours = leave_temp(loose, age_s=3 * HOUR)
    log_bytes = log.read_bytes()
    synced: list[str] = []
    real_fsync_dir = files.fsync_dir

    def counting_fsync_dir(path: str | os.PathLike[str]) -> None:
        synced.append(os.fspath(path))
        real_fsync_dir(path)

    monkeypatch.setattr("dsh_store.repair.fsync_dir", counting_fsync_dir)
    plan = repair_file(log)
    assert plan.applied and plan.closers == () and plan.truncate_at is None
    assert (plan.stale_temps, plan.fresh_temps) == ((stale,), (fresh,))
    assert synced == [str(log.parent)]
    assert not stale.exists() and fresh.exists() and not_ours.exists()
    assert log.read_bytes() == log_bytes
    assert repair_text(RepairOutcome.of_plan(plan)) == (
        f"{log}: repaired (ok)\n"
        f"  deleted leftover temp {stale}\n"
        f"  kept recent temp {fresh} (a publish may still be writing it; deleted once 10 "
        "minutes old)"
    )

    again = repair_file(log)
    assert not again.applied and again.fresh_temps == (fresh,) and again.stale_temps == ()
    assert repair_text(RepairOutcome.of_plan(again)).startswith(
        f"{log}: ok, nothing to repair\n  kept recent temp "
    )
    assert synced == [str(log.parent)]  # nothing deleted, nothing to sync


def test_dry_run_lists_what_it_would_delete_and_deletes_nothing(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s1", turns=1, open_turn=True)
    stale = leave_temp(log, age_s=HOUR)
    before = snapshot_tree(tmp_path)
    plan = repair_file(log, dry_run=True)
    assert not plan.applied and plan.stale_temps == (stale,) and plan.closers
    assert repair_text(RepairOutcome.of_plan(plan)).endswith(f"\n  delete leftover temp {stale}")
    (result,) = [outcome.to_json() for outcome in repair_paths([log], dry_run=True)]
    assert result["status"] == "would-repair" and result["deletedTemps"] == [str(stale)]
    assert snapshot_tree(tmp_path) == before

    plan = repair_file(log)  # the log repair and the deletion in one run
    assert plan.applied and plan.closers and plan.stale_temps == (stale,)
    assert not stale.exists() and examine(log).classification == "ok"


def test_statuses_when_only_temps_are_found(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s1", turns=1)
    fresh = leave_temp(log, age_s=5)
    (result,) = [outcome.to_json() for outcome in repair_paths([log])]
    assert (result["status"], result["deletedTemps"], result["keptTemps"]) == (
        "clean",
        [],
        [str(fresh)],
    )
    (result,) = [outcome.to_json() for outcome in repair_paths([log], dry_run=True)]
    assert result["status"] == "clean"
    _age(fresh, HOUR)
    (result,) = [outcome.to_json() for outcome in repair_paths([log], dry_run=True)]
    assert result["status"] == "would-repair"
    (result,) = [outcome.to_json() for outcome in repair_paths([log])]
    assert (result["status"], result["deletedTemps"], result["keptTemps"]) == (
        "repaired",
        [str(fresh)],
        [],
    )


def test_a_temp_written_to_after_it_was_listed_is_kept(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s1", turns=1)
    temp = leave_temp(log, age_s=5)
    (listed,) = leftover_temps([str(log)])[str(log)]
    stale_then = listed._replace(mtime=listed.mtime - HOUR)
    deleted, kept = dsh_store.repair._delete_stale([stale_then], TEMP_GRACE_S)
    assert (deleted, kept) == ((), (temp,)) and temp.exists()


def test_an_open_writer_makes_repair_fail_and_delete_nothing(tmp_path: Path) -> None:
    log = record_session(tmp_path, "s1", turns=1)
    stale = leave_temp(log, age_s=HOUR)
    store = JsonlStore(tmp_path, window_s=0)
    with store.open("s1") as live:
        live.flush()  # opening appends an end-seed event in the background
        before = snapshot_tree(tmp_path)
        with pytest.raises(SessionLockedError):
            repair_file(log)
        (result,) = [outcome.to_json() for outcome in repair_paths([log])]
        assert result["status"] == "refused" and result["deletedTemps"] == []
        assert snapshot_tree(tmp_path) == before
        assert stale.exists()
    assert repair_file(log).stale_temps == (stale,)
    assert not stale.exists()
