"""The format-0 log generator draws logs the whole chain accepts, with their variety.

The property tests built on ``early_logs.v0_logs`` compare migrations; if the generator
drifts into drawing logs the chain refuses, they quietly compare refusals with refusals.
These guards take a fixed (derandomized) sample and fail when the accepted share drops or
when the accepted logs stop holding the shapes the generator is there to vary.
"""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_store.errors import DshStoreError, MigrationRefusedError
from dsh_store.jsonl.layout import session_dir
from dsh_store.migrate import upgrade
from dsh_store.migrations._v4_messages import producer_kind
from dsh_store.model import Session
from tests.interop.harness import assert_same_read, ours, run_driver, theirs
from tests.interop.upstream import UpstreamUnavailable, install

from .early_logs import EARLY_DAMAGE, Row, damage_v0_log, header, sample, v0_logs

SAMPLE_SIZE = 200


def _migrated(rows: list[Row]) -> list[Row] | None:
    """The v4 rows of ``rows`` through the whole chain and every model rule, or None."""
    try:
        head, events = upgrade(header(), copy.deepcopy(rows), path="generated")
        kept = list(events)
        Session.from_restore(head, kept)
    except DshStoreError:
        return None
    return [event.to_json() for event in kept]


_SOURCE_TYPES = (
    "text-chunks",
    "reasoning-chunks",
    "tool-call-chunks",
    "llm/retry",
    "llm/retry-started",
    "todo/write",
    "session/title",
    "request/header",
    "tool/result",
)
_INTERRUPTED = {"kind": "interrupted"}


def _features(rows: list[Row], upgraded: list[Row]) -> set[str]:
    """The shapes of the generator's variety that ``rows`` holds (``upgraded``: its v4)."""
    types = Counter(row["type"] for row in rows)
    found = {name for name in _SOURCE_TYPES if types[name]}
    if types["turn/start"] > 1:
        found.add("several turns")
    packed = [row for row in rows if "seq0" in row]
    if any(min(row["data"]["dt"], default=0) < 0 for row in packed):
        found.add("negative gap")
    claims = [row for row in rows if row["type"] == "assistant/message"]
    if any(row["sourceEventSeqs"] for row in claims):
        found.add("claimed attempt")
    found.update(key for row in claims for key in ("usage", "interrupted") if key in row["data"])
    if any(row["type"] == "tool/result" and "error" in row["data"] for row in rows):
        found.add("failed tool")
    sources = [row["data"]["source"] for row in rows if row["type"] == "user/message"]
    if any(source["kind"] == "plugin" for source in sources):
        found.add("plugin source")
    chunks = [row["data"]["chunk"] for row in rows if row["type"] == "assistant/chunk"]
    if any(chunk["type"] == "finish" for chunk in chunks):
        found.add("finish chunk")
    reasons = [row["data"]["reason"] for row in rows if row["type"] == "turn/end"]
    if any(reason["kind"] in ("aborted", "disposed") for reason in reasons):
        found.add("legacy turn/end reason")
    v4 = Counter(row["type"] for row in upgraded)
    if v4["assistant/attempt"]:
        found.add("unclaimed attempt")
    if v4["turn/start"] > v4["turn/end"]:
        found.add("open at the end")
    if any(row["type"] == "system/message" and "sourceEventSeqs" in row for row in upgraded):
        found.add("prompt replaced")
    closers = sum(row["data"].get("reason") == _INTERRUPTED for row in upgraded)
    if closers > reasons.count(_INTERRUPTED):
        found.add("restart closer")
    return found


_WANTED = {
    *_SOURCE_TYPES,
    "several turns",
    "negative gap",
    "claimed attempt",
    "usage",
    "interrupted",
    "failed tool",
    "plugin source",
    "finish chunk",
    "legacy turn/end reason",
    "unclaimed attempt",
    "open at the end",
    "prompt replaced",
    "restart closer",
}


