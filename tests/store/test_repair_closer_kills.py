"""A load killed while it appends its closers: the next load completes them, no sidecar of ours.

The closers depend only on the committed prefix, so the half-written batch a killed repair
leaves is a byte prefix of what the next repair would write. That repair appends the rest
(keeping every byte in the file) instead of cutting our own fragment into a sidecar; the
result is byte-identical to a repair that was never interrupted.
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


def _three_closers(live: LiveSession) -> None:
    complete_turn(live, 1, first=True)
    open_tool_turn(live, 2, ("c1",), logged=1)  # tool/result, step/end, turn/end


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
@pytest.mark.parametrize(
    "build", [_three_closers, _one_closer], ids=["three-closers", "one-closer"]
)
def test_a_killed_closer_write_is_completed_without_a_sidecar_of_our_bytes(
    tmp_path: Path, build: Callable[[LiveSession], None], torn: bytes
) -> None:
    root = tmp_path / "store"
    with make_store(root).new("s1", cwd=CWD) as live:
        build(live)
        path = live.path
    with open(path, "ab") as log:
        log.write(torn)
    reference_root = tmp_path / "reference"
    shutil.copytree(root, reference_root)
    reference = make_store(reference_root)
    reference.load("s1")
    expected = reference.locate("s1").read_bytes()

    _load_killed_at(root, "append.partial-write")  # half the closer batch, then SIGKILL
    killed = read_log(path)
    assert killed.torn is not None, "the kill left no fragment: nothing was tested"
    plan = repair_file(path, dry_run=True)
    assert (plan.truncate_at, plan.sidecar) == (None, None)  # the plan completes, no cut

    make_store(root).load("s1")
    assert path.read_bytes() == expected
    assert read_log(path).classification == "ok"
    # Only the bytes that were torn before any repair ran are kept aside.
    assert [sidecar.read_bytes() for sidecar in sidecars(path)] == ([torn] if torn else [])
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
