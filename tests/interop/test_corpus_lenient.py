"""The corpus logs dsh-store refuses by default, read by DSH rc.8 and by the lenient opt-in.

The 18 ``refuse`` logs of the shared corpus are filed, as the upstream fixture loader saw
them (placeholders substituted, a missing ``delegationDepth`` read as 0, the session id
set to the fixture's name so the header binds the path), into one store root that the
upstream backend inspects. For each log both verdicts are compared as
``tests/interop/__init__.py`` describes: accept or refuse, events kept, closers, and the
model-visible conversation, with one normalization: a format-0 message source
``{kind: "plugin", plugin: P}`` is compared as the v4 source kind the 3 -> 4 edge gives it
(``runtime-context`` for the system-prompt plugin's user-role snapshots, a renamed or
``plugin:P`` producer otherwise), since v4 names producers by kind.

- the 17 that the lenient opt-in migrates (15 with a message before the first step, the
  pre-turn builds ``minimal-preset`` and ``web-search-round`` with their framing
  synthesized) agree with upstream on everything compared;
- ``cordis-tool-round`` is refused by both, as committed corruption.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_store.jsonl.layout import session_dir
from dsh_store.migrations._v4_messages import producer_kind
from tests.conftest import shared_missing_reason
from tests.corpus import loaded
from tests.interop.conftest import inspect_all
from tests.interop.harness import assert_same_read, ours, theirs
from tests.interop.upstream import Upstream
from tests.migrations.test_corpus_conformance import CORPUS, MANIFEST

pytestmark = [pytest.mark.requires("upstream"), pytest.mark.requires("shared")]

CORRUPT = "cordis-tool-round"


def _file_refused_logs(root: Path) -> dict[str, Path]:
    """Each ``refuse`` log of the corpus as ``root/<project>/<name>/session.jsonl``."""
    logs: dict[str, Path] = {}
    for entry in json.loads(MANIFEST.read_text())["files"]:
        if entry["expected"] != "refuse":
            continue
        name = entry["path"].split("/")[-2]
        out: list[bytes] = []
        for index, line in enumerate((CORPUS / entry["path"]).read_bytes().split(b"\n")):
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                out.append(line)  # damage is kept byte for byte
                continue
            value = loaded(value, 0)
            if index == 0:
                value["id"] = name
                value.setdefault("delegationDepth", 0)
            out.append(orjson.dumps(value))
        header = orjson.loads(out[0])
        log = session_dir(root, name, header.get("cwd")) / "session.jsonl"
        log.parent.mkdir(parents=True)
        log.write_bytes(b"\n".join(out))
        logs[name] = log
    return logs


def _as_v4_sources(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with each message's plugin source named as the v4 source kind."""
    if "messages" not in report:
        return report
    messages = []
    for message in report["messages"]:
        source = message.get("source")
        if isinstance(source, dict) and source.get("kind") == "plugin":
            kind = producer_kind(source["plugin"], message["role"])
            message = {**message, "source": {"kind": kind}}
        messages.append(message)
    return {**report, "messages": messages}


def test_refused_corpus_logs_read_leniently_agree_with_upstream(
    upstream: Upstream, tmp_path: Path
) -> None:
    missing = shared_missing_reason()
    if missing is not None or not MANIFEST.exists():
        pytest.skip(missing or "the shared corpus manifest is absent")
    logs = _file_refused_logs(tmp_path / "store")
    reports = inspect_all(upstream, tmp_path / "store", tuple(logs))
    assert len(logs) == 18
    for name, log in logs.items():
        upstream_verdict = theirs(_as_v4_sources(reports[name]))
        our_verdict = ours(log, lenient=True)
        if name == CORRUPT:
            assert not upstream_verdict.accepted, name
            assert (our_verdict.error or "").startswith("CorruptLogError:"), our_verdict.error
            continue
        assert_same_read(name, our_verdict, upstream_verdict)
        assert our_verdict.conversation, name  # not vacuous
