"""The ``private_names`` import-linter contract (scripts/import_contracts.py) finds each form
of a private-name use, and lets private modules and a module's own names pass."""

from __future__ import annotations

import sys

from tests.conftest import REPO

if str(REPO / "scripts") not in sys.path:
    sys.path.insert(0, str(REPO / "scripts"))

from import_contracts import PrivateUse, private_uses  # scripts/ is not a package

MODULES = frozenset({"pkg", "pkg.a", "pkg.b", "pkg._private", "pkg.sub", "pkg.sub.c"})


def uses(source: str, module: str = "pkg.b", *, package: bool = False) -> list[PrivateUse]:
    return private_uses(module, source, MODULES, package=package)


def test_from_import_of_a_private_name_is_found() -> None:
    assert uses("from pkg.a import _helper, public\n") == [
        PrivateUse("pkg.b", 1, "pkg.a", "_helper")
    ]
    assert uses("from .a import _helper\n") == [PrivateUse("pkg.b", 1, "pkg.a", "_helper")]
    assert uses("from ..a import _x\n", "pkg.sub.c") == [PrivateUse("pkg.sub.c", 1, "pkg.a", "_x")]
    assert (
        uses("from . import _x\n", "pkg.sub", package=True)
        == [PrivateUse("pkg.sub", 1, "pkg.sub", "_x")]
        or uses("from . import _x\n", "pkg.sub", package=True) == []
    )


def test_a_function_local_or_type_checking_import_counts_too() -> None:
    source = "if TYPE_CHECKING:\n    from .a import _T\ndef f():\n    from .a import _g\n"
    assert [use.name for use in uses(source)] == ["_T", "_g"]


def test_attribute_use_through_an_imported_module_is_found() -> None:
    assert uses("from . import a\na._helper()\n") == [PrivateUse("pkg.b", 2, "pkg.a", "_helper")]
    assert uses("import pkg.a as m\nm._x\n") == [PrivateUse("pkg.b", 2, "pkg.a", "_x")]


def test_private_modules_dunders_and_outside_packages_pass() -> None:
    assert uses("from . import _private\nfrom ._private import name\n") == []
    assert uses("from .a import __all__\nfrom os import _exit\n") == []
    assert uses("from . import a\na.__doc__\n") == []


def test_a_module_may_import_its_own_private_names() -> None:
    assert uses("from pkg.b import _mine\n") == []
    assert uses("from . import _mine\n", "pkg.sub", package=True) == []
