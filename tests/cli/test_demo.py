"""``dsh-store demo``: a real child process killed by SIGKILL, restored, verified."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.cli.conftest import run_script
from tests.conftest import REPO

Invoke = Callable[..., Result]


def test_demo_in_a_given_root_exits_0_and_tells_the_story(tmp_path: Path) -> None:
    done = run_script("demo", "--root", tmp_path / "demo")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.startswith(f"dsh-store demo, working in {tmp_path}/demo\n")
    assert "3. restore: 21 durable events, open-turn; a load appends the closers:" in out
    assert re.search(r"seq 21 +tool/result +TOOL_OUTCOME_UNKNOWN", out)
    assert re.search(r"seq 23 +turn/end +reason interrupted", out)
    assert "after load: ok; reopened, end-seed + turn 3 written (seqs continue to 26)" in out
    assert out.rstrip().splitlines()[-1] == f"OK: 0 problem(s). Files left in {tmp_path}/demo"
    fixtures = sorted((REPO / "fixtures" / "demo").glob("*/session*.jsonl"))
    if fixtures:
        assert "4. migrate: " in out and "refused" not in out
    assert len(out.splitlines()) <= 25 + len(fixtures)
    assert (tmp_path / "demo" / "sessions").is_dir()


def test_demo_refuses_to_reuse_a_root(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    result = invoke("demo", "--root", tmp_path)
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {tmp_path}: the directory is not empty; pass a new or empty directory as --root\n"
    )


def test_demo_default_root_is_a_new_temp_directory(tmp_path: Path) -> None:
    done = run_script("demo", env={"TMPDIR": str(tmp_path), "HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout + done.stderr
    (created,) = tmp_path.glob("dsh-store-demo-*")
    assert f"working in {created}\n" in done.stdout
    assert not (tmp_path / "home").exists()
