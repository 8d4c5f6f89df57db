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


def test_a_library_user_without_psycopg_gets_the_typed_error() -> None:
    """Every store call, not only the CLI's, names the extra to install when the driver is
    missing (a bare ImportError from deep inside the backend told the user nothing)."""
    probe = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # import psycopg now raises ImportError\n"
        "from dsh_store.errors import PostgresUnavailableError\n"
        "from dsh_store.postgres.store import PostgresStore\n"
        "store = PostgresStore('postgresql://agent:secret@127.0.0.1:1/sessions')\n"
        "for call in (store.list, lambda: store.inspect('s1'), lambda: store.new('s1')):\n"
        "    try:\n"
        "        call()\n"
        "    except PostgresUnavailableError as error:\n"
        "        print(type(error).__name__, 'secret' in str(error))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["PostgresUnavailableError False"] * 3
