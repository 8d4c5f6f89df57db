"""Parent ``subagent/catalog`` completion of the 3->4 edge.

A v4 parent lists every direct child in ``subagent/catalog`` facts. v3 parents may lack
them, so at EOF the edge appends one fact per known child that has no entry yet, derived
from the child's evidence: its header (id, createdAt) and, when the caller supplies them,
its own ``subagent/descriptor`` payloads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._seq_references import is_safe_int

__all__ = ["CatalogRefusal", "CatalogTracker", "ChildFact", "check_catalog_fact"]

_MODES_V0 = frozenset({"continuable", "one-shot"})


class CatalogRefusal(ValueError):
    """A catalog or child-evidence rule failure; ``seq`` locates a source entry if any."""

    def __init__(self, detail: str, rule: str, seq: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.rule = rule
        self.seq = seq


@dataclass(frozen=True)
class ChildFact:
    """What the parent may know about one direct child."""

    child_id: str
    created_at: int
    descriptors: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_header(
        cls, header: Mapping[str, Any], descriptors: Sequence[Mapping[str, Any]]
    ) -> ChildFact:
        """Build from a child's header row and its own descriptor payloads."""
        child_id = header.get("id")
        created_at = header.get("createdAt")
        if not isinstance(child_id, str) or not child_id or not is_safe_int(created_at):
            raise CatalogRefusal(
                f"child header {dict(header)!r} lacks a string id or a safe integer createdAt",
                "invalid child evidence",
            )
        assert isinstance(created_at, int)
        return cls(child_id, created_at, tuple(descriptors))

    def supported_descriptor(self) -> Mapping[str, Any] | None:
        """The child's one descriptor of version 1-3, or None if it has zero or several."""
        supported = [d for d in self.descriptors if d.get("version") in (1, 2, 3)]
        return supported[0] if len(supported) == 1 else None


def check_catalog_fact(data: object) -> None:
    """Refuse a catalog payload that breaks the v4 catalog fact rules."""
    if not isinstance(data, dict):
        raise CatalogRefusal("subagent/catalog data is not an object", "invalid catalog fact")
    version = data.get("version")
    mode = data.get("mode")
    if version not in (0, 1) or isinstance(version, bool):
        raise CatalogRefusal(f"catalog version {version!r} is not 0 or 1", "invalid catalog fact")
    allowed = _MODES_V0 | ({"unknown"} if version == 1 else set())
    if mode not in allowed:
        raise CatalogRefusal(
            f"catalog mode {mode!r} is not allowed at version {version}", "invalid catalog fact"
        )
    if mode == "continuable" and not isinstance(data.get("label"), str):
        raise CatalogRefusal(
            "a continuable catalog entry needs a string label", "invalid catalog fact"
        )
    if "label" in data and not isinstance(data["label"], str):
        raise CatalogRefusal("a catalog label must be a string", "invalid catalog fact")
    if not isinstance(data.get("childId"), str) or not data["childId"]:
        raise CatalogRefusal(
            "a catalog entry needs a non-empty string childId", "invalid catalog fact"
        )


def _fact_from_descriptor(child: ChildFact, descriptor: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(descriptor.get("provider"), str):
        raise CatalogRefusal(
            f"child {child.child_id!r} descriptor has a non-string provider", "invalid descriptor"
        )
    mode = "continuable" if descriptor.get("version") == 1 else descriptor.get("mode")
    if mode not in _MODES_V0:
        raise CatalogRefusal(
            f"child {child.child_id!r} descriptor mode {mode!r} is not supported",
            "invalid descriptor",
        )
    fact: dict[str, Any] = {
        "version": 0,
        "childId": child.child_id,
        "childCreatedAt": child.created_at,
        "mode": mode,
    }
    if "label" in descriptor:
        fact["label"] = descriptor["label"]
    try:
        check_catalog_fact(fact)
    except CatalogRefusal as refusal:
        raise CatalogRefusal(
            f"child {child.child_id!r} descriptor: {refusal.detail}", "invalid descriptor"
        ) from None
    return fact


class CatalogTracker:
    """Collects the parent's own catalog entries after its final inherited marker."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, dict[str, Any]]] = {}
        self._duplicate_seq: int | None = None

    def reset_at_inherited_marker(self) -> None:
        """A tagged ``session/end-seed``: entries before it belong to the inherited prefix."""
        self._entries.clear()
        self._duplicate_seq = None

    def add(self, seq: int, data: dict[str, Any]) -> None:
        """Record one source ``subagent/catalog`` payload (already checked)."""
        child_id = data["childId"]
        if child_id in self._entries:
            if self._duplicate_seq is None:
                self._duplicate_seq = seq
            return
        self._entries[child_id] = (seq, data)

    def completion(self, children: Sequence[ChildFact]) -> list[dict[str, Any]]:
        """The catalog facts to append at EOF, in (createdAt, id) order."""
        if self._duplicate_seq is not None:
            raise CatalogRefusal(
                "two subagent/catalog entries name the same childId",
                "duplicate catalog child",
                self._duplicate_seq,
            )
        appended: list[dict[str, Any]] = []
        for child in sorted(children, key=lambda c: (c.created_at, c.child_id)):
            descriptor = child.supported_descriptor()
            existing = self._entries.get(child.child_id)
            if existing is not None:
                self._check_existing(child, descriptor, *existing)
            elif descriptor is not None:
                appended.append(_fact_from_descriptor(child, descriptor))
            else:
                appended.append(
                    {
                        "version": 1,
                        "childId": child.child_id,
                        "childCreatedAt": child.created_at,
                        "mode": "unknown",
                    }
                )
        return appended

    @staticmethod
    def _check_existing(
        child: ChildFact, descriptor: Mapping[str, Any] | None, seq: int, entry: dict[str, Any]
    ) -> None:
        if entry.get("childCreatedAt") != child.created_at:
            raise CatalogRefusal(
                f"catalog entry for {child.child_id!r} says childCreatedAt "
                f"{entry.get('childCreatedAt')!r} but the child was created at {child.created_at}",
                "conflicting catalog entry",
                seq,
            )
        if descriptor is not None:
            expected = _fact_from_descriptor(child, descriptor)
            if entry.get("mode") != expected["mode"] or entry.get("label") != expected.get("label"):
                raise CatalogRefusal(
                    f"catalog entry for {child.child_id!r} (mode {entry.get('mode')!r}, label "
                    f"{entry.get('label')!r}) disagrees with the child's descriptor (mode "
                    f"{expected['mode']!r}, label {expected.get('label')!r})",
                    "conflicting catalog entry",
                    seq,
                )
