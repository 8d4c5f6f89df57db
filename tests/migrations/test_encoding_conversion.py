"""``migrate --encoding raw|zstd``: a store's v4 logs re-encoded beside themselves, loss-free.

A raw log converted to zstd and back holds the same bytes; the source is kept as its
``.v4.bak``; a SIGKILL at every publish failpoint leaves whole files only, a session
directory the store refuses to read until a rerun (towards either encoding) finishes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_store.errors import (
    EncodingConversionPendingError,
    MigrationRefusedError,
    SessionLockedError,
)
from dsh_store.jsonl.zstd_codec import decode_log
from dsh_store.jsonl.zstd_frames import MAGIC
from dsh_store.migrate import migrate_file, migrate_store
from dsh_store.restore import read_log
from dsh_store.store import JsonlStore
from dsh_store.verify import verify_paths

pytest.importorskip("zstandard", reason="the zstd extra (zstandard) is not installed")

REPO = Path(__file__).resolve().parents[2]
CLOCK_MS = 1_700_000_000_000
V0_FIXTURE = REPO / "fixtures" / "valid" / "v0-packed-tool-round" / "session.jsonl"


def _store(root: Path, encoding: str, sessions: tuple[str, ...] = ("a", "b")) -> list[Path]:
    """Sessions with two durable batches each (a completed turn); their logs."""
    logs = []
    for session_id in sessions:
        store = JsonlStore(root, encoding=encoding, window_s=0, clock=lambda: CLOCK_MS)
        with store.new(session_id, cwd="/w") as live:
            live.append("turn/start", {"turn": 1})
            live.flush()
            live.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
            logs.append(live.path)
    return logs


def _files(directory: Path) -> dict[str, bytes]:
    """The files of a session directory by name, but the lock and the watermarks (which
    record the inode)."""
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.name != "session.lock" and not p.name.endswith(".durable")
    }


def test_a_raw_log_converted_to_zstd_and_back_keeps_its_bytes(tmp_path: Path) -> None:
    (raw,) = _store(tmp_path, "raw", ("a",))
    original = raw.read_bytes()
    result = migrate_file(raw, encoding="zstd")
    zstd = raw.with_name("session.v4.jsonl.zstd")
    assert (result.status, result.target, result.events) == ("migrated", zstd, 2)
    assert result.backup == raw.with_name("session.v4.jsonl.v4.bak")
    assert not raw.exists() and result.backup.read_bytes() == original
    assert zstd.read_bytes()[:4] == MAGIC and decode_log(zstd).raw == original
    assert read_log(zstd).classification == "ok"
    back = migrate_file(zstd, encoding="raw")
    assert (back.status, back.target) == ("migrated", raw)
    assert raw.read_bytes() == original and not zstd.exists()
    assert zstd.with_name("session.v4.jsonl.zstd.v4.bak").exists()
    assert migrate_file(raw, encoding="raw").status == "current"


def test_a_root_converts_and_the_store_follows_its_encoding(tmp_path: Path) -> None:
    logs = _store(tmp_path, "raw")
    before = {log.parent.name: log.read_bytes() for log in logs}
    dry = migrate_store(tmp_path, encoding="zstd", dry_run=True)
    assert [r.status for r in dry] == ["would-migrate", "would-migrate"]
    assert {log.parent.name: log.read_bytes() for log in logs} == before
    results = migrate_store(tmp_path, encoding="zstd")
    assert [r.status for r in results] == ["migrated", "migrated"]
    assert [r.status for r in migrate_store(tmp_path, encoding="zstd")] == ["current", "current"]
    store = JsonlStore(tmp_path)
    assert store.encoding == "zstd" and [h.id for h in store.list()] == ["a", "b"]
    with store.open("a") as live:
        live.append("turn/start", {"turn": 2})
        live.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    assert read_log(logs[0].with_name("session.v4.jsonl.zstd")).events[-1].type == "turn/end"
    assert [r.status for r in migrate_store(tmp_path, encoding="raw")] == ["migrated", "migrated"]
    assert logs[1].read_bytes() == before["b"]
    assert all(report.classification == "ok" for report in verify_paths([tmp_path]))


def test_an_older_store_log_is_upgraded_into_the_encoding_asked_for(tmp_path: Path) -> None:
    directory = tmp_path / "_no-cwd" / "s"
    directory.mkdir(parents=True)
    source = directory / "session.jsonl"
    source.write_bytes(V0_FIXTURE.read_bytes())
    result = migrate_file(source, encoding="zstd")
    assert result.target == directory / "session.v4.jsonl.zstd" and result.backup is None
    assert source.read_bytes() == V0_FIXTURE.read_bytes()
    expected = (V0_FIXTURE.parent / "expected.v4.jsonl").read_bytes()
    assert decode_log(result.target).raw == expected


def test_a_log_with_a_crash_tail_is_not_converted(tmp_path: Path) -> None:
    (raw,) = _store(tmp_path, "raw", ("a",))
    with open(raw, "ab") as log:
        log.write(b'{"type":"turn/sta')
    before = _files(raw.parent)
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(raw, encoding="zstd")
    assert caught.value.rule == "convert-torn-tail" and "dsh-store repair" in str(caught.value)
    assert _files(raw.parent) == before


def test_a_session_open_for_writing_is_not_converted(tmp_path: Path) -> None:
    (raw,) = _store(tmp_path, "raw", ("a",))
    with JsonlStore(tmp_path).open("a"), pytest.raises(SessionLockedError):
        migrate_file(raw, encoding="zstd")
    assert sorted(_files(raw.parent)) == ["session.v4.jsonl"]


def test_the_output_name_must_agree_with_the_encoding(tmp_path: Path) -> None:
    (raw,) = _store(tmp_path, "raw", ("a",))
    with pytest.raises(ValueError, match="names a raw log"):
        migrate_file(raw, output=tmp_path / "out.jsonl", encoding="zstd")
    out = tmp_path / "out.jsonl.zstd"
    result = migrate_file(raw, output=out, encoding="zstd")
    assert (result.status, result.target) == ("migrated", out)
    assert decode_log(out).raw == raw.read_bytes()


CHILD = (
    "import sys\n"
    "from dsh_store.migrate import migrate_file\n"
    "migrate_file(sys.argv[1], encoding=sys.argv[2])\n"
)

KILL_POINTS = [
    "migrate.before-fsync",
    "migrate.before-link",
    "migrate.after-link",
    "migrate.before-retire",
]


def _uninterrupted(tmp_path: Path) -> dict[str, bytes]:
    """The session directory an uninterrupted raw -> zstd conversion leaves."""
    (raw,) = _store(tmp_path / "expected", "raw", ("a",))
    migrate_file(raw, encoding="zstd")
    return _files(raw.parent)


@pytest.mark.parametrize("towards", ["zstd", "raw"])
@pytest.mark.parametrize("failpoint", KILL_POINTS)
def test_a_conversion_killed_at_a_publish_step_converges(
    tmp_path: Path, failpoint: str, towards: str
) -> None:
    (raw,) = _store(tmp_path / "killed", "raw", ("a",))
    original = raw.read_bytes()
    zstd = raw.with_name("session.v4.jsonl.zstd")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_STORE_FAILPOINT")}
    env |= {"DSH_STORE_FAILPOINT": failpoint, "PYTHONPATH": str(REPO)}
    child = subprocess.run([sys.executable, "-c", CHILD, str(raw), "zstd"], cwd=REPO, env=env)
    assert child.returncode == -signal.SIGKILL, "the failpoint was not reached"
    # Only whole files: the source as it was, and the target complete or absent.
    assert raw.read_bytes() == original
    published = zstd.exists()
    assert published == (failpoint in ("migrate.after-link", "migrate.before-retire"))
    if published:
        assert decode_log(zstd).raw == original
        with pytest.raises(EncodingConversionPendingError) as caught:
            JsonlStore(tmp_path / "killed").inspect("a")
        assert str(zstd) in str(caught.value) and "--encoding" in str(caught.value)
        (report,) = verify_paths([tmp_path / "killed"])
        assert "encoding-conversion" in [finding.rule for finding in report.findings]
    # A rerun towards either encoding finishes the conversion; the walk of
    # `dsh-store migrate DIR` picks the raw log of the two, and so does this rerun.
    rerun = migrate_file(raw, encoding=towards)
    assert rerun.status in ("migrated", "current")
    for temp in raw.parent.glob("*.tmp"):  # a kill before the link leaves its temp
        temp.unlink()
    if towards == "zstd":
        assert _files(raw.parent) == _uninterrupted(tmp_path)
    else:
        assert raw.read_bytes() == original and not zstd.exists()
    final = JsonlStore(tmp_path / "killed")
    assert final.encoding == towards and final.inspect("a").classification == "ok"
