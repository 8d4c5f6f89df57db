"""``PostgresStore``: :class:`~dsh_store.store.SessionStore` over a PostgreSQL database.

Everything a store does (the write-behind controller, restore, the repair on open and
load, append, fork, list) is :class:`~dsh_store.store.SessionStore`'s, the same code as for
JSONL; the database is reached only through :class:`~dsh_store.postgres.backend.PostgresBackend`.
``PostgresStore(url)`` is ``SessionStore(PostgresBackend(url))`` plus what only a URL has:
:meth:`~PostgresStore.init` (the schema), :attr:`~PostgresStore.url` (printable) and
:meth:`~PostgresStore.close` (the shared connection).
"""

from __future__ import annotations

from collections.abc import Callable

from ..jsonl.writebehind import (
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_BATCH_EVENTS,
    DEFAULT_MAX_PENDING_BYTES,
    DEFAULT_WINDOW_S,
)
from ..store import SessionStore
from .backend import PostgresBackend
from .schema import SchemaInit

__all__ = ["PostgresStore"]


class PostgresStore(SessionStore):
    """Session logs in a PostgreSQL database, with the API of :class:`~dsh_store.JsonlStore`.

    :param url: a libpq URL; the tables live in its connection's current schema (a URL
        picks one with ``?options=-csearch_path%3Dname``) and are created on first write
        (or by :meth:`init`, ``dsh-store pg init URL``).

    The other parameters are :class:`~dsh_store.store.SessionStore`'s.
    """

    backend: PostgresBackend

    def __init__(
        self,
        url: str,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        max_batch_events: int | None = DEFAULT_MAX_BATCH_EVENTS,
        max_batch_bytes: int | None = DEFAULT_MAX_BATCH_BYTES,
        max_pending_bytes: int | None = DEFAULT_MAX_PENDING_BYTES,
        clock: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(
            PostgresBackend(url),
            window_s=window_s,
            max_batch_events=max_batch_events,
            max_batch_bytes=max_batch_bytes,
            max_pending_bytes=max_pending_bytes,
            clock=clock,
        )

    @property
    def url(self) -> str:
        """The store's URL, with any password replaced by ``***`` (safe to print)."""
        return self.backend.display

    def init(self) -> SchemaInit:
        """Create or upgrade the schema (``dsh-store pg init``); what was done. Idempotent.

        :raises SchemaVersionError: the schema is newer than this dsh-store knows.
        """
        return self.backend.init()

    def close(self) -> None:
        """Close the store's shared connection (live sessions keep their own)."""
        self.backend.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
