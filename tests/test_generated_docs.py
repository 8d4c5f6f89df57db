"""docs/events.md and docs/cli-reference.md are what scripts/gen_docs.py makes of the code."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO


def _gen_docs() -> ModuleType:
    scripts = str(REPO / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    return importlib.import_module("gen_docs")


def test_the_event_reference_is_fresh() -> None:
    gen_docs = _gen_docs()
    assert gen_docs.EVENTS_MD.read_text(encoding="utf-8") == gen_docs.events_markdown(), (
        "docs/events.md is stale: run python scripts/gen_docs.py"
    )


def test_the_cli_reference_is_fresh() -> None:
    gen_docs = _gen_docs()
    assert gen_docs.CLI_REFERENCE_MD.read_text(encoding="utf-8") == (
        gen_docs.cli_reference_markdown()
    ), "docs/cli-reference.md is stale: run python scripts/gen_docs.py"


def test_check_mode_reports_a_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gen_docs = _gen_docs()
    assert gen_docs.main(["--check"]) == 0
    stale = tmp_path / "events.md"
    stale.write_text(gen_docs.events_markdown().replace("| yes |", "| no |", 1))
    monkeypatch.setattr(gen_docs, "REPO", tmp_path)
    monkeypatch.setattr(gen_docs, "TARGETS", ((stale, gen_docs.events_markdown),))
    assert gen_docs.main(["--check"]) == 1
    assert "events.md is stale" in capsys.readouterr().out
    assert "| no |" in stale.read_text()  # --check never writes


def test_every_event_type_and_command_is_documented() -> None:
    from dsh_store.cli import main
    from dsh_store.model.vocabulary import KNOWN_TYPES

    events = (REPO / "docs" / "events.md").read_text(encoding="utf-8")
    for event_type in KNOWN_TYPES:
        assert f"`{event_type}`" in events, event_type
    assert "`plugin:*`" in events
    reference = (REPO / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    for name in main.list_commands(None):  # type: ignore[arg-type]
        assert f"## dsh-store {name}\n" in reference, name
    assert "(cli-reference.md)" in (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
