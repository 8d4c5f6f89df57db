"""SIGKILL a real migrating process at every failpoint and at random moments.

After each kill the source bytes are unchanged (or, in place after the replace, the
``.bak`` holds them), the target is absent or a complete, verified v4 log, and a rerun
converges to the same final state.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_store.migrate import MIGRATE_FAILPOINTS, migrate_file, verify_published

from . import bigv0

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "valid" / "v0-packed-tool-round"
GOLDEN = (FIXTURE / "expected.v4.jsonl").read_bytes()
CHILD = (
    "import sys\n"
    "from dsh_store.migrate import migrate_file\n"
    "mode = sys.argv[2]\n"
    "migrate_file(sys.argv[1], in_place=(mode == 'in-place'))\n"
)


def _run(source: Path, mode: str, failpoint: str | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("DSH_STORE_FAILPOINT", None)
    if failpoint is not None:
        env["DSH_STORE_FAILPOINT"] = failpoint
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen([sys.executable, "-c", CHILD, str(source), mode], env=env, cwd=REPO)


def _copy(tmp_path: Path, original: Path, name: str) -> Path:
    directory = tmp_path / "sess"
    directory.mkdir()
    shutil.copyfile(original, directory / name)
    return directory / name


def _check_beside(source: Path, original: bytes, expected: bytes) -> bool:
    """Assert the crash invariants of a beside-source publish; True if the target exists."""
    assert source.read_bytes() == original
    target = source.parent / "session.v4.jsonl"
    if target.exists():
        assert target.read_bytes() == expected
        verify_published(target)
        return True
    return False


def _check_in_place(source: Path, original: bytes, expected: bytes) -> bool:
    """In place: the file is the original, or the complete upgrade with the original in .bak."""
    backup = source.with_name(source.name + ".v0.bak")
    if backup.exists():
        assert backup.read_bytes() == original
    current = source.read_bytes()
    if current == original:
        return False
    assert current == expected
    verify_published(source)
    assert backup.read_bytes() == original
    return True


@pytest.mark.parametrize(
    "failpoint", ["migrate.before-fsync", "migrate.before-link", "migrate.after-link"]
)
def test_kill_at_a_publish_failpoint(tmp_path: Path, failpoint: str) -> None:
    source = _copy(tmp_path, FIXTURE / "session.jsonl", "session.jsonl")
    original = source.read_bytes()
    child = _run(source, "beside", failpoint)
    assert child.wait(timeout=60) == -signal.SIGKILL
    published = _check_beside(source, original, GOLDEN)
    assert published == (failpoint == "migrate.after-link")
    rerun = migrate_file(source)
    assert rerun.status == ("current" if published else "migrated")
    assert _check_beside(source, original, GOLDEN)
    leftovers = sorted(p.name for p in source.parent.iterdir() if p.name.endswith(".tmp"))
    # A kill may leave one publishing temp (named <target>.<token>.tmp, ignored by readers).
    assert len(leftovers) <= 1
    assert all(name.startswith("session.v4.jsonl.") for name in leftovers)


@pytest.mark.parametrize("failpoint", ["migrate.before-fsync", "migrate.before-replace"])
def test_kill_during_an_in_place_migration(tmp_path: Path, failpoint: str) -> None:
    source = _copy(tmp_path, FIXTURE / "session.jsonl", "old.jsonl")
    original = source.read_bytes()
    child = _run(source, "in-place", failpoint)
    assert child.wait(timeout=60) == -signal.SIGKILL
    assert not _check_in_place(source, original, GOLDEN)
    backup = source.with_name("old.jsonl.v0.bak")
    assert backup.exists() == (failpoint == "migrate.before-replace")
    result = migrate_file(source, in_place=True)
    assert result.status == "migrated"
    assert _check_in_place(source, original, GOLDEN)


def test_every_failpoint_of_migrate_is_exercised() -> None:
    assert set(MIGRATE_FAILPOINTS) == {
        "migrate.before-fsync",
        "migrate.before-link",
        "migrate.after-link",
        "migrate.before-replace",
        "migrate.before-retire",  # tests/migrations/test_encoding_conversion.py
    }


@pytest.mark.parametrize("mode", ["beside", "in-place"])
def test_kill_at_random_moments(tmp_path: Path, mode: str) -> None:
    big = bigv0.write(tmp_path / "big.jsonl", 2 * 1024 * 1024)
    reference = tmp_path / "ref"
    reference.mkdir()
    shutil.copyfile(big, reference / "session.jsonl")
    start = time.monotonic()
    migrate_file(reference / "session.jsonl")
    # Kill moments spread over the whole run, including interpreter start-up.
    span = (time.monotonic() - start) + 0.4
    expected = (reference / "session.v4.jsonl").read_bytes()
    original = big.read_bytes()
    rng = random.Random(20260916)
    check = _check_beside if mode == "beside" else _check_in_place
    for attempt in range(5):
        directory = tmp_path / f"run{attempt}"
        directory.mkdir()
        name = "session.jsonl" if mode == "beside" else "old.jsonl"
        source = directory / name
        shutil.copyfile(big, source)
        child = _run(source, mode, None)
        time.sleep(rng.uniform(0.05, span))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        check(source, original, expected)
        migrate_file(source, in_place=(mode == "in-place"))
        assert check(source, original, expected)


LENIENT_CHILD = (
    "import sys\n"
    "from dsh_store.migrate import migrate_file\n"
    "migrate_file(sys.argv[1], lenient=True)\n"
)


@pytest.mark.parametrize(
    "failpoint", ["migrate.before-fsync", "migrate.before-link", "migrate.after-link"]
)
def test_kill_during_a_lenient_migration(tmp_path: Path, failpoint: str) -> None:
    """The lenient opt-in publishes through the same protocol: the same crash story."""
    import json

    from dsh_store.migrate import upgrade

    from .early_logs import header
    from .test_lenient import user_first_log

    directory = tmp_path / "sess"
    directory.mkdir()
    source = directory / "session.jsonl"
    rows = [header(), *user_first_log()]
    source.write_bytes(b"".join(json.dumps(row).encode() + b"\n" for row in rows))
    original = source.read_bytes()
    v4_header, events = upgrade(rows[0], rows[1:], lenient=True)
    expected = v4_header.encode() + b"".join(event.line for event in events)
    env = {**os.environ, "DSH_STORE_FAILPOINT": failpoint, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", LENIENT_CHILD, str(source)], env=env, cwd=REPO)
    assert child.wait(timeout=60) == -signal.SIGKILL
    published = _check_beside(source, original, expected)
    assert published == (failpoint == "migrate.after-link")
    rerun = migrate_file(source, lenient=True)
    assert rerun.status == ("current" if published else "migrated")
    assert _check_beside(source, original, expected)
    assert b'"type":"migration/note"' in expected


@pytest.mark.parametrize("target", ["file", "dangling"])
def test_in_place_through_a_symlink_is_refused_before_any_failpoint(
    tmp_path: Path, target: str
) -> None:
    """A real process armed to die at the first write is refused first: nothing changes."""
    directory = tmp_path / "sess"
    directory.mkdir()
    real = directory / "real.jsonl"
    if target == "file":
        shutil.copyfile(FIXTURE / "session.jsonl", real)
    link = directory / "old.jsonl"
    link.symlink_to("real.jsonl")
    before = sorted(p.name for p in directory.iterdir())
    child = _run(link, "in-place", "migrate.before-fsync")
    assert child.wait(timeout=60) == 1  # the refusal's traceback, not the failpoint's SIGKILL
    assert sorted(p.name for p in directory.iterdir()) == before
    assert link.is_symlink() and os.readlink(link) == "real.jsonl"
    if target == "file":
        assert real.read_bytes() == (FIXTURE / "session.jsonl").read_bytes()
