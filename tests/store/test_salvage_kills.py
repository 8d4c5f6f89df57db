"""SIGKILL a real salvage while it publishes: the output is absent or complete, never half.

The source is only ever read, so it must be byte-identical (mtime included) after every
kill, and a rerun must converge on the one salvaged log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_store.jsonl.layout import is_temp_name
from dsh_store.restore import read_log
from dsh_store.salvage import salvage_file
from tests.cli.conftest import record_session
from tests.conftest import REPO

CHILD = """
import sys
from dsh_store.salvage import salvage_file
salvage_file(sys.argv[1], sys.argv[2])
print("done", flush=True)
"""


def run_child(log: Path, out: Path, failpoint: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_STORE_FAILPOINT")}
    env["DSH_STORE_FAILPOINT"] = failpoint
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(log), str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("failpoint", "published"),
    [
        ("materialize.after-temp-write", False),
        ("materialize.before-link", False),
        ("materialize.after-link", True),
    ],
)
def test_kill_during_the_publish_then_rerun_converges(
    tmp_path: Path, failpoint: str, published: bool
) -> None:
    log = record_session(tmp_path / "store", "corrupt", turns=2)
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = b"garbage\n"
    log.write_bytes(b"".join(lines))
    before = (log.read_bytes(), log.stat().st_mtime_ns)
    expected = tmp_path / "expected" / "out.jsonl"
    salvage_file(log, expected)
    out = tmp_path / "work" / "out.jsonl"

    child = run_child(log, out, failpoint)

    assert child.returncode == -9, child.stderr
    assert "done" not in child.stdout
    assert (log.read_bytes(), log.stat().st_mtime_ns) == before
    assert out.exists() is published
    if published:
        assert out.read_bytes() == expected.read_bytes()
        assert read_log(out).classification == "ok"
    assert all(is_temp_name(name) for name in os.listdir(out.parent) if name != out.name)

    rerun = salvage_file(log, out)
    assert rerun.status == ("already-salvaged" if published else "salvaged")
    assert out.read_bytes() == expected.read_bytes()
    assert read_log(out).classification == "ok"
    assert (log.read_bytes(), log.stat().st_mtime_ns) == before
