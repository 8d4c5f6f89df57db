"""The README's Python examples run as written (in a scratch HOME)."""

from __future__ import annotations

import asyncio
import re
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


def test_readme_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in BLOCKS:
        if "await " in block:
            body = textwrap.indent(block, "    ")
            exec(f"async def _example():\n{body}", namespace)
            asyncio.run(namespace["_example"]())  # type: ignore[operator]
        else:
            exec(block, namespace)
    log = tmp_path / ".dsh" / "sessions" / "--home-me-project--" / "session-1" / "session.v4.jsonl"
    assert log.exists()
    assert b'"type":"turn/start","seq"' in log.read_bytes()
