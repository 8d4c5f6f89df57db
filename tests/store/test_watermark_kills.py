"""SIGKILL tests for the durable watermark: it never runs ahead of what was fsynced.

A real writer process (``tests.store.writer_child``) is killed inside a batch: half its
bytes written, or written but not fsynced, or fsynced but not yet recorded. The watermark
then names a line boundary no later than the file's end and no earlier than the end of
the last acknowledged event; restore keeps every acknowledged event and cuts only the
bytes of the batch in flight, which lie at or past the watermark.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_store.jsonl.watermark import header_crc, read_watermark
from dsh_store.restore import read_log

from .helpers import make_store, sidecars
from .test_kills import SESSION, _run_to_failpoint, root  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow


def _line_ends(data: bytes) -> list[int]:
    return [index + 1 for index in range(len(data)) if data[index] == 0x0A]


@pytest.mark.parametrize(
    "failpoint", ["append.partial-write", "append.before-fsync", "append.after-fsync"]
)
@pytest.mark.parametrize("skip", [2, 5, 9])
def test_a_writer_killed_mid_batch_leaves_a_watermark_that_never_leads(
    root: Path,  # noqa: F811 (the fixture imported above)
    failpoint: str,
    skip: int,
) -> None:
    acked = {record["seq"]: record for record in _run_to_failpoint(root, failpoint, skip)}
    assert acked, "the writer acknowledged nothing before the kill"
    (log,) = root.rglob("session.v4.jsonl")
    data = log.read_bytes()
    ends = _line_ends(data)
    mark = read_watermark(log)
    assert mark is not None
    assert mark.binds(os.stat(log), header_crc(data[: ends[0]]))
    assert mark.size <= len(data), "the watermark ran ahead of the file"
    assert mark.size in ends, "the watermark is not a batch boundary"
    # Line k + 2 (1-based, after the header) holds seq k: the acknowledged prefix ends here.
    acknowledged_end = ends[max(acked) + 1]
    assert mark.size >= acknowledged_end, "an acknowledged batch is not covered"
    view = read_log(log)  # a crash tail past the watermark: restored, never refused
    on_disk = {event.seq: event for event in view.events}
    for seq, record in acked.items():
        assert (on_disk[seq].type, on_disk[seq].data) == (record["type"], record["data"])
    if view.torn is not None:
        assert view.torn.offset >= mark.size
        assert view.torn.offset == view.committed_size == ends[-1]
    loaded = make_store(root).load(SESSION)
    assert loaded.classification == "ok"
    if view.torn is not None:
        (sidecar,) = sidecars(log)
        assert sidecar.read_bytes() == data[view.torn.offset :]
    after = read_watermark(log)
    assert after is not None and after.size <= log.stat().st_size
    if view.needs_repair:  # the repair's closer batch was fsynced, then recorded
        assert after.size == log.stat().st_size
