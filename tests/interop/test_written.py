"""dsh-store against the real upstream backend on the sessions that backend wrote.

Two store roots are written through DSH's own SessionStore and JSONL backend (raw encoding,
packed chunk rows on and off): complete sessions, sessions left open at each crash point
(tool requested but not started, tool started without result, mid-stream, step open, turn
open), a fork at the end of a log and one inside a resumed log, a resume in a second
process, a log with the user message before the first step, and one with an unknown
``ignorable`` event. For every session, upstream's own
``inspect`` is compared with dsh-store's ``read_log`` as described in
``tests/interop/__init__.py``; upstream's ``load`` (which commits its repair) is then
compared with dsh-store reading the repaired file; and both ``list`` results are compared.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_store.errors import DshStoreError, MigrationRefusedError
from dsh_store.store import JsonlStore
from dsh_store.verify import verify_path
from tests.interop.conftest import SEED, Written, copy_root, inspect_all
from tests.interop.harness import Verdict, ours, run_driver, theirs
from tests.interop.upstream import Upstream

pytestmark = pytest.mark.requires("upstream")

LAYOUTS = [pytest.param(True, id="packed"), pytest.param(False, id="unpacked")]


def _pairs(
    upstream: Upstream, store: Written, *, lenient: bool
) -> list[tuple[str, Verdict, Verdict]]:
    reports = inspect_all(upstream, store.root, store.sessions, compression=store.compression)
    return [
        (session, theirs(reports[session]), ours(store.log(session), lenient=lenient))
        for session in store.sessions
    ]


def _context(session: str, store: Written) -> str:
    return f"session {session!r} of {store.log(session)} (seed {SEED})"


@pytest.mark.parametrize("packed", LAYOUTS)
def test_default_verdicts_agree_except_the_documented_refusals(
    upstream: Upstream, written: dict[bool, Written], packed: bool
) -> None:
    """Upstream accepts every session it wrote; dsh-store agrees on verdict, events kept
    and closers, except that by default it refuses exactly the lenient-only classes."""
    store = written[packed]
    for session, upstream_verdict, our_verdict in _pairs(upstream, store, lenient=False):
        assert upstream_verdict.accepted, _context(session, store)
        if session in store.lenient_only:
            assert not our_verdict.accepted, _context(session, store)
            assert our_verdict.error is not None
            assert our_verdict.error.startswith(MigrationRefusedError.__name__)
            expected_rule = {
                "surface-first": "[rule: surface before first step]",
                "ignorable": "[rule: unknown-event-type]",
            }[session]
            assert expected_rule in our_verdict.error, _context(session, store)
        else:
            assert our_verdict.structure == upstream_verdict.structure, _context(session, store)


@pytest.mark.parametrize("packed", LAYOUTS)
def test_conversation_agrees_where_no_tool_call_is_closed(
    upstream: Upstream, written: dict[bool, Written], packed: bool
) -> None:
    """The model-visible conversation and system prompt after migration to v4 are
    upstream's ``deriveMessages()`` and request-header prompt (no tool closer involved)."""
    store = written[packed]
    compared = 0
    for session, upstream_verdict, our_verdict in _pairs(upstream, store, lenient=False):
        if session in store.lenient_only or upstream_verdict.tool_closers:
            continue
        compared += 1
        assert our_verdict.conversation == upstream_verdict.conversation, _context(session, store)
        assert our_verdict.system == upstream_verdict.system, _context(session, store)
    assert compared >= 4


@pytest.mark.parametrize("packed", LAYOUTS)
def test_tool_closers_read_exactly_as_upstream_writes_them(
    upstream: Upstream, written: dict[bool, Written], packed: bool
) -> None:
    """Closer tool-result texts, and so the conversation a resumed model sees, are
    upstream's strings byte for byte."""
    store = written[packed]
    compared = 0
    for session, upstream_verdict, our_verdict in _pairs(upstream, store, lenient=False):
        if session in store.lenient_only or not upstream_verdict.tool_closers:
            continue
        compared += 1
        assert our_verdict.closer_texts == upstream_verdict.closer_texts, _context(session, store)
        assert our_verdict.conversation == upstream_verdict.conversation, _context(session, store)
    assert compared >= 2


