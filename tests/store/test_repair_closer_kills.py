"""A load killed while it appends its closers: the next load converges, loss-free.

The closers depend only on the committed prefix, so the half-written batch a killed repair
leaves is a byte prefix of what the next repair would write. When something shows a repair
was writing there (its sidecar at that offset, or whole closer lines already committed),
the next repair appends the rest instead of cutting our own bytes into a sidecar. Either
way the result is byte-identical to a repair that was never interrupted.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_store.restore import read_log
from dsh_store.store import LiveSession, repair_file

from .helpers import CWD, complete_turn, make_store, open_tool_turn, sidecars

LOAD = "import sys\nfrom dsh_store.store import JsonlStore\nJsonlStore(sys.argv[1]).load('s1')\n"


def _many_closers(live: LiveSession) -> None:
    complete_turn(live, 1, first=True)
    # Four unanswered calls: four tool/result closers, then step/end and turn/end.
    open_tool_turn(live, 2, ("c1", "c2", "c3", "c4"), logged=2)


def _one_closer(live: LiveSession) -> None:
    complete_turn(live, 1, first=True)
    live.append("turn/start", {"turn": 2})  # only turn/end closes it


def _load_killed_at(root: Path, failpoint: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_STORE_FAILPOINT")}
    env["DSH_STORE_FAILPOINT"] = failpoint
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(root)], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


@pytest.mark.parametrize("torn", [b"", b'{"type":"tool/ca'], ids=["clean-end", "torn-end"])
@pytest.mark.parametrize("build", [_many_closers, _one_closer], ids=["many-closers", "one-closer"])
def test_a_killed_closer_write_converges_to_the_uninterrupted_repair(
    tmp_path: Path, build: Callable[[LiveSession], None], torn: bytes
) -> None:
    root = tmp_path / "store"
    with make_store(root).new("s1", cwd=CWD) as live:
        build(live)
        path = live.path
    with open(path, "ab") as log:
        log.write(torn)
    before = len(read_log(path).events)
    reference_root = tmp_path / "reference"
    shutil.copytree(root, reference_root)
    reference = make_store(reference_root)
    reference.load("s1")
    expected = reference.locate("s1").read_bytes()

    _load_killed_at(root, "append.partial-write")  # half the closer batch, then SIGKILL
    killed = read_log(path)
    assert killed.torn is not None, "the kill left no fragment: nothing was tested"
    fragment = path.read_bytes()[killed.torn.offset :]
    lines_written = len(killed.events) > before
    # Evidence that a repair was writing: its sidecar here, or whole closer lines of its batch.
    completes = bool(torn) or lines_written
    if build is _many_closers:
        assert lines_written  # half of six closer lines holds whole lines: case covered
    plan = repair_file(path, dry_run=True)
    assert (plan.truncate_at is None) is completes

    make_store(root).load("s1")
    assert path.read_bytes() == expected
    assert read_log(path).classification == "ok"
    # The bytes torn before any repair ran are kept aside; our own fragment only when
    # nothing shows it was ours (a half line with no sidecar and no whole closer line).
    kept_aside = [sidecar.read_bytes() for sidecar in sidecars(path)]
    assert kept_aside == ([torn] if torn else []) + ([] if completes else [fragment])
    make_store(root).load("s1")
    assert path.read_bytes() == expected


def test_a_tail_that_is_not_a_prefix_of_the_closers_is_still_cut_to_a_sidecar(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    with make_store(root).new("s1", cwd=CWD) as live:
        _one_closer(live)
        path = live.path
    clean = path.read_bytes()
    foreign = b'{"type":"turn/end","seq":99'  # same start as a closer, then different bytes
    path.write_bytes(clean + foreign)
    make_store(root).load("s1")
    (sidecar,) = sidecars(path)
    assert sidecar.read_bytes() == foreign
    assert path.read_bytes().startswith(clean) and read_log(path).classification == "ok"
