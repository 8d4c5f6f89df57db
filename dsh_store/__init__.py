"""dsh-store: durable JSONL session event logs (deepseek-harness session format v4).

The package root re-exports the public API. Heavy modules load on first use so that
``import dsh_store`` and the ``dsh-store`` command start fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import (
    ConcurrentModificationError,
    CorruptLogError,
    DshStoreError,
    EventValidationError,
    InvalidSessionIdError,
    LosslessJsonError,
    MigrationRefusedError,
    NotASessionError,
    SalvageRefusedError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    UnsupportedVersionError,
    WriterBrokenError,
)

if TYPE_CHECKING:
    from .inspection import Inspection
    from .migrate import MigrationResult, migrate_file, migrate_store, upgrade
    from .model import (
        SESSION_FORMAT_VERSION,
        Session,
        SessionEvent,
        SessionHeader,
        build_fork_seed,
        fold_request_header,
        fold_surface,
        interrupted_closers,
    )
    from .restore import FileReport, classify, examine, read_log
    from .store import (
        AsyncLiveSession,
        JsonlStore,
        LiveSession,
        RepairPlan,
        SalvagePlan,
        repair_file,
        salvage_file,
    )
    from .verify import verify_path

__version__ = "0.1.0"

# Public name -> defining module, imported lazily by __getattr__.
_LAZY: dict[str, str] = {
    "SESSION_FORMAT_VERSION": ".model",
    "Session": ".model",
    "SessionEvent": ".model",
    "SessionHeader": ".model",
    "build_fork_seed": ".model",
    "fold_request_header": ".model",
    "fold_surface": ".model",
    "interrupted_closers": ".model",
    "AsyncLiveSession": ".store",
    "JsonlStore": ".store",
    "LiveSession": ".store",
    "RepairPlan": ".store",
    "repair_file": ".store",
    "SalvagePlan": ".store",
    "salvage_file": ".store",
    "FileReport": ".restore",
    "Inspection": ".inspection",
    "classify": ".restore",
    "examine": ".restore",
    "read_log": ".restore",
    "verify_path": ".verify",
    "MigrationResult": ".migrate",
    "migrate_file": ".migrate",
    "migrate_store": ".migrate",
    "upgrade": ".migrate",
}

__all__ = [
    "ConcurrentModificationError",
    "CorruptLogError",
    "DshStoreError",
    "EventValidationError",
    "InvalidSessionIdError",
    "LosslessJsonError",
    "MigrationRefusedError",
    "NotASessionError",
    "SalvageRefusedError",
    "SessionExistsError",
    "SessionLockedError",
    "SessionNotFoundError",
    "UnsupportedVersionError",
    "WriterBrokenError",
    "__version__",
    *_LAZY,
]


def _lazy_module_getattr(
    package: str, table: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A PEP 562 module ``__getattr__`` importing ``table[name]`` (a module name, absolute or
    relative to ``package``) on first use of ``name`` and caching the value in
    ``namespace`` (the module's globals).

    Shared by the package's lazy modules; keeping rarely used submodules out of start-up
    is what lets ``dsh-store`` commands start fast.
    """

    def module_getattr(name: str) -> Any:
        module_name = table.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name, package), name)
        namespace[name] = value  # later lookups find it without calling this again
        return value

    return module_getattr


__getattr__ = _lazy_module_getattr(__name__, _LAZY, globals())
