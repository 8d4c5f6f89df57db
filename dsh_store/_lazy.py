"""The PEP 562 lazy attribute hook shared by the package's lazy modules."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_module_getattr"]


def lazy_module_getattr(
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
