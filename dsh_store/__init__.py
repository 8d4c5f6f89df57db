"""dsh-store: durable JSONL session event logs (deepseek-harness session format v4).

The package root re-exports the public API. Heavy modules load on first use so that
``import dsh_store`` and the ``dsh-store`` command start fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import (
    ConcurrentModificationError,
    CorruptLogError,
    DshStoreError,
    EventValidationError,
    LosslessJsonError,
    MigrationRefusedError,
    NotASessionError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    UnsupportedVersionError,
    WriterBrokenError,
)

__version__ = "0.1.0"

# Public name -> defining module, imported lazily by __getattr__.
_LAZY: dict[str, str] = {}

__all__ = [
    "ConcurrentModificationError",
    "CorruptLogError",
    "DshStoreError",
    "EventValidationError",
    "LosslessJsonError",
    "MigrationRefusedError",
    "NotASessionError",
    "SessionExistsError",
    "SessionLockedError",
    "SessionNotFoundError",
    "UnsupportedVersionError",
    "WriterBrokenError",
    "__version__",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'dsh_store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value
