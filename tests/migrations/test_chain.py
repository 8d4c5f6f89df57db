"""The static edge registry, header-only classification and the in-memory entry points."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_store import migrations
from dsh_store.errors import MigrationRefusedError, UnsupportedVersionError
from dsh_store.migrate import classify_header, upgrade, upgrade_header
from dsh_store.migrations import EDGES, build_registry
from dsh_store.model import SessionHeader

REPO = Path(__file__).resolve().parents[2]
V0_BASIC = REPO / "fixtures" / "valid" / "v0-basic" / "session.jsonl"


@dataclass
class _FakeEdge:
    source: int
    target: int

    def header(self, header: Any, context: Any) -> Any:
        return header

    def stage(self, header: Any, context: Any) -> Any:
        raise AssertionError("never started")


def _edges(*pairs: tuple[int, int]) -> list[Any]:
    return [_FakeEdge(source, target) for source, target in pairs]


def test_the_registry_holds_one_adjacent_edge_per_version() -> None:
    assert sorted(EDGES) == [0, 1, 2, 3]
    assert [(edge.source, edge.target) for edge in EDGES.values()] == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
    ]
    registry = build_registry(_edges((0, 1), (1, 2), (2, 3), (3, 4)))
    assert sorted(registry) == [0, 1, 2, 3]


def test_a_gap_is_refused() -> None:
    with pytest.raises(ImportError, match=r"incomplete: missing edges from \[2\]"):
        build_registry(_edges((0, 1), (1, 2), (3, 4)))


def test_a_duplicate_is_refused() -> None:
    with pytest.raises(ImportError, match="two migration edges start at version 1"):
        build_registry(_edges((0, 1), (1, 2), (1, 2), (2, 3), (3, 4)))


def test_a_non_adjacent_or_extra_edge_is_refused() -> None:
    with pytest.raises(ImportError, match="1->3 is not adjacent"):
        build_registry(_edges((0, 1), (1, 3), (3, 4)))
    with pytest.raises(ImportError, match=r"unexpected edges from \[4\]"):
        build_registry(_edges((0, 1), (1, 2), (2, 3), (3, 4), (4, 5)))


def _write(path: Path, header: bytes, body: bytes = b"") -> Path:
    path.write_bytes(header + b"\n" + body)
    return path


GARBAGE = b"\x00\xff not json at all {{{\n" * 50 + b"\xde\xad"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            b'{"type":"session","version":0,"id":"a","createdAt":1,"delegationDepth":0}',
            "migration-required",
        ),
        (b'{"type":"session","version":0,"id":"a","createdAt":1}', "migration-required"),
        (
            b'{"type":"session","version":2,"id":"a","createdAt":1,"isSeeded":false,"delegationDepth":0}',
            "migration-required",
        ),
        (
            b'{"type":"session","version":4,"id":"a","createdAt":1,"isSeeded":false,"delegationDepth":0}',
            "current",
        ),
        (b'{"type":"session","version":5,"id":"a"}', "unsupported"),
        (b'{"type":"session","version":-1,"id":"a"}', "unsupported"),
        (
            b'{"type":"session","version":1,"id":"a","createdAt":1,"delegationDepth":0,"seedLength":-3}',
            "unsupported",
        ),
        (
            b'{"type":"session","version":2,"id":"a","createdAt":1,"isSeeded":false,"delegationDepth":0,"agentPreset":"ptc"}',
            "migration-required",
        ),
        (b'{"type":"session","id":"a"}', "malformed"),
        (b"not json", "malformed"),
        (b'{"type":"session","version":4,"id":"a","createdAt":1,"delegationDepth":0}', "malformed"),
        (
            b'{"type":"session","version":3,"id":"a","createdAt":1,"isSeeded":false,"delegationDepth":0,"cwd":"rel"}',
            "malformed",
        ),
    ],
)
def test_header_only_classification_ignores_a_garbage_body(
    tmp_path: Path, header: bytes, expected: str
) -> None:
    path = _write(tmp_path / "session.jsonl", header, GARBAGE)
    assert classify_header(path) == expected


def test_classification_of_an_empty_or_missing_file_is_malformed(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert classify_header(tmp_path / "empty.jsonl") == "malformed"
    assert classify_header(tmp_path / "absent.jsonl") == "malformed"


def test_classification_reads_only_the_first_line(tmp_path: Path) -> None:
    body = GARBAGE * 2000  # megabytes of garbage after the header line
    path = _write(tmp_path / "session.jsonl", V0_BASIC.read_bytes().split(b"\n")[0], body)
    reads: list[int] = []
    real_read = os.read

    def counting_read(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        reads.append(len(data))
        return data

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "read", counting_read)
        assert classify_header(path) == "migration-required"
    # One bounded read holding the header line; the body is neither read nor decoded.
    assert len(reads) == 1
    assert reads[0] <= 64 * 1024 < path.stat().st_size


def test_upgrade_header_translates_through_every_edge() -> None:
    header = upgrade_header(
        {
            "type": "session",
            "version": 0,
            "id": "x",
            "createdAt": 3,
            "seedLength": 0,
            "parentSession": "p",
        }
    )
    assert header == SessionHeader(
        id="x", created_at=3, is_seeded=True, delegation_depth=0, parent_session="p"
    )


def test_upgrade_refuses_unknown_versions() -> None:
    with pytest.raises(UnsupportedVersionError, match="version 7"):
        upgrade({"type": "session", "version": 7, "id": "x"}, [])
    with pytest.raises(UnsupportedVersionError):
        upgrade({"type": "session", "version": True, "id": "x"}, [])


def test_upgrade_is_lazy_and_intermediate_versions_stay_in_memory(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {
            "type": "turn/end",
            "seq": 1,
            "time": 2,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
        {"type": "mode/set", "seq": 2, "time": 3, "data": {}},
    ]
    consumed: list[int] = []

    def source() -> Iterator[dict[str, Any]]:
        for row in rows:
            consumed.append(row["seq"])
            yield row

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        header, events = upgrade(
            {"type": "session", "version": 0, "id": "x", "createdAt": 1, "delegationDepth": 0},
            source(),
            path="mem",
        )
        assert consumed == []  # nothing read before iteration
        first = next(events)
        assert (first.type, first.seq, consumed) == ("turn/start", 0, [0])
        with pytest.raises(MigrationRefusedError) as caught:
            list(events)
    finally:
        os.chdir(cwd)
    assert caught.value.rule == "removed-event-type"
    assert caught.value.seq == 2
    assert caught.value.path == "mem"
    assert header.version == 4
    assert list(tmp_path.iterdir()) == []  # no v1/v2/v3 file anywhere


def test_the_package_ships_as_dsh_store_migrations() -> None:
    assert migrations.__name__ == "dsh_store.migrations"
    assert migrations.CURRENT_VERSION == 4


@pytest.mark.parametrize(
    "row",
    [
        {"type": ["assistant/chunk"], "seq": 0, "time": 1, "data": {}},
        {"type": {"x": 1}, "seq": 0, "time": 1, "data": {}},
        {"type": "session/title", "seq": 0, "time": 1, "data": {"title": "t", "messageSeqs": None}},
    ],
)
def test_unreadable_old_rows_are_typed_refusals(row: dict[str, Any]) -> None:
    from dsh_store.errors import DshStoreError

    header = {"type": "session", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0}
    _, events = upgrade(header, [row], path="/x/session.jsonl")
    with pytest.raises(DshStoreError) as caught:
        list(events)
    assert isinstance(caught.value, MigrationRefusedError), caught.value
    assert caught.value.path == "/x/session.jsonl"
