"""The schema checker itself: it must reject what the schemas forbid."""

from __future__ import annotations

import pytest

from tests.cli.schema_check import errors, load_schema


@pytest.mark.parametrize(
    "name", ["verify", "migrate", "repair", "inspect", "list", "salvage", "pg-init"]
)
def test_every_schema_uses_only_supported_keywords(name: str) -> None:
    schema = load_schema(name)
    empty_object_problems = errors([{}] if schema["type"] == "array" else {}, schema)
    assert any("missing required key" in problem for problem in empty_object_problems)


def test_checker_reports_each_kind_of_violation() -> None:
    schema = load_schema("verify")
    bad = {
        "files": [
            {
                "path": 3,
                "classification": "fine",
                "version": -1,
                "events": None,
                "findings": [{"rule": "r", "message": "m", "line": 0, "offset": None}],
                "extra": True,
            }
        ],
        "summary": {"weird": 1},
    }
    problems = errors(bad, schema)
    assert "$.files[0].path: 3 is not of type ['string']" in problems
    assert any("'fine' is not one of" in p for p in problems)
    assert "$.files[0].version: -1 is below 0" in problems
    assert "$.files[0].findings[0]: missing required key 'seq'" in problems
    assert "$.files[0].findings[0].line: 0 is below 1" in problems
    assert "$.files[0]: unexpected key 'extra'" in problems
    assert any(p.startswith("$.summary.weird(name)") for p in problems)


def test_checker_refuses_unknown_keywords() -> None:
    with pytest.raises(ValueError, match=r"unsupported keywords \['pattern'\]"):
        errors("x", {"type": "string", "pattern": "a"})
