"""``scripts/pg-server``: the throwaway server the suite runs against, started and stopped by
the project itself, as an unprivileged user, gone however the command it wraps ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.requires("postgres")

PG_SERVER = REPO / "scripts" / "pg-server"

# Run under the wrapper: report the URL, the server's data directory and the uid of the
# postmaster, then wait or exit as told by argv[1].
PROBE = """
import os, sys, time
import psycopg
url = os.environ["DSH_STORE_PG_URL"]
with psycopg.connect(url) as connection:
    data = connection.execute("SELECT current_setting('data_directory')").fetchone()[0]
pid = int(open(os.path.join(data, "postmaster.pid")).readline())
uid = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith("Uid:"))
print(url, data, uid, flush=True)
if sys.argv[1] == "wait":
    time.sleep(120)
sys.exit(int(sys.argv[1]))
"""


def _wrapped(mode: str) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key != "DSH_STORE_PG_URL"}
    return subprocess.Popen(
        [str(PG_SERVER), "run", sys.executable, "-c", PROBE, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, signalled as a whole below
    )


def _report(runner: subprocess.Popen[str]) -> tuple[str, Path, int]:
    assert runner.stdout is not None
    line = runner.stdout.readline().split()
    assert len(line) == 3, f"the wrapped command reported nothing (status {runner.poll()})"
    return line[0], Path(line[1]), int(line[2])


def _gone(url: str, data: Path, within: float = 30.0) -> bool:
    """The server at ``url`` stopped and its files are removed (polled: a watchdog may lag)."""
    import psycopg

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            psycopg.connect(url, connect_timeout=2).close()
        except psycopg.OperationalError:
            if not data.exists():
                return True
        time.sleep(0.2)
    return False


def test_the_wrapped_command_gets_a_server_run_by_an_unprivileged_user_and_its_status() -> None:
    runner = _wrapped("3")
    url, data, uid = _report(runner)
    assert runner.wait(timeout=60) == 3  # the command's own status, a failure included
    assert uid != 0  # PostgreSQL refuses root; as root the script runs it as another user
    assert _gone(url, data)


def test_an_interrupt_stops_the_server() -> None:
    runner = _wrapped("wait")
    url, data, _ = _report(runner)
    os.killpg(runner.pid, signal.SIGINT)  # what Ctrl-C sends the whole foreground group
    assert runner.wait(timeout=60) != 0
    assert _gone(url, data)


def test_a_killed_wrapper_leaves_no_server_behind() -> None:
    runner = _wrapped("wait")
    url, data, _ = _report(runner)
    os.killpg(runner.pid, signal.SIGKILL)  # no trap runs: the watchdog stops the server
    runner.wait(timeout=60)
    assert _gone(url, data)
