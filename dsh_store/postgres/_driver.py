"""The psycopg driver, imported on first use, and its errors turned into typed ones.

Every connection dsh-store opens goes through :func:`connect`; every statement runs inside
:func:`database_errors`, which turns a driver error into
:class:`~dsh_store.errors.DatabaseError` with the store's URL redacted (no password in any
message) and the server's SQLSTATE.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import DatabaseError, PostgresUnavailableError
from .url import redact

if TYPE_CHECKING:
    import psycopg  # the postgres extra: imported on first use

__all__ = ["connect", "database_errors", "driver"]

CONNECT_TIMEOUT_S = 10
"""How long a connection attempt waits for the server before it fails (libpq's option)."""


def driver(url: str | None = None) -> object:
    """The imported ``psycopg`` module.

    :raises PostgresUnavailableError: psycopg is not installed (the postgres extra).
    """
    try:
        import psycopg  # the postgres extra: imported on first use
    except ImportError:
        raise PostgresUnavailableError(None if url is None else redact(url)) from None
    return psycopg


def _detail(error: BaseException, url: str) -> str:
    """The driver's message in one line, never holding the URL's password."""
    text = " ".join(str(error).split()) or type(error).__name__
    password = _password_of(url)
    if password:
        text = text.replace(password, "***")
    return text


def _password_of(url: str) -> str | None:
    from urllib.parse import urlsplit  # only to connect: off the CLI's cold start

    try:
        return urlsplit(url).password
    except ValueError:
        return None


@contextlib.contextmanager
def database_errors(operation: str, url: str) -> Iterator[None]:
    """Turn a psycopg error raised inside into :class:`DatabaseError` (``operation`` on ``url``)."""
    import psycopg  # the postgres extra: imported on first use

    try:
        yield
    except psycopg.Error as error:
        raise DatabaseError(
            operation, redact(url), _detail(error, url), sqlstate=error.sqlstate
        ) from None


def connect(
    url: str, operation: str, *, autocommit: bool = False
) -> psycopg.Connection[tuple[Any, ...]]:
    """A new connection to ``url``.

    :raises DatabaseError: the server is unreachable or refused the connection.
    :raises PostgresUnavailableError: psycopg is not installed.
    """
    driver(url)
    import psycopg  # the postgres extra: imported on first use

    with database_errors(operation, url):
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S)
