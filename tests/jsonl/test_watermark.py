"""The durable watermark: recorded after each fsync, self-validating, never inherited."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from dsh_store.errors import CorruptLogError
from dsh_store.jsonl.files import LogWriter, materialize
from dsh_store.jsonl.layout import is_durable_name, session_dir
from dsh_store.jsonl.scan import LogScanner
from dsh_store.jsonl.watermark import (
    decode_record,
    encode_record,
    header_crc,
    read_watermark,
    watermark_path,
)
from dsh_store.restore import examine

from .scan_logs import event, header, line

HEADER = line(header())


def lines(first: int, count: int) -> list[bytes]:
    return [
        line(event(seq, "turn/start" if seq == 0 else "x:y", {})) for seq in range(first, count)
    ]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "s-1" / "session.v4.jsonl"


def test_a_record_round_trips_and_any_damage_voids_it() -> None:
    record = encode_record(64768, 123456, 0xDEADBEEF, 4096)
    assert record.endswith(b"\n") and len(record) < 128
    assert decode_record(record) == (64768, 123456, 0xDEADBEEF, 4096)
    assert len(encode_record(1, 2, 3, 10**12)) == len(encode_record(1, 2, 3, 5))
    for position in range(len(record)):
        damaged = bytearray(record)
        damaged[position] ^= 0x01
        assert decode_record(bytes(damaged)) is None, position
    for size in range(len(record)):
        assert decode_record(record[:size]) is None  # torn
    assert decode_record(record + record) is None


def test_publish_and_every_append_record_the_durable_size(path: Path) -> None:
    writer = materialize(path, HEADER, lines(0, 2))
    info = path.stat()
    assert read_watermark(path) == (info.st_dev, info.st_ino, header_crc(HEADER), info.st_size)
    writer.append(lines(2, 5), 2, 4)
    mark = read_watermark(path)
    assert mark is not None and mark.size == path.stat().st_size
    writer.close()
    assert oct(os.stat(watermark_path(path)).st_mode & 0o777) == "0o600"
    assert is_durable_name(Path(watermark_path(path)).name)


def test_a_failed_record_never_fails_the_append(path: Path) -> None:
    materialize(path, HEADER, lines(0, 1)).close()
    os.unlink(watermark_path(path))
    os.mkdir(watermark_path(path))  # nothing can be written there
    with LogWriter.open(path, expected_size=path.stat().st_size, next_seq=1) as writer:
        writer.append(lines(1, 3), 1, 2)
    assert LogScanner(path).exhaust().event_count == 3


def test_a_new_log_under_the_name_does_not_inherit_the_old_watermark(path: Path) -> None:
    materialize(path, HEADER, lines(0, 9)).close()
    old = read_watermark(path)
    os.unlink(path)  # the record stays behind
    materialize(path, HEADER, lines(0, 2)).close()
    new = read_watermark(path)
    assert old is not None and new is not None
    assert new.size == path.stat().st_size < old.size
    assert LogScanner(path).exhaust().torn is None


def test_a_watermark_naming_another_file_is_ignored(path: Path, tmp_path: Path) -> None:
    materialize(path, HEADER, lines(0, 3)).close()
    copy = tmp_path / "copy" / "session.v4.jsonl"
    copy.parent.mkdir()
    shutil.copy(path, copy)  # another inode, same bytes
    shutil.copy(watermark_path(path), watermark_path(copy))
    with open(copy, "ab") as handle:
        handle.write(b"garbage\n")  # below nothing this copy's writer recorded
    scanner = LogScanner(copy).exhaust()
    assert scanner.durable_size is None
    assert scanner.torn is not None and scanner.torn.rule == "unparsable-line"
    # The original, with the same damage, is refused: its record binds it.
    with open(path, "r+b") as handle:
        handle.seek(len(HEADER) + 3)
        handle.write(b"\xff")
    with pytest.raises(CorruptLogError, match="which its writer saw fsynced"):
        LogScanner(path).exhaust()


def test_a_watermark_for_another_header_is_ignored(path: Path) -> None:
    materialize(path, HEADER, lines(0, 3)).close()
    other = line(header(id="other"))
    body = path.read_bytes()[len(HEADER) :]
    with open(path, "r+b") as handle:  # same inode, another session's header
        handle.truncate(0)
        handle.write(other + body[:-3])
    scanner = LogScanner(path).exhaust()
    assert scanner.durable_size is None
    assert scanner.torn is not None


def test_a_log_shorter_than_its_watermark_lost_acknowledged_bytes(path: Path) -> None:
    materialize(path, HEADER, lines(0, 5)).close()
    full = path.stat().st_size
    cut = full - len(lines(4, 5)[0])
    os.truncate(path, cut)  # a clean line boundary: no defect, just missing events
    before = path.read_bytes()
    with pytest.raises(CorruptLogError) as caught:
        LogScanner(path).exhaust()
    error = caught.value
    assert (error.rule, error.offset, error.line) == ("durable-size", cut, None)
    assert f"the log is {cut} bytes long, but its writer saw {full} bytes fsynced" in str(error)
    assert examine(path).classification == "corrupt"
    assert path.read_bytes() == before


def test_a_torn_record_falls_back_to_the_rules_without_one(path: Path) -> None:
    materialize(path, HEADER, lines(0, 3)).close()
    record = Path(watermark_path(path)).read_bytes()
    Path(watermark_path(path)).write_bytes(record[:20])
    with open(path, "ab") as handle:
        handle.write(b'{"type":"x:y","se')
    scanner = LogScanner(path).exhaust()
    assert scanner.durable_size is None
    assert scanner.torn is not None and scanner.torn.rule == "torn-line"


def test_a_defect_at_or_past_the_watermark_is_still_a_crash_tail(path: Path) -> None:
    writer = materialize(path, HEADER, lines(0, 3))
    writer.close()
    size = path.stat().st_size
    with open(path, "ab") as handle:  # a batch written after the last record, then torn
        handle.write(lines(3, 4)[0] + b'{"type":"x:y","seq":4,"ti')
    scanner = LogScanner(path).exhaust()
    assert scanner.durable_size == size
    assert scanner.torn is not None and scanner.torn.offset == size + len(lines(3, 4)[0])
    assert scanner.event_count == 4


def test_the_header_crc_covers_the_physical_first_line(path: Path) -> None:
    materialize(path, HEADER, lines(0, 1)).close()
    mark = read_watermark(path)
    assert mark is not None
    assert mark.head_crc == header_crc(path.read_bytes().split(b"\n")[0] + b"\n")
    assert orjson.loads(HEADER)["type"] == "session"


def test_a_migration_publish_drops_a_stale_record_and_open_records_a_fresh_one(
    tmp_path: Path,
) -> None:
    from dsh_store.migrate import migrate_file
    from dsh_store.store import JsonlStore
    from tests.conftest import REPO

    source = REPO / "fixtures" / "demo" / "format-3" / "session.v3.jsonl"
    session = tmp_path / "one" / "session.v3.jsonl"
    session.parent.mkdir()
    shutil.copy(source, session)
    target = session.with_name("session.v4.jsonl")
    stale = Path(watermark_path(target))
    stale.write_bytes(encode_record(1, 2, 3, 10**9))  # left by a log deleted long ago
    migrate_file(session)
    assert target.exists() and not stale.exists()

    # open() of an older store session publishes its upgrade and records it.
    root = tmp_path / "store"
    header = orjson.loads(source.read_bytes().split(b"\n")[0])
    store = JsonlStore(root)
    directory = session_dir(root, header["id"], header.get("cwd"))
    directory.mkdir(parents=True)
    shutil.copy(source, directory / "session.v3.jsonl")
    with store.open(header["id"]) as live:
        published = live.path
    mark = read_watermark(published)
    assert mark is not None and mark.size == published.stat().st_size


def test_each_record_of_a_writer_is_exactly_the_encoded_record(path: Path) -> None:
    # The writer formats only the size of each record after the first; the bytes on disk
    # must still be encode_record's, also once the header checksum it binds changes.
    writer = materialize(path, HEADER, lines(0, 1))
    dev, ino = writer.identity
    mark = watermark_path(path)
    assert writer.mark.head_crc is not None
    head = writer.mark.head_crc
    with writer:
        for seq in range(1, 4):
            writer.append(lines(seq, seq + 1), seq, seq)
            assert Path(mark).read_bytes() == encode_record(dev, ino, head, writer.size)
        writer.mark.head_crc = head ^ 1
        writer.append(lines(4, 5), 4, 4)
        assert Path(mark).read_bytes() == encode_record(dev, ino, head ^ 1, writer.size)
