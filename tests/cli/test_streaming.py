"""Streaming results: each file is delivered as soon as it and the ones before it are done.

The library tests prove the order of work and delivery with real worker processes (a later
item can only finish once the earlier ones were delivered); the command tests run the
installed console script, including a Ctrl-C sent to the whole process group (as a terminal
sends it) in the middle of a ``migrate --jobs 2``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from dsh_store.verify import iter_files, map_files
from tests.cli.conftest import CONSOLE_SCRIPT, record_session, run_script
from tests.cli.schema_check import errors, load_schema
from tests.cli.test_interrupt import INTERRUPTED, _old_store

RELEASE_WAIT_S = 30.0  # a deadlock guard only: the test fails instead of hanging


def _wait_for_release(item: str) -> str:
    """Worker: the item ``release:PATH`` returns only once PATH exists (or the guard ends)."""
    if item.startswith("release:"):
        flag = item.removeprefix("release:")
        deadline = time.monotonic() + RELEASE_WAIT_S
        while not os.path.exists(flag):
            if time.monotonic() > deadline:
                return "never released"
            time.sleep(0.005)
        return "released"
    return item


@pytest.mark.parametrize("jobs", [1, 2])
def test_results_reach_the_hook_before_later_items_finish(tmp_path: Path, jobs: int) -> None:
    flag = tmp_path / "release"
    items = ["a", "b", f"release:{flag}"]
    seen: list[str] = []

    def hook(results: Iterable[str], length: int) -> Iterator[str]:
        assert length == 3
        for result in results:
            seen.append(result)
            if len(seen) == 2:  # the third can finish only once the first two arrived
                flag.touch()
            yield result

    if jobs == 1:
        # Serially the third item would wait forever: release it up front, check the order.
        flag.touch()
    assert map_files(_wait_for_release, items, jobs=jobs, progress=hook) == [
        "a",
        "b",
        "released",
    ]
    assert seen == ["a", "b", "released"]


def test_results_keep_input_order_when_later_ones_finish_first(tmp_path: Path) -> None:
    flag = tmp_path / "release"
    stream = iter_files(_wait_for_release, [f"release:{flag}", "b", "c"], jobs=3)
    # "b" and "c" finish at once; the first result is still the first item's.
    flag.touch()
    assert list(stream) == ["released", "b", "c"]


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_jsonl_is_one_object_per_file_then_the_summary(tmp_path: Path) -> None:
    good = record_session(tmp_path / "store", "a", turns=1)
    record_session(tmp_path / "store", "b", turns=1, open_turn=True)
    done = run_script("verify", tmp_path / "store", "--format", "jsonl", "--jobs", "2")
    assert done.returncode == 1, done.stderr
    lines = _lines(done.stdout)
    assert [line["schema"] for line in lines] == [1, 1, 1]
    assert [sorted(line) for line in lines] == [["file", "schema"]] * 2 + [["schema", "summary"]]
    files = [line["file"] for line in lines[:2]]
    assert [file["path"] for file in files] == [str(good), str(good).replace("/a/", "/b/")]  # type: ignore[index]
    assert lines[2]["summary"] == {"open-turn": 1, "ok": 1}
    repaired = run_script("repair", tmp_path / "store", "--format", "jsonl")
    assert [sorted(line) for line in _lines(repaired.stdout)][-1] == ["schema", "summary"]
    migrated = run_script("migrate", tmp_path / "store", "--format", "jsonl")
    assert _lines(migrated.stdout)[-1] == {"schema": 1, "summary": {"current": 2}}


def test_quiet_prints_only_failures_and_the_summary(tmp_path: Path) -> None:
    record_session(tmp_path / "store", "a", turns=1)
    bad = record_session(tmp_path / "store", "b", turns=1, open_turn=True)
    quiet = run_script("verify", tmp_path / "store", "-q")
    assert quiet.returncode == 1
    assert quiet.stdout.splitlines()[0].startswith(f"{bad}: open-turn")
    assert quiet.stdout.splitlines()[-1] == "2 file(s): 1 open-turn, 1 ok; 1 failing"
    assert "/a/" not in quiet.stdout
    repaired = run_script("repair", tmp_path / "store", "-q", "--dry-run")
    assert repaired.stdout == "1 clean; 1 would-repair\n"  # nothing refused: the counts alone
    both = run_script("verify", tmp_path / "store", "-q", "-v")
    assert both.returncode == 2 and "pick one" in both.stderr


def test_verbose_adds_the_event_line_of_a_finding(tmp_path: Path) -> None:
    log = record_session(tmp_path / "store", "a", turns=1, open_turn=True)
    plain = run_script("verify", log)
    verbose = run_script("verify", log, "-v")
    assert "event line" not in plain.stdout
    assert "event line" in verbose.stdout


def _migrate_interrupted(args: list[str], first: Path, out: Path) -> tuple[int, str, str, bool]:
    """Run ``dsh-store ARGS`` in its own process group; once ``first`` exists, SIGINT the
    group (a terminal's Ctrl-C reaches the workers too)."""
    env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "stdout", "w+b") as stdout, open(out / "stderr", "w+b") as stderr:
        process = subprocess.Popen(
            [str(CONSOLE_SCRIPT), *args],
            stdout=stdout,
            stderr=stderr,
            env=env,
            start_new_session=True,
        )
        signalled = False
        try:
            deadline = time.monotonic() + 20.0
            while time.monotonic() < deadline and process.poll() is None:
                if first.exists():
                    os.killpg(process.pid, signal.SIGINT)
                    signalled = True
                    break
                time.sleep(0.002)
            code = process.wait(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        stdout.seek(0)
        stderr.seek(0)
        return code, stdout.read().decode(), stderr.read().decode(), signalled


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_during_migrate_has_printed_every_file_it_changed(tmp_path: Path, jobs: str) -> None:
    sessions = 200
    for attempt in range(3):
        root = tmp_path / f"attempt-{attempt}" / "store"
        sources = _old_store(root, sessions)
        first = next(iter(sources)).parent / "session.v4.jsonl"
        code, stdout, stderr, signalled = _migrate_interrupted(
            ["migrate", str(root), "--jobs", jobs], first, tmp_path / f"out-{attempt}"
        )
        published = {log.parent / "session.v4.jsonl" for log in sources}
        done = {target for target in published if target.exists()}
        if signalled and 0 < len(done) < len(published):
            break
        sessions *= 4
    else:
        raise AssertionError(f"migrate was never interrupted mid-way ({stdout!r}, {stderr!r})")
    assert code == 130, stderr
    assert stderr == INTERRUPTED, stderr
    reported = {
        Path(line.split(" -> ")[1].split(" (")[0])
        for line in stdout.splitlines()
        if line.startswith("migrated")
    }
    assert reported == done  # every file changed is printed, and only those
    assert not any(line.startswith("refused") for line in stdout.splitlines())


@pytest.mark.parametrize("command", ["verify", "migrate", "repair"])
def test_each_jsonl_line_follows_the_schema_of_its_json_counterpart(
    tmp_path: Path, command: str
) -> None:
    record_session(tmp_path / "store", "a", turns=1)
    record_session(tmp_path / "store", "b", turns=1, open_turn=True)
    schema = load_schema(command)
    done = run_script(command, tmp_path / "store", "--format", "jsonl")
    lines = _lines(done.stdout)
    assert len(lines) == 3, done.stdout
    for line in lines[:-1]:
        assert errors(line["file"], schema["properties"]["files"]["items"]) == []
    assert errors(lines[-1]["summary"], schema["properties"]["summary"]) == []
    document = json.loads(run_script(command, tmp_path / "store", "--json").stdout)
    if command != "repair":  # repair repaired the open turn on its jsonl run
        assert [line["file"] for line in lines[:-1]] == document["files"]
        assert lines[-1]["summary"] == document["summary"]