@pytest.mark.parametrize("packed", LAYOUTS)
def test_lenient_reading_agrees_with_upstream_on_every_session(
    upstream: Upstream, written: dict[bool, Written], packed: bool, tmp_path: Path
) -> None:
    """With ``lenient=True`` the refused classes migrate, and every session then agrees
    with upstream on verdict, events kept, closers and conversation, before and after
    upstream's own repair."""
    store = written[packed]
    pairs = _pairs(upstream, store, lenient=True)
    pairs += _repaired(upstream, store, tmp_path, lenient=True)
    for session, upstream_verdict, our_verdict in pairs:
        assert our_verdict.structure == upstream_verdict.structure, _context(session, store)
        assert our_verdict.closer_texts == upstream_verdict.closer_texts, _context(session, store)
        assert our_verdict.conversation == upstream_verdict.conversation, _context(session, store)
        assert our_verdict.system == upstream_verdict.system, _context(session, store)


@pytest.mark.parametrize("packed", LAYOUTS)
def test_logs_repaired_by_upstream_load_read_back_balanced(
    upstream: Upstream, written: dict[bool, Written], packed: bool, tmp_path: Path
) -> None:
    """After upstream's mutating ``load`` commits its repair, dsh-store reads the same
    events (closers included) and adds no closer of its own (the lenient-only sessions:
    see the lenient test)."""
    for session, upstream_verdict, our_verdict in _repaired(upstream, written[packed], tmp_path):
        if session not in written[packed].lenient_only:
            assert our_verdict.structure == upstream_verdict.structure, session


def _repaired(
    upstream: Upstream, store: Written, scratch: Path, *, lenient: bool = False
) -> list[tuple[str, Verdict, Verdict]]:
    """Upstream ``load`` of a copy of ``store`` (which commits every repair), then both
    verdicts on the repaired logs."""
    root = copy_root(store, scratch / "repaired")
    repaired = Written(root, store.packed, store.sessions, store.lenient_only, store.compression)
    loads = inspect_all(upstream, root, store.sessions, mode="load", compression=store.compression)
    pairs = []
    for session in store.sessions:
        upstream_verdict = theirs(loads[session])
        assert upstream_verdict.accepted, _context(session, repaired)
        assert upstream_verdict.closers == ()  # load re-read the repaired log
        pairs.append((session, upstream_verdict, ours(repaired.log(session), lenient=lenient)))
    return pairs


@pytest.mark.parametrize("packed", LAYOUTS)
def test_list_agrees(upstream: Upstream, written: dict[bool, Written], packed: bool) -> None:
    """``list`` gives the same sessions with the same header facts (format-0
    ``seedLength`` is v4 ``isSeeded``)."""
    store = written[packed]
    command = {"op": "list", "root": str(store.root), "compression": store.compression}
    listed = run_driver(upstream, command)
    assert "error" not in listed
    theirs_listed = sorted(
        (
            header["id"],
            header.get("cwd"),
            header["createdAt"],
            header["delegationDepth"],
            header.get("parentSession"),
            "seedLength" in header,
        )
        for header in listed["headers"]
    )
    ours_listed = sorted(
        (
            header.id,
            header.cwd,
            header.created_at,
            header.delegation_depth,
            header.parent_session,
            header.is_seeded,
        )
        for header in JsonlStore(store.root).list()
    )
    assert ours_listed == theirs_listed
    assert len(ours_listed) == len(store.sessions)


def test_a_log_filed_under_another_id_is_refused_by_both(
    upstream: Upstream, written: dict[bool, Written], tmp_path: Path
) -> None:
    """Identity binding: a log moved under another session's directory is refused by
    upstream's inspect and list, by ``JsonlStore.inspect`` and by ``verify``."""
    store = written[True]
    root = copy_root(store, tmp_path / "store")
    moved = Written(root, store.packed, store.sessions, store.lenient_only)
    project = moved.log("complete").parent.parent
    (project / "complete").rename(project / "impostor")
    report = inspect_all(upstream, root, ("impostor",))["impostor"]
    assert not report["ok"], report

    assert "error" in run_driver(upstream, {"op": "list", "root": str(root)})
    with pytest.raises(DshStoreError) as refused:
        JsonlStore(root).inspect("impostor")
    assert "impostor" in str(refused.value) or "complete" in str(refused.value)
    reports = [r for r in verify_path(root) if "/impostor/" in r.path]
    assert len(reports) == 1
    assert reports[0].classification == "corrupt", reports[0]
