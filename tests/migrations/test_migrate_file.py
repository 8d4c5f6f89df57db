"""migrate_file: publishing beside, --output, --in-place, dry runs, reruns, memory bound."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest

from dsh_store.errors import (
    ConcurrentModificationError,
    CorruptLogError,
    EventValidationError,
    MigrationRefusedError,
    NotASessionError,
    UnsupportedVersionError,
)
from dsh_store.jsonl import files
from dsh_store.migrate import migrate_file, migrate_store, verify_published
from dsh_store.model import Session, SessionEvent, SessionHeader
from dsh_store.model.stream_check import StreamCheck, check_stream
from dsh_store.restore import read_log

from . import bigv0
from .store_logs import VALID, fixture_copy


def _golden(fixture: str = "v0-basic") -> bytes:
    return (VALID / fixture / "expected.v4.jsonl").read_bytes()


def test_publishes_beside_the_untouched_source(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path)
    before, inode = source.read_bytes(), source.stat().st_ino
    result = migrate_file(source)
    target = source.parent / "session.v4.jsonl"
    assert (result.status, result.source_version, result.target) == ("migrated", 0, target)
    assert target.read_bytes() == _golden()
    assert (source.read_bytes(), source.stat().st_ino) == (before, inode)
    assert sorted(p.name for p in source.parent.iterdir()) == ["session.jsonl", "session.v4.jsonl"]
    assert target.stat().st_mode & 0o777 == 0o600
    assert result.to_json()["target"] == str(target)


def test_a_rerun_accepts_its_own_earlier_publication(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path)
    migrate_file(source)
    target = source.parent / "session.v4.jsonl"
    with open(target, "ab") as log:  # a store appended to it since
        log.write(b'{"type":"session/end-seed","seq":16,"time":1780000000290,"data":{}}\n')
    again = migrate_file(source)
    assert again.status == "current"
    assert again.target == target
    assert sorted(p.name for p in source.parent.iterdir()) == ["session.jsonl", "session.v4.jsonl"]


def test_an_unrelated_target_is_never_overwritten(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path)
    target = source.parent / "session.v4.jsonl"
    target.write_bytes(b"someone else's file\n")
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(source)
    assert caught.value.rule == "target-exists"
    assert "migration never overwrites" in str(caught.value)
    assert target.read_bytes() == b"someone else's file\n"
    assert sorted(p.name for p in source.parent.iterdir()) == ["session.jsonl", "session.v4.jsonl"]


def test_output_goes_where_asked(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path, "v2-system-prompt-changes")
    output = tmp_path / "out" / "upgraded.jsonl"
    output.parent.mkdir()
    result = migrate_file(source, output=output)
    assert result.target == output
    assert output.read_bytes() == _golden("v2-system-prompt-changes")
    assert not (source.parent / "session.v4.jsonl").exists()


def test_a_loose_file_needs_output_or_in_place(tmp_path: Path) -> None:
    loose = tmp_path / "old-log.jsonl"
    shutil.copyfile(VALID / "v0-basic" / "session.jsonl", loose)
    with pytest.raises(NotASessionError, match="pass --output OUT or --in-place"):
        migrate_file(loose)
    with pytest.raises(ValueError, match="either output or in_place"):
        migrate_file(loose, output=tmp_path / "x", in_place=True)


def test_in_place_keeps_one_backup_and_replaces_atomically(tmp_path: Path) -> None:
    loose = tmp_path / "old-log.jsonl"
    shutil.copyfile(VALID / "v1-basic" / "session.v1.jsonl", loose)
    before = loose.read_bytes()
    result = migrate_file(loose, in_place=True)
    backup = tmp_path / "old-log.jsonl.v1.bak"
    assert (result.status, result.backup, result.target) == ("migrated", backup, loose)
    assert backup.read_bytes() == before
    assert loose.read_bytes() == _golden("v1-basic")
    assert migrate_file(loose, in_place=True).status == "current"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old-log.jsonl", "old-log.jsonl.v1.bak"]


def test_in_place_never_replaces_a_foreign_backup(tmp_path: Path) -> None:
    loose = tmp_path / "old.jsonl"
    shutil.copyfile(VALID / "v0-basic" / "session.jsonl", loose)
    (tmp_path / "old.jsonl.v0.bak").write_bytes(b"precious\n")
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(loose, in_place=True)
    assert caught.value.rule == "backup-exists"
    assert "already exists with other content" in str(caught.value)
    assert (tmp_path / "old.jsonl.v0.bak").read_bytes() == b"precious\n"
    assert loose.read_bytes() == (VALID / "v0-basic" / "session.jsonl").read_bytes()


def test_dry_run_checks_everything_and_writes_nothing(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path, "v0-chunk-attempts")
    result = migrate_file(source, dry_run=True)
    assert result.status == "would-migrate"
    assert result.events == _golden("v0-chunk-attempts").count(b"\n") - 1
    assert sorted(p.name for p in source.parent.iterdir()) == ["session.jsonl"]


def test_dry_run_reports_a_model_rule_as_a_refusal(tmp_path: Path) -> None:
    source = tmp_path / "session.jsonl"
    source.write_bytes(
        b'{"type":"session","version":0,"id":"a","createdAt":1,"delegationDepth":0}\n'
        b'{"type":"step/start","seq":0,"time":1,"data":{"turn":1,"step":1}}\n'
    )
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(source, dry_run=True)
    assert (caught.value.rule, caught.value.seq, caught.value.event_type) == (
        "outside-turn",
        0,
        "step/start",
    )
    with pytest.raises(MigrationRefusedError) as published:
        migrate_file(source)
    assert published.value.rule == "outside-turn"
    assert published.value.path == str(source)
    assert "breaks a v4 rule" in str(published.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.jsonl"]


def test_typed_errors_for_files_that_are_not_migratable(tmp_path: Path) -> None:
    empty = tmp_path / "session.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(NotASessionError, match="empty"):
        migrate_file(empty)
    newer = tmp_path / "session.v9.jsonl"
    newer.write_bytes(b'{"type":"session","version":9,"id":"a"}\n')
    with pytest.raises(UnsupportedVersionError, match="upgrade dsh-store"):
        migrate_file(newer)
    corrupt = tmp_path / "sess" / "session.jsonl"
    corrupt.parent.mkdir()
    lines = (VALID / "v0-basic" / "session.jsonl").read_bytes().split(b"\n")
    lines[2] = b"{torn"
    corrupt.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptLogError) as caught:
        migrate_file(corrupt)
    assert caught.value.line == 3
    assert not (corrupt.parent / "session.v4.jsonl").exists()


def test_a_source_changing_during_migration_is_detected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fixture_copy(tmp_path)
    import dsh_store.migrate as migrate

    real = migrate._require_written

    def read_back_then_touch(temp: Path, written: object) -> None:
        real(temp, written)  # type: ignore[arg-type]
        with open(source, "ab") as log:
            log.write(b"\n")

    monkeypatch.setattr(migrate, "_require_written", read_back_then_touch)
    with pytest.raises(ConcurrentModificationError, match="changed while it was being migrated"):
        migrate_file(source)
    assert sorted(p.name for p in source.parent.iterdir()) == ["session.jsonl"]


def test_a_byte_changed_on_its_way_to_the_temp_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One letter of a text changed between the checked lines and the file: the file still
    # parses and passes every model rule, but it is not what was checked; the read-back
    # compares the bytes themselves and nothing is published.
    source = fixture_copy(tmp_path)
    import dsh_store.migrate as migrate

    real = files.write_all
    flipped: list[int] = []

    def write_one_letter_changed(fd: int, data: bytes | bytearray) -> None:
        data = bytearray(data)
        start = data.find(b'"text":"')
        if start >= 0 and not flipped:
            at = start + len(b'"text":"')
            assert chr(data[at]).isalpha()
            data[at] = ord("b") if data[at] == ord("a") else ord("a")
            flipped.append(at)
        real(fd, data)

    monkeypatch.setattr(migrate, "write_all", write_one_letter_changed)
    target = tmp_path / "out.v4.jsonl"
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(source, output=target)
    assert flipped
    assert caught.value.rule == "re-verification"
    assert "reads back" in caught.value.detail
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tmp") == []


def test_a_lost_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = fixture_copy(tmp_path)
    import dsh_store.migrate as migrate

    real = files.write_all

    def write_all_but_the_last_line(fd: int, data: bytes | bytearray) -> None:
        cut = bytes(data).rstrip(b"\n").rfind(b"\n") + 1
        real(fd, data[:cut])

    monkeypatch.setattr(migrate, "write_all", write_all_but_the_last_line)
    target = tmp_path / "out.v4.jsonl"
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(source, output=target)
    assert caught.value.rule == "re-verification"
    assert not target.exists()


def test_enospc_while_writing_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fixture_copy(tmp_path)

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as caught:
        migrate_file(source)
    assert caught.value.errno == errno.ENOSPC
    assert sorted(p.name for p in source.parent.iterdir()) == ["session.jsonl"]


def test_verify_published_rejects_a_damaged_log(tmp_path: Path) -> None:
    log = tmp_path / "session.v4.jsonl"
    golden = _golden()
    log.write_bytes(golden)
    assert verify_published(log) == golden.count(b"\n") - 1
    log.write_bytes(golden + b'{"type":"turn/st')
    with pytest.raises(MigrationRefusedError, match="torn tail") as caught:
        verify_published(log)
    assert caught.value.rule == "re-verification"


def test_stream_check_agrees_with_restore_on_every_fixture() -> None:
    for directory in sorted(VALID.iterdir()):
        inspection = read_log(directory / "expected.v4.jsonl")
        assert check_stream(inspection.header, inspection.events) == len(inspection.events)
    header = SessionHeader(id="x", created_at=1, is_seeded=True)
    events = [SessionEvent("session/end-seed", 0, 1, {})]
    with pytest.raises(EventValidationError) as restored:
        Session.from_restore(header, events)
    with pytest.raises(EventValidationError) as streamed:
        check_stream(header, events)
    assert streamed.value.rule == restored.value.rule == "seeded-marker-mismatch"
    marked = [SessionEvent("session/end-seed", 0, 1, {"inherited": True})]
    assert check_stream(header, marked) == 1
    with pytest.raises(TypeError, match="keeps no events"):
        StreamCheck.from_restore(header, marked).events  # noqa: B018


def test_migrate_store_publishes_every_older_session(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for name in ("v0-basic", "v3-plugin-sources", "v4-current"):
        (source,) = (VALID / name).glob("session*.jsonl")
        directory = root / "_no-cwd" / name
        directory.mkdir(parents=True)
        # Filed where its header says: the id is the directory's name, and it has no cwd.
        header, _, body = source.read_bytes().partition(b"\n")
        row = json.loads(header)
        row["id"] = name
        row.pop("cwd", None)
        (directory / source.name).write_bytes(json.dumps(row).encode() + b"\n" + body)
    results = {r.source.parent.name: r for r in migrate_store(root)}
    assert {name: r.status for name, r in results.items()} == {
        "v0-basic": "migrated",
        "v3-plugin-sources": "migrated",
        "v4-current": "current",
    }


def _peak_migrating(directory: Path, size: int) -> tuple[int, int]:
    directory.mkdir()
    source = bigv0.write(directory / "session.jsonl", size)
    tracemalloc.start()
    try:
        result = migrate_file(source)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status == "migrated"
    return source.stat().st_size, peak


def test_memory_is_bounded_by_a_turn_not_the_file(tmp_path: Path) -> None:
    small_size, small_peak = _peak_migrating(tmp_path / "small", 2 * 1024 * 1024)
    size, peak = _peak_migrating(tmp_path / "large", 8 * 1024 * 1024)
    # The migration holds a turn, a 1 MiB write buffer, one scan chunk's rows and the
    # surface index (an int per message): far below the file, and a 4x larger file
    # barely moves the peak.
    assert peak < size / 2, f"peak {peak} bytes for a {size}-byte log"
    assert peak < small_peak * 1.6, f"peak grew from {small_peak} ({small_size} B) to {peak}"


@pytest.mark.parametrize("dry_run", [False, True])
def test_in_place_refuses_a_symlink_and_writes_nothing(tmp_path: Path, dry_run: bool) -> None:
    real = tmp_path / "real.jsonl"
    shutil.copyfile(VALID / "v1-basic" / "session.v1.jsonl", real)
    before = real.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to("real.jsonl")
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(link, in_place=True, dry_run=dry_run)
    assert (caught.value.rule, caught.value.path) == ("in-place-symlink", str(link))
    assert "is a symbolic link to real.jsonl; --in-place replaces a file" in str(caught.value)
    assert "migrate the file it names in place, or pass --output NEW" in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "real.jsonl"]
    assert link.is_symlink() and os.readlink(link) == "real.jsonl"
    assert real.read_bytes() == before
    # The file the link names migrates in place under its own name; its backup is a file.
    result = migrate_file(real, in_place=True)
    assert result.backup is not None and not result.backup.is_symlink()
    assert result.backup.read_bytes() == before
    assert link.read_bytes() == real.read_bytes() == _golden("v1-basic")


def test_in_place_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    link = tmp_path / "gone.jsonl"
    link.symlink_to(tmp_path / "missing.jsonl")
    for dry_run in (False, True):
        with pytest.raises(MigrationRefusedError) as caught:
            migrate_file(link, in_place=True, dry_run=dry_run)
        assert caught.value.rule == "in-place-symlink"
        assert "missing.jsonl, which does not exist" in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["gone.jsonl"]


def test_a_source_that_became_a_symlink_leaves_no_symlink_backup(tmp_path: Path) -> None:
    """The backup link is checked after it is made: a second symlink is removed, refused."""
    from dsh_store import migrate

    real = tmp_path / "real.jsonl"
    shutil.copyfile(VALID / "v0-basic" / "session.jsonl", real)
    link = tmp_path / "old.jsonl"
    link.symlink_to("real.jsonl")
    backup = tmp_path / "old.jsonl.v0.bak"
    with pytest.raises(MigrationRefusedError) as caught:
        migrate._keep_backup(link, backup)
    assert caught.value.rule == "in-place-symlink"
    assert not os.path.lexists(backup)
