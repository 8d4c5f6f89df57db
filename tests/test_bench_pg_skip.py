"""``scripts/bench.py pg`` where no PostgreSQL server can be had: every row is skipped with
the reason, and the run still succeeds (a real run of the group; no server needed)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def test_without_a_server_every_pg_row_is_skipped_with_the_reason() -> None:
    env = {key: value for key, value in os.environ.items() if key != "DSH_STORE_PG_URL"}
    env.update(DSH_STORE_PG_BIN=str(REPO / "no-such-postgres"), DSH_STORE_PG_INSTALL="0")
    run = subprocess.run(
        [sys.executable, "scripts/bench_pg.py", "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("pg ")]
    skipped = [row for row in rows if row.rstrip().endswith("skipped")]
    assert len(skipped) == 6
    assert all("skipped: " in row for row in skipped)
    reasons = ("skipped: scripts/pg-server could not start a server: ", "psycopg is not installed")
    assert all(any(reason in row for reason in reasons) for row in skipped)
