"""Single writer across real processes; external changes under an open writer are refused."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_store.errors import ConcurrentModificationError, SessionExistsError, SessionLockedError
from dsh_store.restore import examine
from dsh_store.store import repair_file
from tests.conftest import REPO

from .helpers import CWD, complete_turn, make_store, snapshot

HOLDER = textwrap.dedent(
    """
    import sys
    from dsh_store.store import JsonlStore
    store = JsonlStore(sys.argv[1], window_s=0.001)
    with store.open("s1") as live:
        live.append("turn/start", {"turn": 2})
        live.flush()
        print("LOCKED", flush=True)
        sys.stdin.readline()
    print("RELEASED", flush=True)
    """
)

CONTENDER = textwrap.dedent(
    """
    import sys
    from dsh_store.errors import SessionLockedError
    from dsh_store.store import JsonlStore
    try:
        JsonlStore(sys.argv[1]).open("s1")
    except SessionLockedError as error:
        print("REFUSED", error)
    else:
        print("OPENED")
    """
)


def _python(code: str, root: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", code, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )


def test_second_writer_process_is_refused_readers_proceed(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1)
        path = live.path
    holder = _python(HOLDER, tmp_path)
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "LOCKED"
        contender = _python(CONTENDER, tmp_path)
        out, _ = contender.communicate(timeout=30)
        assert out.startswith("REFUSED session 's1' is open for writing elsewhere")
        assert "session.lock" in out

        before = snapshot(path)
        for call in (store.open, store.load):
            with pytest.raises(SessionLockedError, match="'s1' is open for writing elsewhere"):
                call("s1")
        with pytest.raises(SessionLockedError, match="close the other writer first"):
            repair_file(path)  # the holder left turn 2 open, so a repair would write
        assert repair_file(path, dry_run=True).closers == ("turn/end",)
        assert store.inspect("s1").classification == "open-turn"
        assert [e.type for e in store.read_from("s1", 6)] == ["session/end-seed", "turn/start"]
        assert examine(path).classification == "open-turn"
        assert snapshot(path) == before
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "RELEASED"
        holder.wait(timeout=30)
    assert store.load("s1").classification == "ok"  # the lock is free again


def test_same_process_second_writer_is_refused(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1)
        live.flush()
        with pytest.raises(SessionLockedError, match=r"lock .*session\.lock is held"):
            store.open("s1")
    with store.open("s1"):
        pass


def test_log_replaced_under_an_open_writer(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    live = store.new("s1", cwd=CWD)
    complete_turn(live, 1)
    live.flush()
    path = live.path
    impostor = path.with_name("impostor")
    impostor.write_bytes(path.read_bytes())
    os.rename(impostor, path)
    replaced = snapshot(path)
    live.append("turn/start", {"turn": 2})
    with pytest.raises(ConcurrentModificationError, match="another file was put in place"):
        live.flush()
    with pytest.raises(ConcurrentModificationError, match="nothing was written"):
        live.flush()
    assert snapshot(path) == replaced
    with pytest.raises(ConcurrentModificationError, match="log changed under this writer"):
        live.close()
    assert store.load("s1").classification == "ok"


def test_log_appended_externally_under_an_open_writer(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    live = store.new("s1", cwd=CWD)
    complete_turn(live, 1)
    live.flush()
    path = live.path
    with open(path, "ab") as log:
        log.write(b'{"type":"turn/start","seq":6,"time":1,"data":{"turn":2}}\n')
    changed = snapshot(path)
    live.append("turn/start", {"turn": 2})
    with pytest.raises(ConcurrentModificationError, match="this writer last left"):
        live.flush()
    assert snapshot(path) == changed
    with pytest.raises(ConcurrentModificationError):
        live.close()


def test_two_new_handles_for_one_id_are_decided_at_the_first_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store(tmp_path, window_s=0.0)
    winner = store.new("twin", cwd=CWD)
    loser = store.new("twin", cwd=CWD)  # nothing on disk yet: new() cannot tell
    complete_turn(winner, 1, first=True)
    winner.flush()
    path = winner.path
    written = snapshot(path)

    with caplog.at_level(logging.WARNING, logger="dsh_store"):
        # Each event retries the failed first write in the background.
        loser.append("turn/start", {"turn": 1})
        loser.append("step/start", {"turn": 1, "step": 1})
        loser.append("step/end", {"turn": 1, "step": 1})
        with pytest.raises(SessionLockedError, match="'twin' is open for writing elsewhere"):
            loser.flush()
    warnings = [r for r in caplog.records if "background write" in r.getMessage()]
    assert len(warnings) == 1  # the same failure is logged once, not once per event
    assert [event.seq for event in loser.unwritten_events] == [0, 1, 2]
    assert snapshot(path) == written

    winner.close()
    with pytest.raises(SessionExistsError):  # the winner published: the link never replaces
        loser.flush()
    with pytest.raises(SessionExistsError):
        loser.close()
    assert snapshot(path) == written
