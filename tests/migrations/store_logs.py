"""Builders of small stores for the migration tests: header-only logs, a parent with a child."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from dsh_store.jsonl import layout

REPO = Path(__file__).resolve().parents[2]
VALID = REPO / "fixtures" / "valid"
PARENT_FIXTURE = VALID / "v3-plugin-sources" / "session.v3.jsonl"
PARENT_ID = "fixture-session"  # the fixture's header id
PARENT_CWD = "/work/project"  # the fixture's header cwd


def header_log(path: Path, version: int, session_id: str, **extra: Any) -> Path:
    """Write a header-only log of ``version`` at ``path`` (parents created); return it."""
    row = {
        "type": "session",
        "version": version,
        "id": session_id,
        "createdAt": 1_780_000_000_000,
        "isSeeded": False,
        "delegationDepth": 0,
        **extra,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(json.dumps(row, separators=(",", ":")).encode() + b"\n")
    return path


def parent_log(root: Path) -> Path:
    """The v3 fixture session filed in its session directory under ``root``; returns the log."""
    log = layout.session_dir(root, PARENT_ID, PARENT_CWD) / "session.v3.jsonl"
    log.parent.mkdir(parents=True)
    shutil.copyfile(PARENT_FIXTURE, log)
    return log


def store_with_child(root: Path) -> Path:
    """A store holding the v3 fixture session and one v4 child ``kid`` of it; the v3 log."""
    log = parent_log(root)
    child = layout.log_path(root, "kid", None)
    header_log(child, 4, "kid", createdAt=1_780_000_000_500, parentSession=PARENT_ID)
    return log


def fixture_copy(tmp_path: Path, fixture: str = "v0-basic") -> Path:
    """A copy of a valid fixture log in ``tmp_path/sess/``, under its own name; returns it."""
    (source,) = (VALID / fixture).glob("session*.jsonl")
    directory = tmp_path / "sess"
    directory.mkdir()
    shutil.copyfile(source, directory / source.name)
    return directory / source.name
