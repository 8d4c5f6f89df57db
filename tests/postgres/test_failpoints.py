"""The PostgreSQL failpoints: one list in the code, the same in docs/postgres.md, and exactly
the names the backend's ``failpoint(...)`` calls pass (no server needed)."""

from __future__ import annotations

import ast
import re

from dsh_store.jsonl.failpoints import FAILPOINTS
from dsh_store.postgres.failpoints import PG_FAILPOINTS
from tests.conftest import REPO

PACKAGE = REPO / "dsh_store"


def _called_names() -> dict[str, set[str]]:
    """Every literal ``failpoint("name")`` call in the package, by module path."""
    calls: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "failpoint"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                calls.setdefault(str(path.relative_to(REPO)), set()).add(node.args[0].value)
    return calls


def test_the_registry_is_exactly_the_names_the_postgres_code_passes() -> None:
    calls = _called_names()
    in_postgres = set().union(
        *(names for path, names in calls.items() if path.startswith("dsh_store/postgres/"))
    )
    assert in_postgres == set(PG_FAILPOINTS)
    assert len(PG_FAILPOINTS) == len(set(PG_FAILPOINTS))
    elsewhere = {
        name
        for path, names in calls.items()
        if not path.startswith("dsh_store/postgres/")
        for name in names
    }
    assert not elsewhere & set(PG_FAILPOINTS)
    assert not set(FAILPOINTS) & set(PG_FAILPOINTS)
    assert all(name.startswith("pg.") for name in PG_FAILPOINTS)


def test_docs_postgres_lists_the_same_failpoints() -> None:
    text = (REPO / "docs" / "postgres.md").read_text()
    section = text.split("## Failpoints", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^- `(pg\.[a-z.-]+)`", section, flags=re.MULTILINE)
    assert documented == list(PG_FAILPOINTS)
