"""Truncation sweeps: prefixes of upstream-written logs, judged by upstream and dsh-store.

Five logs written by the real upstream backend (packed: a complete two-turn session, one
left with a started tool call, a resumed one; unpacked: a complete one and one with a tool
call that never started) are cut at chosen byte offsets; upstream's ``inspect`` of each
prefix (the driver writes the prefix as the session's transcript) is compared with
dsh-store's ``read_log`` of the same bytes, as ``tests/interop/__init__.py`` describes.

Which offsets: every offset is too slow for the suite's budget (about 50 000 prefixes, two
readers each), and the interior bytes of one line all make the same crash state (a torn
last line). So each log is cut at every line boundary and one byte either side of it,
at every offset inside the header line, plus ``INTERIOR_SAMPLE`` offsets drawn with the
suite's seed from the rest; the count of states compared is printed
(``DSH_STORE_INTEROP_SWEEP=all`` cuts at every offset instead).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interop.conftest import SEED, Written
from tests.interop.harness import Verdict, ours, run_driver, theirs
from tests.interop.scenarios import CWD
from tests.interop.upstream import Upstream

pytestmark = pytest.mark.requires("upstream")

INTERIOR_SAMPLE = 150
SWEEP_BATCH = 1000
"""Offsets per driver run (each run stays well inside the driver timeout)."""
SWEPT = [
    (True, "complete"),
    (True, "open-outcome-unknown"),
    (True, "resumed"),
    (False, "complete"),
    (False, "open-not-started"),
]


@dataclass(frozen=True)
class Cut:
    packed: bool
    session: str
    offset: int
    theirs: Verdict
    ours: Verdict

    def where(self) -> str:
        layout = "packed" if self.packed else "unpacked"
        return f"{layout} {self.session!r} cut at byte {self.offset} (seed {SEED})"


def offsets(data: bytes, rng: random.Random) -> list[int]:
    """The offsets a log is cut at (see the module docstring)."""
    if os.environ.get("DSH_STORE_INTEROP_SWEEP") == "all":
        return list(range(len(data) + 1))
    chosen = set(range(data.index(b"\n") + 2))
    for position, byte in enumerate(data):
        if byte == 0x0A:
            chosen.update({position, position + 1, position + 2})
    rest = sorted(set(range(len(data) + 1)) - chosen)
    chosen.update(rng.sample(rest, min(INTERIOR_SAMPLE, len(rest))))
    return sorted(offset for offset in chosen if offset <= len(data))


def sweep(
    upstream: Upstream,
    session: str,
    source: Path,
    chosen: list[int],
    scratch: Path,
    *,
    compression: str,
) -> list[tuple[int, Verdict, Verdict]]:
    """``(offset, upstream's verdict, ours)`` for each ``chosen`` prefix of ``source``, the
    log of ``session``.

    Upstream judges each prefix written as the session's transcript under
    ``scratch/upstream`` (``compression`` ``"none"`` or ``"zstd"``); dsh-store reads the same
    bytes under ``source``'s name in a session directory under ``scratch/ours``.
    """
    data = source.read_bytes()
    command = {
        "op": "sweep",
        "root": str(scratch / "upstream"),
        "compression": compression,
        "id": session,
        "cwd": CWD,
        "source": str(source),
        "messages": True,
    }
    reports = []
    for start in range(0, len(chosen), SWEEP_BATCH):
        batch = chosen[start : start + SWEEP_BATCH]
        reports += run_driver(upstream, {**command, "offsets": batch})["results"]
    prefix = scratch / "ours" / "--home-dev-project--" / session / source.name
    prefix.parent.mkdir(parents=True)
    verdicts = []
    for offset, report in zip(chosen, reports, strict=True):
        prefix.write_bytes(data[:offset])
        verdicts.append((offset, theirs(report), ours(prefix)))
    return verdicts


@pytest.fixture(scope="session")
def cuts(
    upstream: Upstream, written: dict[bool, Written], tmp_path_factory: pytest.TempPathFactory
) -> list[Cut]:
    """Both verdicts on every chosen prefix of every swept log."""
    found: list[Cut] = []
    for packed, session in SWEPT:
        source = written[packed].log(session)
        rng = random.Random(f"{SEED}-sweep-{packed}-{session}")
        chosen = offsets(source.read_bytes(), rng)
        scratch = tmp_path_factory.mktemp("sweep")
        for offset, upstream_verdict, our_verdict in sweep(
            upstream, session, source, chosen, scratch, compression="none"
        ):
            found.append(Cut(packed, session, offset, upstream_verdict, our_verdict))
    print(f"\ntruncation sweep: {len(found)} crash states compared (seed {SEED})")
    return found


def test_every_prefix_gets_the_same_verdict_events_and_closers(cuts: list[Cut]) -> None:
    """Accept/refuse, events kept and closers (without their texts) agree on every cut."""
    assert len(cuts) > 1000
    for cut in cuts:
        assert cut.ours.structure == cut.theirs.structure, cut.where()
    # The sweep reaches both verdicts and crash states with every kind of closer.
    assert {cut.theirs.accepted for cut in cuts} == {True, False}
    kinds = {closer[2] for cut in cuts for closer in cut.theirs.closers}
    assert {"TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"} <= kinds


def test_the_conversation_agrees_where_no_tool_call_is_closed(cuts: list[Cut]) -> None:
    """After migration, the model-visible conversation is upstream's on every accepted cut
    whose closers hold no tool result."""
    compared = [cut for cut in cuts if cut.theirs.accepted and not cut.theirs.tool_closers]
    assert len(compared) > 500
    for cut in compared:
        assert cut.ours.conversation == cut.theirs.conversation, cut.where()
        assert cut.ours.system == cut.theirs.system, cut.where()


def test_closer_texts_and_conversation_agree_where_a_tool_call_is_closed(
    cuts: list[Cut],
) -> None:
    """Where the closers answer an interrupted tool call, their texts are upstream's, so
    the resumed model sees the same conversation."""
    compared = [cut for cut in cuts if cut.theirs.accepted and cut.theirs.tool_closers]
    assert len(compared) > 50
    for cut in compared:
        assert cut.ours.closer_texts == cut.theirs.closer_texts, cut.where()
        assert cut.ours.conversation == cut.theirs.conversation, cut.where()


def test_the_swept_logs_are_untouched(written: dict[bool, Written]) -> None:
    """Sweeping reads prefixes copied elsewhere: the written logs still read in full."""
    for packed, session in SWEPT:
        verdict = ours(written[packed].log(session))
        assert verdict.accepted and verdict.kept is not None and verdict.kept > 10
