"""The README's Python examples run as written (in a scratch HOME) and print what it shows.

A ```` ```text ```` block right after a Python block is that block's exact output. The
examples also pass ``mypy --strict``, so a misspelled payload field in them is an error.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

README = (REPO / "README.md").read_text()
# (code, its output or None): each Python block with the text block right after it.
EXAMPLES = [
    (code, output if output else None)
    for code, output in re.findall(
        r"```python\n(.*?)```\n(?:\s*```text\n(.*?)```\n)?", README, re.S
    )
]
BLOCKS = [code for code, _ in EXAMPLES]


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 5
    assert sum(output is not None for _, output in EXAMPLES) >= 4


def test_readme_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the crashing child process inherits it
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for code, expected in EXAMPLES:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md", "exec"), namespace)
        if expected is not None:
            assert printed.getvalue() == expected, code
    log = tmp_path / ".dsh" / "sessions" / "--home-me-project--" / "session-1" / "session.v4.jsonl"
    assert log.exists()
    assert b'"type":"turn/start","seq"' in log.read_bytes()
    # The crash was real: the child's tool call is durable and restore closed its turn.
    assert b'"code":"TOOL_OUTCOME_UNKNOWN"' in log.read_bytes()
    assert b'"reason":{"kind":"interrupted"}' in log.read_bytes()


def test_readme_examples_pass_mypy_strict(tmp_path: Path) -> None:
    examples = tmp_path / "readme_examples.py"
    examples.write_text("\n".join(BLOCKS))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--enable-error-code",
            "deprecated",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(examples),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The check has teeth: one misspelled field in the first example is reported.
    misspelled = "\n".join(BLOCKS).replace('model=MODEL, id="a2"', 'model=MODEL, idd="a2"')
    examples.write_text(misspelled)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(examples),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert 'Unexpected keyword argument "idd"' in done.stdout, done.stdout
