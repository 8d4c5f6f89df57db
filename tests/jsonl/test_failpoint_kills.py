"""SIGKILL a real writer process at every failpoint and at random moments.

The child publishes a log, then appends batches with the real ``LogWriter`` and
prints the last seq of every batch whose append returned (an acknowledgement).
After the kill, the file must hold every acknowledged line completely, and be a
byte prefix of what the child was writing: no duplicate, no gap, no foreign
bytes, and partial bytes only at the very end (a torn tail).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_store.jsonl.failpoints import FAILPOINTS
from dsh_store.jsonl.layout import is_durable_name, is_temp_name
from dsh_store.jsonl.watermark import read_watermark

REPO = Path(__file__).resolve().parents[2]

HEADER = (
    b'{"type":"session","version":4,"id":"crash","createdAt":1,"isSeeded":false,'
    b'"delegationDepth":0}\n'
)

CHILD = r"""
import errno, os, sys
from dsh_store.jsonl import files
from dsh_store.jsonl.files import materialize

path, batches, fail_fsync_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
HEADER = __HEADER__

def line(seq):
    return b'{"type":"plugin:t","seq":%d,"time":1,"data":{"s":"%s"},"ignorable":true}\n' % (
        seq, ("\u00e9" * (seq % 13)).encode())

writer = materialize(path, HEADER, [line(0)])
print(0, flush=True)
if fail_fsync_at:
    real_fsync, count = os.fsync, [0]
    def failing_fsync(fd):
        count[0] += 1
        if count[0] == fail_fsync_at:
            raise OSError(errno.EIO, "injected")
        real_fsync(fd)
    files.os.fsync = failing_fsync
seq, batch = 1, 0
while batches == 0 or batch < batches:
    count_in_batch = 1 + (batch * 7) % 11
    lines = [line(s) for s in range(seq, seq + count_in_batch)]
    try:
        writer.append(lines, seq, seq + count_in_batch - 1)
    except OSError:
        writer.append(lines, seq, seq + count_in_batch - 1)
    seq += count_in_batch
    batch += 1
    print(seq - 1, flush=True)
""".replace("__HEADER__", repr(HEADER))


def line(seq: int) -> bytes:
    text = "é" * (seq % 13)
    return b'{"type":"plugin:t","seq":%d,"time":1,"data":{"s":"%s"},"ignorable":true}\n' % (
        seq,
        text.encode(),
    )


def expected_prefix(length: int) -> bytes:
    parts = [HEADER]
    total = len(HEADER)
    seq = 0
    while total < length:
        parts.append(line(seq))
        total += len(parts[-1])
        seq += 1
    return b"".join(parts)


def size_through(seq: int) -> int:
    return len(HEADER) + sum(len(line(s)) for s in range(seq + 1))


def spawn(
    path: Path, *, batches: int, env: dict[str, str], fail_fsync_at: int = 0
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(batches), str(fail_fsync_at)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
    )


def check_log(path: Path, acked: list[int]) -> bytes:
    """Assert the crash invariants and return the file bytes (b"" if never published)."""
    leftovers = [n for n in os.listdir(path.parent) if n != path.name]
    assert all(is_temp_name(n) or is_durable_name(n) for n in leftovers), leftovers
    if not path.exists():
        assert acked == [], "an acknowledged log is missing"
        return b""
    data = path.read_bytes()
    assert data.startswith(HEADER + line(0)), "the published log lacks its first batch"
    assert data == expected_prefix(len(data))[: len(data)], "bytes differ from what was written"
    if acked:
        assert len(data) >= size_through(acked[-1]), "an acknowledged batch is missing"
    # The watermark never runs ahead of the file, and covers every acknowledged batch
    # (an append returns only after recording it).
    watermark = read_watermark(path)
    if watermark is not None:
        assert watermark.size <= len(data), "the watermark ran ahead of the log"
        assert watermark.size in {size_through(seq) for seq in range(data.count(b"\n"))}
    if acked:
        assert watermark is not None and watermark.size >= size_through(acked[-1])
    return data


def run_to_failpoint(
    tmp_path: Path, name: str, skip: int, fail_fsync_at: int = 0
) -> tuple[Path, list[int], bytes]:
    path = tmp_path / "root" / "--w--" / "crash" / "session.v4.jsonl"
    env = {"DSH_STORE_FAILPOINT": name, "DSH_STORE_FAILPOINT_SKIP": str(skip)}
    child = spawn(path, batches=20, env=env, fail_fsync_at=fail_fsync_at)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, f"{name} was never reached"
    acked = [int(text) for text in out.split()]
    return path, acked, check_log(path, acked)


@pytest.mark.parametrize("name", ["materialize.after-temp-write", "materialize.before-link"])
def test_kill_before_publishing_leaves_no_log(tmp_path: Path, name: str) -> None:
    path, acked, data = run_to_failpoint(tmp_path, name, 0)
    assert (acked, data) == ([], b"")
    assert [n for n in os.listdir(path.parent) if is_temp_name(n)], "the orphan temp is gone?"


def test_kill_right_after_the_link_leaves_the_complete_first_batch(tmp_path: Path) -> None:
    _, acked, data = run_to_failpoint(tmp_path, "materialize.after-link", 0)
    assert acked == []
    assert data == HEADER + line(0)


APPEND_POINTS = [n for n in FAILPOINTS if n.startswith("append.")]


@pytest.mark.parametrize("skip", [0, 2, 5])
@pytest.mark.parametrize("name", APPEND_POINTS)
def test_kill_during_an_append_keeps_every_acknowledged_batch(
    tmp_path: Path, name: str, skip: int
) -> None:
    _, acked, data = run_to_failpoint(tmp_path, name, skip)
    assert len(acked) == skip + 1  # the publish plus the appends that returned
    acked_size = size_through(acked[-1])
    if name == "append.before-write":
        assert len(data) == acked_size
    elif name == "append.partial-write":
        assert len(data) > acked_size and not data.endswith(b"\n"), "expected a torn tail"
    else:
        assert len(data) > acked_size and data.endswith(b"\n"), "the unacked batch is whole"


@pytest.mark.parametrize("fail_at", [1, 4])
def test_kill_before_rollback_truncate_leaves_only_unacked_bytes_at_the_end(
    tmp_path: Path, fail_at: int
) -> None:
    _, acked, data = run_to_failpoint(tmp_path, "rollback.before-truncate", 0, fail_at)
    assert len(acked) == fail_at  # publish + (fail_at - 1) appends
    assert len(data) > size_through(acked[-1])


@pytest.mark.parametrize("seed", range(15))
def test_random_kill_keeps_every_acknowledged_batch(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "root" / "--w--" / "crash" / "session.v4.jsonl"
    child = spawn(path, batches=0, env={"DSH_STORE_FAILPOINT": ""})
    assert child.stdout is not None
    acked: list[int] = []
    for _ in range(rng.randint(1, 40)):  # kill after a random number of acknowledgements
        acked.append(int(child.stdout.readline()))
    time.sleep(rng.random() * 0.003)  # and at a random point of the next batch
    child.send_signal(signal.SIGKILL)
    # Through the same buffered file: communicate() reads the raw pipe and would drop the
    # acknowledgements readline() has already buffered.
    out = child.stdout.read()
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    acked += [int(text) for text in out.split()]
    assert acked == sorted(set(acked))
    check_log(path, acked)