def test_the_generator_draws_logs_the_chain_accepts() -> None:
    logs = sample(v0_logs(), SAMPLE_SIZE)
    assert len(logs) == SAMPLE_SIZE
    outcomes = [(rows, _migrated(rows)) for rows in logs]
    accepted = [(rows, upgraded) for rows, upgraded in outcomes if upgraded is not None]
    assert len(accepted) >= 0.95 * SAMPLE_SIZE
    # Each shape the generator varies is in a good share of the accepted logs.
    seen: Counter[str] = Counter()
    for rows, upgraded in accepted:
        seen.update(_features(rows, upgraded))
    assert {name: seen[name] for name in _WANTED if seen[name] < SAMPLE_SIZE // 20} == {}


def test_the_damaged_logs_are_refused_where_they_say() -> None:
    """Each damage of ``refused_v0_logs``, applied to each log of a fixed sample, is
    refused by the whole chain with exactly the edge and rule it names."""
    seen: Counter[str] = Counter()
    for index, valid in enumerate(sample(v0_logs(), SAMPLE_SIZE // 2)):
        for damage in EARLY_DAMAGE:
            rows = copy.deepcopy(valid)
            applied = damage_v0_log(rows, damage, index)
            with pytest.raises(MigrationRefusedError) as caught:
                head, events = upgrade(header(), rows, path="generated")
                Session.from_restore(head, list(events))
            assert (caught.value.edge, caught.value.rule) == EARLY_DAMAGE[applied], applied
            seen[applied] += 1
    assert {damage: seen[damage] for damage in EARLY_DAMAGE if seen[damage] < 10} == {}


def test_the_sample_is_the_same_each_time() -> None:
    assert sample(v0_logs(), 20) == sample(v0_logs(), 20)


def _as_v4_sources(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with each format-0 plugin source named by its v4 source kind, as the
    3->4 edge names producers (the one difference the comparison allows)."""
    messages = []
    for message in report.get("messages", []):
        source = message.get("source")
        if isinstance(source, dict) and source.get("kind") == "plugin":
            message = {
                **message,
                "source": {"kind": producer_kind(source["plugin"], message["role"])},
            }
        messages.append(message)
    return {**report, "messages": messages} if "messages" in report else report


def _upstream_agrees(logs: list[list[Row]], root: Path, *, lenient: bool) -> int:
    """File ``logs`` in a store root for DSH rc.8's backend to inspect; assert it loads
    each one with the events kept, closers, conversation and prompt of dsh-store's read
    (the interop suite's comparison, ``tests/interop/__init__.py``). Returns how many
    had a conversation."""
    try:
        upstream = install()
    except UpstreamUnavailable as error:
        pytest.skip(f"upstream DSH packages unavailable: {error.reason}")
    paths: dict[str, Path] = {}
    for index, rows in enumerate(logs):
        head = {**header(), "id": f"generated-{index}"}
        log = session_dir(root, head["id"], None) / "session.jsonl"
        log.parent.mkdir(parents=True)
        log.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in [head, *rows]))
        paths[head["id"]] = log
    command = {"op": "inspect", "root": str(root), "ids": list(paths), "mode": "inspect"}
    reports = run_driver(upstream, command)["results"]
    conversations = 0
    for name, log in paths.items():
        upstream_verdict = theirs(_as_v4_sources(reports[name]))
        our_verdict = ours(log, lenient=lenient)
        assert_same_read(name, our_verdict, upstream_verdict)
        conversations += bool(our_verdict.conversation)
    return conversations


@pytest.mark.requires("upstream")
def test_dsh_reads_the_generated_logs_as_the_migration_does(tmp_path: Path) -> None:
    """What a valid format-0 log is, is DSH's to say: its reader loads every log of a
    fixed sample as dsh-store's (default) migration reads it."""
    logs = sample(v0_logs(), SAMPLE_SIZE // 2)
    assert _upstream_agrees(logs, tmp_path / "store", lenient=False) >= 0.8 * len(logs)


@pytest.mark.requires("upstream")
def test_dsh_reads_user_first_logs_as_the_lenient_migration_does(tmp_path: Path) -> None:
    """The same logs with the user message before the first step/start (DSH's fixture
    order): refused by default, loaded by DSH as by ``lenient=True``."""
    logs = sample(v0_logs(), SAMPLE_SIZE // 2)
    logs = [rows for rows in logs if any(row["type"] == "step/start" for row in rows)]
    for rows in logs:
        assert damage_v0_log(rows, "user-before-step", 0) == "user-before-step"
        assert _migrated(rows) is None
    assert _upstream_agrees(logs, tmp_path / "store", lenient=True) >= 0.8 * len(logs)
