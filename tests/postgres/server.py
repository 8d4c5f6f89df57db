"""The PostgreSQL server the tests run against, and one fresh schema per test.

``scripts/test`` starts a throwaway server (``scripts/pg-server``) and names it in
``DSH_STORE_PG_URL``; any reachable server given there works the same. Without one, every
test marked ``@pytest.mark.requires("postgres")`` skips with the reason (and fails in CI,
which names ``postgres`` in ``DSH_STORE_REQUIRE``). Each test gets its own schema, so
stores never see another test's sessions; psycopg is imported only when a test needs it.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from dsh_store.postgres.url import redact

PG_URL_ENV = "DSH_STORE_PG_URL"


def base_url() -> str | None:
    """The server's URL from the environment, None when unset."""
    return os.environ.get(PG_URL_ENV) or None


@functools.cache
def postgres_missing_reason() -> str | None:
    """Why PostgreSQL tests cannot run here (one line), or None when the server answers."""
    url = base_url()
    if url is None:
        why = os.environ.get("DSH_STORE_PG_UNAVAILABLE")
        if why:
            return f"needs a PostgreSQL server: {why}"
        return (
            f"needs a PostgreSQL server: {PG_URL_ENV} is unset "
            "(scripts/test starts a throwaway one and sets it)"
        )
    try:
        import psycopg
    except ImportError:
        return "needs psycopg 3: pip install 'dsh-store[postgres]' (the test extra has it)"
    try:
        with psycopg.connect(url, connect_timeout=10) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"cannot reach the PostgreSQL server at {redact(url)}: {first}"
    return None


def url_with_schema(url: str, schema: str) -> str:
    """``url`` with ``search_path`` set to ``schema`` (libpq's ``options`` parameter)."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options={quote(f'-c search_path={schema}', safe='')}"


def create_schema() -> tuple[str, str]:
    """A new empty schema on the test server: ``(schema name, URL whose tables live there)``."""
    import psycopg

    url = base_url()
    assert url is not None
    schema = f"test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
    return schema, url_with_schema(url, schema)


def drop_schema(schema: str) -> None:
    """Drop a schema made by :func:`create_schema`, with everything in it."""
    import psycopg

    url = base_url()
    assert url is not None
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def empty_store_url() -> Iterator[str]:
    """The body of a store-URL fixture: skip without a server, else yield the URL of an empty
    store (its own schema) and drop that schema afterwards."""
    reason = postgres_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    schema, url = create_schema()
    try:
        yield url
    finally:
        drop_schema(schema)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of an empty store on the test server (its own schema), dropped afterwards."""
    yield from empty_store_url()
