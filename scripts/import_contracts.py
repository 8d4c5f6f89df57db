"""The repository's own import-linter contract: no module uses another module's private names.

import-linter's built-in contracts judge which module imports which; none looks at the
names imported. ``private_names`` (registered in ``[tool.importlinter]`` of pyproject.toml,
run by ``lint-imports``) parses every module of the root package and reports each

- ``from pkg.mod import _name`` (also ``from . import _name``) of another module, and
- ``mod._name`` where ``mod`` was bound by importing another module of the package,

where ``_name`` has one leading underscore and is not a module: a private *module*
(``dsh_store._output``, ``migrations._lenient``) is a module of its package, importable as
a module; a private name belongs to the module that defines it. Imports under
``TYPE_CHECKING`` count too: a private name is private for type checking as well.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain.contract import Contract, ContractCheck


@dataclass(frozen=True, order=True)
class PrivateUse:
    """One use of another module's private name."""

    importer: str
    line: int
    owner: str
    name: str


def is_private(name: str) -> bool:
    """One leading underscore: ``_x`` (not a dunder such as ``__all__``)."""
    return name.startswith("_") and not name.startswith("__")


def private_uses(
    module: str, source: str, modules: frozenset[str], *, package: bool
) -> list[PrivateUse]:
    """Every use in ``source`` (the text of ``module``) of a private name of another module.

    ``modules`` names every module of the root package (to tell a submodule from a name);
    ``package`` says whether ``module`` is a package (its ``__init__``).
    """
    here = module if package else module.rpartition(".")[0]
    uses: list[PrivateUse] = []
    bound: dict[str, str] = {}  # local name -> the package module it is bound to
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    if alias.asname is not None:
                        bound[alias.asname] = alias.name
                    else:
                        bound[alias.name.partition(".")[0]] = alias.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom):
            owner = _absolute(node, here)
            if owner not in modules:
                continue
            for alias in node.names:
                target = f"{owner}.{alias.name}"
                if target in modules:
                    bound[alias.asname or alias.name] = target
                elif is_private(alias.name) and owner != module:
                    uses.append(PrivateUse(module, node.lineno, owner, alias.name))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and is_private(node.attr)
            and f"{bound[node.value.id]}.{node.attr}" not in modules
            and bound[node.value.id] != module
        ):
            uses.append(PrivateUse(module, node.lineno, bound[node.value.id], node.attr))
    return sorted(uses)


def _absolute(node: ast.ImportFrom, here: str) -> str:
    """The absolute module an ``ImportFrom`` imports from (``here`` is the importer's package)."""
    if not node.level:
        return node.module or ""
    parts = here.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


class PrivateNamesContract(Contract):
    """No module of the root package uses a private name (``_x``) of another module."""

    type_name = "private_names"

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        modules = frozenset(graph.modules)
        found: list[PrivateUse] = []
        for module in sorted(modules):
            spec = importlib.util.find_spec(module)
            if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
                continue
            with open(spec.origin, encoding="utf-8") as file:
                source = file.read()
            package = spec.submodule_search_locations is not None
            found.extend(private_uses(module, source, modules, package=package))
        return ContractCheck(kept=not found, metadata={"uses": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for use in check.metadata["uses"]:
            output.print_error(
                f"{use.importer}:{use.line} uses {use.owner}.{use.name}, a private name",
                bold=False,
            )
        output.new_line()
