"""The crash points of the PostgreSQL write paths (see :mod:`dsh_store.jsonl.failpoints`).

They are armed and fire exactly as the JSONL ones (``DSH_STORE_FAILPOINT=<name>``, SIGKILL
at the point); this registry lists them apart because they are the database backend's.
``docs/postgres.md`` lists the same names, and a test checks that both lists and the
``failpoint(...)`` calls of :mod:`dsh_store.postgres` agree.
"""

from __future__ import annotations

__all__ = ["PG_FAILPOINTS"]

PG_FAILPOINTS: tuple[str, ...] = (
    "pg.publish.before-commit",
    "pg.append.before-transaction",
    "pg.append.mid-batch",
    "pg.append.before-commit",
    "pg.repair.before-commit",
    "pg.schema.before-commit",
)
"""Every failpoint name the PostgreSQL backend passes through: the first batch's commit,
a later batch's transaction (before it, half its rows sent, before its commit), a repair's
commit, and a schema upgrade's commit."""
