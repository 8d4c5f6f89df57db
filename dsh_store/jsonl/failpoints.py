"""Named crash points for the write path, used by the SIGKILL crash tests.

A failpoint does nothing unless the environment variable ``DSH_STORE_FAILPOINT``
names it when this module is first imported. An armed failpoint kills the
current process with ``SIGKILL`` — no cleanup, no buffered output, exactly what a
power cut or an OOM kill leaves behind. ``DSH_STORE_FAILPOINT_SKIP=N`` lets the
first ``N`` hits pass and kills on hit ``N + 1``.

The names in use are listed in :data:`FAILPOINTS` and in ``docs/format.md``; the
PostgreSQL backend's (``pg.*``) in :data:`dsh_store.postgres.failpoints.PG_FAILPOINTS`
and ``docs/postgres.md``.
"""

from __future__ import annotations

import os
import signal

__all__ = ["ANY_ARMED", "FAILPOINTS", "armed", "failpoint"]

FAILPOINTS: tuple[str, ...] = (
    "materialize.after-temp-write",
    "materialize.before-link",
    "materialize.after-link",
    "append.before-write",
    "append.partial-write",
    "append.after-write",
    "append.before-fsync",
    "append.after-fsync",
    "rollback.before-truncate",
    "repair.after-intent",
    "repair.after-sidecar",
    "repair.after-truncate",
    "migrate.before-fsync",
    "migrate.before-link",
    "migrate.after-link",
    "migrate.before-replace",
)
"""Every failpoint name the JSONL write paths (append, repair, migration publish) pass
through; the PostgreSQL ones are :data:`dsh_store.postgres.failpoints.PG_FAILPOINTS`."""

# Read once: the hot path then costs one comparison against None.
_ARMED: str | None = os.environ.get("DSH_STORE_FAILPOINT") or None
_skip_remaining: int = int(os.environ.get("DSH_STORE_FAILPOINT_SKIP", "0") or "0")

ANY_ARMED: bool = _ARMED is not None
"""Whether a failpoint is armed in this process at all (fixed at import): a hot path may
skip its failpoint calls when not."""


def armed(name: str) -> bool:
    """Tell whether ``name`` is the failpoint selected for this process."""
    return _ARMED is not None and name == _ARMED


def failpoint(name: str) -> None:
    """Kill this process with SIGKILL if ``name`` is the armed failpoint (after the skips)."""
    global _skip_remaining
    if _ARMED is None or name != _ARMED:
        return
    if _skip_remaining > 0:
        _skip_remaining -= 1
        return
    os.kill(os.getpid(), signal.SIGKILL)
