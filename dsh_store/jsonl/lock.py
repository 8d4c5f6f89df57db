"""The single-writer lock of a session: ``session.lock`` in the session directory.

A write handle holds an exclusive, non-blocking OS lock (``flock`` through
``filelock``) for as long as it is open. Readers never lock. The lock file is
created 0600 and never deleted, so every contender locks the same inode.
"""

from __future__ import annotations

import os
from pathlib import Path

from filelock import FileLock, Timeout

from dsh_store.errors import SessionLockedError, StorageError
from dsh_store.jsonl.layout import FILE_MODE, LOCK_NAME

__all__ = ["SessionLock"]


class SessionLock:
    """Exclusive writer lock of one session directory.

    One object per write handle. The lock state is shared across threads (the
    write-behind worker and the caller use one handle), and a second
    ``SessionLock`` on the same directory — in this process or another — is
    refused at once with :class:`SessionLockedError`. The directory must exist.
    """

    def __init__(self, session_dir: str | os.PathLike[str], session_id: str) -> None:
        self.path = Path(session_dir) / LOCK_NAME
        self.session_id = session_id
        self._lock = FileLock(
            self.path,
            timeout=0,
            mode=FILE_MODE,
            thread_local=False,  # the writer thread and the caller share the hold
            blocking=False,
            fallback_to_soft=False,  # a marker file is no OS lock; fail instead
            preserve_lock_file=True,  # deleting it would let two writers lock two inodes
        )

    @property
    def is_held(self) -> bool:
        """True while this object holds the lock."""
        return self._lock.is_locked

    def acquire(self) -> None:
        """Take the lock now or fail; re-acquiring a held lock is an error too.

        :raises SessionLockedError: another handle holds it (or this one already does).
        :raises StorageError: the lock file cannot be opened or created (permissions, ...).
        """
        if self._lock.is_locked:
            raise SessionLockedError(self.session_id, str(self.path))
        try:
            self._lock.acquire()
        except Timeout as error:
            raise SessionLockedError(self.session_id, str(self.path)) from error
        except OSError as error:  # e.g. no permission to open or create the lock file
            raise StorageError(
                "taking the session lock", str(self.path), error, then="take the lock again"
            ) from error

    def release(self) -> None:
        """Release the lock if held; idempotent. The lock file stays."""
        if self._lock.is_locked:
            self._lock.release(force=True)

    def __enter__(self) -> SessionLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
