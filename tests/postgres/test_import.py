"""``import dsh_store`` (and the JSONL store) never imports the PostgreSQL driver."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_import_dsh_store_does_not_import_psycopg() -> None:
    probe = (
        "import sys, tempfile\n"
        "import dsh_store\n"
        "from dsh_store import JsonlStore, turn_start\n"
        "with JsonlStore(tempfile.mkdtemp()).new('s') as live:\n"
        "    live.append('turn/start', turn_start(1))\n"
        "import dsh_store.postgres, dsh_store.postgres.url\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'psycopg'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip() == "[]"
