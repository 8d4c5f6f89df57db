"""Truncation sweeps of upstream-written zstd logs, judged by upstream and dsh-store.

The logs of ``test_truncation``, written by the real upstream backend in its default zstd
encoding (``session.jsonl.zstd``), are cut at chosen byte offsets; upstream's ``inspect``
of each prefix (the driver writes it as the session's transcript, compression on) is
compared with dsh-store's ``read_log`` of the same bytes: verdict, events kept (a torn
final frame's complete records count, as both readers keep them), closers and the derived
conversation.

Which offsets: **every** offset of the last two frames (so every torn final frame of the
last batches, cut in its magic, header, block headers, payload and checksum trailer, and
every state of the frame before), every frame boundary and one byte either side of it,
and ``INTERIOR_SAMPLE`` offsets drawn with the suite's seed from the rest (frames wholly
before the last two, whose every cut is a torn final frame of the same kind).
Every offset of every log is about 5x the prefixes for the same crash-state kinds;
``DSH_STORE_INTEROP_SWEEP=all`` cuts at every offset instead. The count is printed.
"""

from __future__ import annotations

import os
import random

import pytest

from dsh_store.jsonl.zstd_frames import FrameScanner
from tests.interop.conftest import SEED, Written
from tests.interop.test_truncation import SWEPT, Cut, sweep
from tests.interop.upstream import Upstream

pytestmark = pytest.mark.requires("upstream")
pytest.importorskip("zstandard", reason="the zstd extra (zstandard) is not installed")

INTERIOR_SAMPLE = 150


def frame_offsets(data: bytes) -> list[int]:
    """Where each frame of a complete zstd log starts, and the file's end."""
    spans = list(FrameScanner(data).frames())
    assert spans and spans[-1].end == len(data)
    return [span.offset for span in spans] + [len(data)]


def offsets(data: bytes, rng: random.Random) -> list[int]:
    """The offsets a zstd log is cut at (see the module docstring)."""
    if os.environ.get("DSH_STORE_INTEROP_SWEEP") == "all":
        return list(range(len(data) + 1))
    bounds = frame_offsets(data)
    last_two = bounds[-3] if len(bounds) >= 3 else 0
    chosen = set(range(last_two, len(data) + 1))
    for bound in bounds:
        chosen.update({bound - 1, bound, bound + 1})
    rest = sorted(set(range(len(data) + 1)) - chosen)
    chosen.update(rng.sample(rest, min(INTERIOR_SAMPLE, len(rest))))
    return sorted(offset for offset in chosen if 0 <= offset <= len(data))


@pytest.fixture(scope="session")
def zstd_cuts(
    upstream: Upstream,
    written_zstd: dict[bool, Written],
    tmp_path_factory: pytest.TempPathFactory,
) -> list[Cut]:
    """Both verdicts on every chosen prefix of every swept zstd log."""
    found: list[Cut] = []
    for packed, session in SWEPT:
        source = written_zstd[packed].log(session)
        rng = random.Random(f"{SEED}-zstd-sweep-{packed}-{session}")
        chosen = offsets(source.read_bytes(), rng)
        scratch = tmp_path_factory.mktemp("zstd-sweep")
        for offset, upstream_verdict, our_verdict in sweep(
            upstream, session, source, chosen, scratch, compression="zstd"
        ):
            found.append(Cut(packed, session, offset, upstream_verdict, our_verdict))
    print(f"\nzstd truncation sweep: {len(found)} crash states compared (seed {SEED})")
    return found


def test_every_zstd_prefix_gets_the_same_verdict_events_and_closers(
    zstd_cuts: list[Cut],
) -> None:
    """Accept/refuse, events kept and closers (without their texts) agree on every cut."""
    assert len(zstd_cuts) > 1000
    for cut in zstd_cuts:
        assert cut.ours.structure == cut.theirs.structure, cut.where()
    assert {cut.theirs.accepted for cut in zstd_cuts} == {True, False}
    kinds = {closer[2] for cut in zstd_cuts for closer in cut.theirs.closers}
    assert {"TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"} <= kinds


def test_a_torn_final_frame_keeps_what_upstream_keeps(
    zstd_cuts: list[Cut], written_zstd: dict[bool, Written]
) -> None:
    """Inside the last frame every cut is a torn final frame: both readers accept it and
    keep the same records of it; on some cuts those are more than the frames before hold
    (complete records decoded from the torn frame), on the rest exactly those."""
    recovered = 0
    torn = 0
    for packed, session in SWEPT:
        data = written_zstd[packed].log(session).read_bytes()
        last = frame_offsets(data)[-2]
        by_offset = {
            cut.offset: cut for cut in zstd_cuts if (cut.packed, cut.session) == (packed, session)
        }
        at_start = by_offset[last]
        for offset in range(last + 1, len(data)):
            cut = by_offset[offset]
            assert cut.theirs.accepted and cut.ours.accepted, cut.where()
            assert cut.ours.structure == cut.theirs.structure, cut.where()
            assert cut.ours.closer_texts == cut.theirs.closer_texts, cut.where()
            torn += 1
            assert cut.theirs.kept is not None and at_start.theirs.kept is not None
            recovered += cut.theirs.kept > at_start.theirs.kept
    assert torn > 100 and recovered > 0


def test_the_zstd_conversation_agrees_on_every_accepted_cut(zstd_cuts: list[Cut]) -> None:
    """After migration, the model-visible conversation (and closer texts) are upstream's."""
    compared = [cut for cut in zstd_cuts if cut.theirs.accepted]
    assert len(compared) > 500
    for cut in compared:
        assert cut.ours.closer_texts == cut.theirs.closer_texts, cut.where()
        assert cut.ours.conversation == cut.theirs.conversation, cut.where()
        assert cut.ours.system == cut.theirs.system, cut.where()
