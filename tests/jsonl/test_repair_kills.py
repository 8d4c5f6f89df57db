"""SIGKILL a real process inside commit_truncation; a repeat always converges, nothing is lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_store.jsonl.repair import commit_truncation, sidecar_path

from .scan_logs import v4_log

REPO = Path(__file__).resolve().parents[2]
PREFIX = v4_log()
# A big tail keeps the copy busy long enough for random kills to land inside it.
TAIL = random.Random(7).randbytes(12_000_000)
ORIGINAL = PREFIX + TAIL

CHILD = """
import sys
from dsh_store.jsonl.repair import commit_truncation
print("ready", flush=True)
commit_truncation(sys.argv[1], int(sys.argv[2]), expected_size=int(sys.argv[3]))
print("done", flush=True)
"""


def start_child(log: Path, failpoint: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_STORE_FAILPOINT")}
    if failpoint is not None:
        env["DSH_STORE_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(log), str(len(PREFIX)), str(len(ORIGINAL))],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def check_nothing_lost(log: Path) -> None:
    """Every byte of ORIGINAL is in the log or in a complete sidecar, whatever the crash point."""
    data = log.read_bytes()
    sidecar = sidecar_path(log, len(PREFIX))
    assert data in (ORIGINAL, PREFIX), len(data)
    if sidecar.exists():
        assert sidecar.read_bytes() == TAIL
    if data == PREFIX:
        assert sidecar.exists(), "the log was cut before its tail was saved"


def converge(log: Path) -> None:
    """Repeat the repair as a fresh caller would, then check the one final state."""
    commit_truncation(log, len(PREFIX), expected_size=len(ORIGINAL))
    commit_truncation(log, len(PREFIX), expected_size=len(ORIGINAL))
    sidecar = sidecar_path(log, len(PREFIX))
    assert log.read_bytes() == PREFIX
    assert sidecar.read_bytes() == TAIL
    assert sorted(p.name for p in log.parent.iterdir()) == sorted([log.name, sidecar.name])


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(ORIGINAL)
    return path


@pytest.mark.parametrize(
    ("failpoint", "cut"), [("repair.after-sidecar", False), ("repair.after-truncate", True)]
)
def test_kill_at_failpoint_then_repeat_converges(log: Path, failpoint: str, cut: bool) -> None:
    child = start_child(log, failpoint)
    output, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, output
    assert output == "ready\n"
    check_nothing_lost(log)
    assert sidecar_path(log, len(PREFIX)).read_bytes() == TAIL
    assert log.read_bytes() == (PREFIX if cut else ORIGINAL)
    converge(log)


def test_unkilled_child_finishes(log: Path) -> None:
    child = start_child(log)
    output, _ = child.communicate(timeout=60)
    assert (child.returncode, output) == (0, "ready\ndone\n")
    converge(log)


def calibrate(tmp_path: Path) -> float:
    """Seconds an unkilled child spends between "ready" and "done" (spreads the kill moments)."""
    log = tmp_path / "calibrate" / "session.v4.jsonl"
    log.parent.mkdir()
    log.write_bytes(ORIGINAL)
    child = start_child(log)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    started = time.perf_counter()
    assert child.stdout.readline() == "done\n"
    elapsed = time.perf_counter() - started
    child.communicate(timeout=60)
    return max(elapsed, 0.002)


@pytest.mark.slow
def test_kills_at_random_moments_never_lose_bytes(tmp_path: Path) -> None:
    span = calibrate(tmp_path)
    rng = random.Random(2024)
    kills = attempts = 0
    while kills < 12 and attempts < 60:
        attempts += 1
        log = tmp_path / f"run{attempts}" / "session.v4.jsonl"
        log.parent.mkdir()
        log.write_bytes(ORIGINAL)
        child = start_child(log)
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0, span))
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        kills += child.returncode == -signal.SIGKILL
        check_nothing_lost(log)
        converge(log)
    assert kills >= 10, f"only {kills} of {attempts} children were killed before finishing"
