"""Publishing a new log and appending batches to it, on real files."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_store.errors import ConcurrentModificationError, EventValidationError, SessionExistsError
from dsh_store.jsonl.files import LogWriter, make_dirs, materialize
from dsh_store.jsonl.layout import log_path

HEADER = (
    b'{"type":"session","version":4,"id":"s-1","createdAt":1,"isSeeded":false,'
    b'"delegationDepth":0}\n'
)


def event_line(seq: int) -> bytes:
    return b'{"type":"plugin:test","seq":%d,"time":1,"data":{"n":"%s"},"ignorable":true}\n' % (
        seq,
        b"x" * (seq % 7),
    )


def lines(first: int, count: int) -> list[bytes]:
    return [event_line(seq) for seq in range(first, first + count)]


def expected_log(count: int) -> bytes:
    return HEADER + b"".join(lines(0, count))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return log_path(tmp_path / "root", "s-1", "/work/p")


@pytest.fixture
def umask_zero() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- materialize ------------------------------------------------------------------------------


def test_materialize_publishes_header_and_first_batch(path: Path) -> None:
    with materialize(path, HEADER, lines(0, 3)) as writer:
        assert path.read_bytes() == expected_log(3)
        assert writer.size == len(expected_log(3))
        assert writer.next_seq == 3
    assert sorted(os.listdir(path.parent)) == ["session.v4.jsonl", "session.v4.jsonl.durable"]


@pytest.mark.parametrize("umask", [0, 0o077, 0o022])
def test_materialize_creates_private_dirs_and_file_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    path = log_path(tmp_path / "root", "s-1", "/work/p")
    old = os.umask(umask)
    try:
        materialize(path, HEADER, lines(0, 1)).close()
    finally:
        os.umask(old)
    assert mode(path) == 0o600
    for level in (path.parent, path.parent.parent, tmp_path / "root"):
        assert mode(level) == 0o700, level


def test_make_dirs_leaves_existing_levels_alone(tmp_path: Path, umask_zero: None) -> None:
    existing = tmp_path / "root"
    existing.mkdir(mode=0o755)
    created = make_dirs(existing / "a" / "b")
    assert created == [existing / "a", existing / "a" / "b"]
    assert mode(existing) == 0o755
    assert make_dirs(existing / "a" / "b") == []


def test_make_dirs_fsyncs_the_parent_of_every_created_level(
    tmp_path: Path, fsynced_dirs: list[Path]
) -> None:
    path = log_path(tmp_path / "root", "s-1", None)
    materialize(path, HEADER, lines(0, 1)).close()
    root = tmp_path / "root"
    # one fsync per created level (of its parent), then the session dir after the link
    assert fsynced_dirs == [tmp_path, root, root / "_no-cwd", path.parent]


def test_make_dirs_refuses_a_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(FileExistsError):
        make_dirs(tmp_path / "f" / "g")


def test_materialize_never_overwrites_an_existing_log(path: Path) -> None:
    materialize(path, HEADER, lines(0, 2)).close()
    with pytest.raises(SessionExistsError) as caught:
        materialize(path, b'{"other":1}\n', lines(0, 1), session_id="s-1")
    assert str(caught.value) == (
        f"session 's-1' already exists at {path}; open it instead of creating it"
    )
    assert path.read_bytes() == expected_log(2)
    assert sorted(os.listdir(path.parent)) == ["session.v4.jsonl", "session.v4.jsonl.durable"]


def test_materialize_losing_the_link_race_raises_session_exists(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    materialize(path, HEADER, lines(0, 2)).close()
    # The existence pre-check passes, as if the other creator published right after it.
    monkeypatch.setattr(os.path, "lexists", lambda _p: False)
    with pytest.raises(SessionExistsError, match="already exists at") as caught:
        materialize(path, HEADER, lines(0, 5))
    assert isinstance(caught.value.__cause__, FileExistsError)
    assert caught.value.session_id == "s-1"
    assert path.read_bytes() == expected_log(2)
    assert sorted(os.listdir(path.parent)) == ["session.v4.jsonl", "session.v4.jsonl.durable"]


def test_materialize_refuses_an_empty_first_batch(path: Path) -> None:
    with pytest.raises(ValueError, match="materialize needs a non-empty first batch"):
        materialize(path, HEADER, [])
    assert not path.parent.exists()


# -- LogWriter --------------------------------------------------------------------------------


def test_appends_continue_the_log_exactly(path: Path) -> None:
    with materialize(path, HEADER, lines(0, 2)) as writer:
        writer.append(lines(2, 3), 2, 4)
        writer.append(lines(5, 1), 5, 5)
        assert writer.next_seq == 6
        assert writer.size == len(expected_log(6))
        assert writer.pending == []
    assert path.read_bytes() == expected_log(6)


def test_reopened_writer_continues_where_the_file_ends(path: Path) -> None:
    materialize(path, HEADER, lines(0, 2)).close()
    with LogWriter.open(path, expected_size=len(expected_log(2)), next_seq=2) as writer:
        writer.append(lines(2, 2), 2, 3)
    assert path.read_bytes() == expected_log(4)


def test_each_batch_is_one_write_and_one_fsync(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = materialize(path, HEADER, lines(0, 1))
    calls: list[str] = []
    real_write, real_fsync = os.write, os.fsync

    def write(fd: int, data: bytes) -> int:
        calls.append("write")
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    writer.append(lines(1, 50), 1, 50)
    assert calls == ["write", "fsync"]
    writer.close()


@pytest.mark.parametrize(("first", "last", "count"), [(3, 3, 1), (1, 1, 1), (2, 3, 1), (2, 2, 0)])
def test_append_refuses_seqs_that_do_not_continue_the_log(
    path: Path, first: int, last: int, count: int
) -> None:
    writer = materialize(path, HEADER, lines(0, 2))
    with pytest.raises(EventValidationError) as caught:
        writer.append(lines(first, count), first, last)
    assert caught.value.rule == "append-seq-mismatch"
    assert str(caught.value) == (
        f"{path} (seq {first}): append seq mismatch: the log continues at seq 2, got a batch "
        f"of {count} line(s) for seqs {first}..{last} [rule: append-seq-mismatch]"
    )
    assert path.read_bytes() == expected_log(2)
    writer.close()


def test_open_refuses_a_log_of_another_size(path: Path) -> None:
    materialize(path, HEADER, lines(0, 2)).close()
    size = len(expected_log(2))
    with pytest.raises(ConcurrentModificationError) as caught:
        LogWriter.open(path, expected_size=size - 1, next_seq=2)
    assert str(caught.value) == (
        f"{path}: log changed under this writer: size is {size} bytes, expected {size - 1}; "
        "nothing was written — reopen the session to continue from what is on disk"
    )


def test_open_refuses_a_missing_log(path: Path) -> None:
    with pytest.raises(ConcurrentModificationError, match="the log file no longer exists"):
        LogWriter.open(path, expected_size=0, next_seq=0)


def test_closed_writer_refuses_appends(path: Path) -> None:
    writer = materialize(path, HEADER, lines(0, 1))
    writer.close()
    writer.close()
    assert writer.closed
    with pytest.raises(ValueError, match="the log writer is closed"):
        writer.append(lines(1, 1), 1, 1)
    assert path.read_bytes() == expected_log(1)
