"""``dsh-store pg``: administration of a PostgreSQL store (``pg init``: its schema).

The commands render what :mod:`dsh_store.postgres` returns; a store URL is only ever
printed with its password masked (:func:`dsh_store.postgres.url.redact`), in results and
in errors alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .._output import JSON_SCHEMA_VERSION, printable
from ._common import common_options, echo_json, fail, guarded

if TYPE_CHECKING:
    from ..postgres.schema import SchemaInit


@click.group(name="pg")
def pg() -> None:
    """Administer a PostgreSQL store (the postgres extra: pip install 'dsh-store[postgres]').

    \b
    Examples:
      dsh-store pg init postgresql://agent@db.internal/sessions
    """


@pg.command(name="init")
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print the result as a JSON object.")
@common_options
@guarded
def init(url: str, as_json: bool) -> None:
    """Create or upgrade the store's schema at URL; idempotent.

    Applies the missing schema migrations in order, in one transaction, under an advisory
    lock (concurrent runs apply each once). A schema newer than this dsh-store is refused
    and left untouched (exit 1). The tables live in the connection's current schema; pick
    another with ?options=-csearch_path%3Dname. The password in URL is never printed.

    \b
    Examples:
      dsh-store pg init postgresql://agent@db.internal/sessions
      dsh-store pg init "$DATABASE_URL" --json
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..postgres.url import is_postgres_url, redact

    if not is_postgres_url(url):
        fail(f"{redact(url)} is not a postgresql:// URL", 2)
    # the backend (and psycopg, the postgres extra) only for a valid URL
    from ..postgres.backend import PostgresBackend

    backend = PostgresBackend(url)
    try:
        result = backend.init()
    finally:
        backend.close()
    if as_json:
        echo_json(init_document(result))
        return
    click.echo(describe(result))


def init_document(result: SchemaInit) -> dict[str, Any]:
    """The ``pg init --json`` object (docs/schemas/pg-init.schema.json)."""
    return {
        "schema": JSON_SCHEMA_VERSION,
        "store": result.url,
        "databaseSchema": result.schema,
        "action": result.action,
        "versionBefore": result.before,
        "versionAfter": result.after,
        "applied": [
            {"version": migration.version, "summary": migration.summary}
            for migration in result.applied
        ],
    }


def describe(result: SchemaInit) -> str:
    """One line saying what ``pg init`` found and did."""
    where = f"{result.url} (database schema {result.schema})"
    steps = ", ".join(f"{m.version} ({m.summary})" for m in result.applied)
    if result.action == "created":
        text = f"created schema version {result.after} in {where}: applied {steps}"
    elif result.action == "upgraded":
        text = (
            f"upgraded schema version {result.before} to {result.after} in {where}: applied {steps}"
        )
    else:
        text = f"schema version {result.after} in {where} is current; nothing to do"
    return printable(text)
