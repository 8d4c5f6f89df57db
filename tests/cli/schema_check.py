"""A tiny JSON Schema checker for the subset docs/schemas/ uses (no new dependency).

Supported keywords: type (string or list), enum, properties, required,
additionalProperties (false or a schema), propertyNames, items, minimum.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from tests.conftest import REPO

SCHEMAS = REPO / "docs" / "schemas"
KNOWN = {
    "$schema", "$id", "title", "description", "type", "enum", "properties", "required",
    "additionalProperties", "propertyNames", "items", "minimum",
}  # fmt: skip


class VerifyFinding(TypedDict):
    """One ``files[].findings[]`` item of ``docs/schemas/verify.schema.json``."""

    rule: str
    message: str
    line: int | None
    offset: int | None
    seq: int | None


class VerifyFile(TypedDict):
    """One ``files[]`` item of ``docs/schemas/verify.schema.json``."""

    path: str
    classification: str
    version: int | None
    events: int | None
    findings: list[VerifyFinding]


def load_schema(name: str) -> dict[str, Any]:
    """``docs/schemas/<name>.schema.json``."""
    schema: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return schema


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return {
        "string": str, "boolean": bool, "object": dict, "array": list, "null": type(None)
    }[kind] is type(value)  # fmt: skip


def errors(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every violation of ``schema`` by ``value``, as ``path: problem`` strings."""
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError(f"{path}: schema uses unsupported keywords {sorted(unknown)}")
    found: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_type_ok(value, kind) for kind in kinds):
            return [f"{path}: {value!r} is not of type {kinds}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and isinstance(value, int | float) and value < schema["minimum"]:
        found.append(f"{path}: {value!r} is below {schema['minimum']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{path}: missing required key {key!r}")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if "propertyNames" in schema:
                found += errors(key, schema["propertyNames"], f"{path}.{key}(name)")
            if key in properties:
                found += errors(item, properties[key], f"{path}.{key}")
            elif extra is False:
                found.append(f"{path}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                found += errors(item, extra, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += errors(item, schema["items"], f"{path}[{index}]")
    return found
