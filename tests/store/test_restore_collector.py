"""What a restore leaves the cyclic garbage collector in, checked in a fresh interpreter.

``read_log`` pauses the collector while it builds the events and, on resume, hands what it
kept to the oldest generation instead of letting the next allocation run a young pass over
all of it. These checks run in a child process, so that nothing the test runner froze or
tracked changes the outcome.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .helpers import CWD, complete_turn, make_store

CHILD = r"""
import gc, sys, weakref
from dsh_store.restore import read_log

path, mode = sys.argv[1], sys.argv[2]
if mode == "disabled":
    gc.disable()
if mode == "frozen":
    frozen = [[] for _ in range(100)]
    gc.freeze()
# A cycle the caller made before the restore: still garbage the collector frees after it
# (a weak reference tells, whether or not a pass before the pause already freed it).
class Node:
    pass
cycle = Node()
cycle.self = cycle
cycle_ref = weakref.ref(cycle)
del cycle
view = read_log(path)
events = set(map(id, view.events))
young = {id(item) for item in gc.get_objects(0)} | {id(item) for item in gc.get_objects(1)}
oldest = {id(item) for item in gc.get_objects(2)}
print("enabled", gc.isenabled())
print("freeze_count", gc.get_freeze_count())
print("events_young", len(events & young))
print("events_oldest", len(events & oldest))
print("events", len(events))
if mode == "frozen":  # the permanent generation is the one get_objects() leaves out
    tracked = {id(item) for item in gc.get_objects()}
    print("still_frozen", not any(id(item) in tracked for item in frozen))
gc.enable()
gc.collect()
print("freed", cycle_ref() is None)
"""


def run_child(log: Path, mode: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(log), mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return dict(line.split(" ", 1) for line in done.stdout.splitlines())


def write_log(tmp_path: Path, turns: int) -> Path:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        for turn in range(1, turns + 1):
            complete_turn(live, turn, first=turn == 1)
        return live.path


def test_a_restore_hands_its_events_to_the_oldest_generation(tmp_path: Path) -> None:
    # 300 turns: several times the young generation's threshold of tracked objects.
    facts = run_child(write_log(tmp_path, 300), "enabled")
    assert facts["enabled"] == "True"
    assert facts["freeze_count"] == "0"  # nothing left frozen
    assert int(facts["events"]) > 1000
    # Without the handoff the first allocation after the pause runs a young pass over
    # them all, and they sit in the middle generation.
    assert facts["events_oldest"] == facts["events"]
    assert facts["events_young"] == "0"
    assert facts["freed"] == "True"


def test_a_paused_collector_stays_paused(tmp_path: Path) -> None:
    facts = run_child(write_log(tmp_path, 300), "disabled")
    assert facts["enabled"] == "False"
    assert facts["freeze_count"] == "0"


def test_objects_the_caller_froze_stay_frozen(tmp_path: Path) -> None:
    facts = run_child(write_log(tmp_path, 300), "frozen")
    assert facts["enabled"] == "True"
    assert facts["still_frozen"] == "True"
    # With objects frozen the handoff is skipped and the collector resumes as it was.
    assert facts["events_oldest"] == "0"
