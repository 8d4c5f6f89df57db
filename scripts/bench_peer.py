"""A format-0 log written by DSH's own released backend, and DSH's own load of it.

The peer rows of ``scripts/bench.py migrate`` compare dsh-store's reads of an older log
with what DSH rc.8 does with the same file. The log is written by the real upstream
writer (``tests/interop/driver.mjs`` through a live ``SessionStore`` and the JSONL
backend, packed chunk rows on), from a seeded script shaped like a coding agent's session:
many turns of tool steps and a final answer, each step a streamed reasoning block and a
text or tool-call block of hundreds of token-sized deltas, checkpoint flushes before each
model call and tool run plus batch flushes inside the streams (packing is per batch, so
runs are cut where a batch ends), and tool results of a few KiB. It is written once into
the cache directory (``$DSH_STORE_BENCH_CACHE``, else ``~/.cache/dsh-store/bench-peer-<key>``,
keyed by the seed, the size, this script's shape and the upstream install) and reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib import REPO

sys.path.insert(0, str(REPO))

from tests.interop.scenarios import CWD, PROVIDER, Script
from tests.interop.upstream import DRIVER, Upstream, UpstreamUnavailable, cache_key, install

__all__ = ["PeerLog", "UpstreamUnavailable", "dsh_load", "peer_log"]

SEED = 15
SESSION = "bench-peer"
_SHAPE = 1  # bump when the generated shape changes
_TOKENS = ["the", " file", " is", " read", "ing", " now", ".", "\n", " def", " x", "(", ")"]
_TOKENS += [" 日本", " é", " 🙂", ' "q"', " \\n", "  ", " return", " value", ",", " and"]


@dataclass(frozen=True)
class PeerLog:
    """The written log: its store root, session id and path."""

    root: Path
    session: str
    path: Path


class _AgentScript(Script):
    """Coding-agent turns, with whole blocks streamed by the driver's ``chunks`` action."""

    def _block(self, session: str, turn: int, step: int, index: int, kind: str, n: int) -> Any:
        rng = self.rng
        chunks: list[dict[str, Any]] = [{"type": "block-start", "index": index, "blockType": kind}]
        if kind == "tool-call":
            call_id, name = self._id("call"), rng.choice(["bash", "read_file", "grep", "edit"])
            argument = json.dumps({"path": f"src/mod_{rng.randint(0, 99)}.py", "text": "x" * n})
            cuts = sorted(rng.sample(range(1, len(argument)), min(n, len(argument) - 1)))
            parts = [argument[a:b] for a, b in zip([0, *cuts], [*cuts, len(argument)], strict=True)]
            for part in parts:
                delta = {"type": "tool-call-delta", "index": index, "id": call_id, "name": name}
                chunks.append({**delta, "argumentsDelta": part})
            block: dict[str, Any] = {
                "type": "tool-call",
                "id": call_id,
                "name": name,
                "arguments": argument,
            }
        else:
            delta_type = "text-delta" if kind == "text" else "reasoning-delta"
            pieces = [rng.choice(_TOKENS) for _ in range(n)]
            chunks += [{"type": delta_type, "index": index, "text": piece} for piece in pieces]
            block = {"type": kind, "text": "".join(pieces)}
        chunks.append({"type": "block-end", "index": index, "block": block})
        return block, chunks

    def _stream(self, session: str, turn: int, step: int, chunks: list[Any]) -> None:
        # A batch ends every few dozen to few hundred chunks (DSH's write window).
        flush_after: list[int] = []
        position = self.rng.randint(20, 300)
        while position < len(chunks):
            flush_after.append(position)
            position += self.rng.randint(20, 300)
        self.actions.append(
            {
                "do": "chunks",
                "id": session,
                "turn": turn,
                "step": step,
                "chunks": chunks,
                "flushAfter": flush_after,
            }
        )

    def agent_step(self, session: str, turn: int, step: int, *, tool: bool) -> None:
        rng = self.rng
        self.append(session, "step/start", {"turn": turn, "step": step})
        if step == 1:
            self.user(session, "please " * rng.randint(5, 60))
        self.request(session, "You are a careful coding agent. " * 40)
        blocks: list[Any] = []
        chunks: list[Any] = []
        kinds = ["reasoning", "tool-call" if tool else "text"]
        for index, kind in enumerate(kinds):
            size = rng.randint(40, 400) if kind != "tool-call" else rng.randint(10, 60)
            block, streamed = self._block(session, turn, step, index, kind, size)
            blocks.append(block)
            chunks += streamed
        usage = {"inputTokens": rng.randint(500, 90000), "outputTokens": len(chunks)}
        chunks.append({"type": "usage", "usage": usage})
        chunks.append({"type": "finish", "reason": {"kind": "tool-calls" if tool else "stop"}})
        self._stream(session, turn, step, chunks)
        message = {
            "role": "assistant",
            "content": blocks,
            "source": {"kind": "model", **PROVIDER},
            "id": self._id("assistant"),
        }
        data = {"turn": turn, "step": step, "message": message, "usage": usage}
        self.append(session, "assistant/message", data, surfaceOp="append", claimChunks=True)
        if tool:
            call = blocks[-1]
            self.tool_call(session, turn, step, call)
            output = "".join(rng.choice(_TOKENS) for _ in range(rng.randint(50, 3000)))
            result = {
                "type": "tool-result",
                "toolCallId": call["id"],
                "content": [{"type": "text", "text": output}],
                "isError": rng.random() < 0.05,
            }
            wrapper = {
                "source": {"kind": "tool", "callId": call["id"]},
                "content": [result],
                "role": "user",
                "id": self._id("result"),
            }
            self.append(
                session,
                "tool/result",
                {"turn": turn, "step": step, "message": wrapper},
                surfaceOp="append",
                citeCall=call["id"],
            )
        self.append(session, "step/end", {"turn": turn, "step": step})
        self.flush(session)

    def agent_turn(self, session: str, turn: int) -> None:
        self.append(session, "turn/start", {"turn": turn})
        tools = self.rng.randint(0, 5)
        for step in range(1, tools + 2):
            self.agent_step(session, turn, step, tool=step <= tools)
        self.append(session, "turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        self.flush(session)


def _cache(turns: int, upstream: Upstream) -> Path:
    override = os.environ.get("DSH_STORE_BENCH_CACHE")
    if override:
        return Path(override).expanduser().absolute()
    facts = [SEED, turns, _SHAPE, cache_key(), hashlib.sha256(DRIVER.read_bytes()).hexdigest()]
    key = hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "dsh-store" / f"bench-peer-{key}"


def _run_driver(upstream: Upstream, command: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [str(upstream.node), str(upstream.driver), str(upstream.packages)],
        input=json.dumps(command).encode(),
        capture_output=True,
        check=False,
    )
    lines = [line for line in done.stdout.decode().splitlines() if line.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"ok": False}
    if done.returncode != 0 or not result.get("ok"):
        raise RuntimeError(f"driver failed: {result.get('error')} {done.stderr.decode()[-800:]}")
    return result


def peer_log(turns: int) -> tuple[Upstream, PeerLog]:
    """Install the upstream (or raise :class:`UpstreamUnavailable`) and return the cached
    log of ``turns`` agent turns, writing it first when the cache lacks it."""
    upstream = install()
    directory = _cache(turns, upstream)
    done = directory / "written.json"
    root = directory / "root"
    if not done.exists():
        rng = random.Random(SEED)
        script = _AgentScript(rng)
        script.create(SESSION, CWD)
        for turn in range(1, turns + 1):
            script.agent_turn(SESSION, turn)
        directory.mkdir(parents=True, exist_ok=True)
        command = {"op": "write", "root": str(root), "packChunks": True, "clock": 1.7e12}
        _run_driver(upstream, {**command, "actions": script.actions})
        found = sorted(root.rglob("*.jsonl"))
        if len(found) != 1:
            raise RuntimeError(f"expected one written log under {root}, found {found}")
        done.write_text(json.dumps({"path": str(found[0])}))
    path = Path(json.loads(done.read_text())["path"])
    return upstream, PeerLog(root, SESSION, path)


def dsh_load(upstream: Upstream, log: PeerLog, repeats: int) -> tuple[list[float], int, int]:
    """DSH's own ``load`` of the log, ``repeats`` times in one fresh node process: the
    seconds of each load, the events it loaded and that process's peak RSS in bytes."""
    command = {"op": "time-load", "root": str(log.root), "ids": [log.session] * repeats}
    result = _run_driver(upstream, command)
    seconds = [load["ms"] / 1e3 for load in result["loads"]]
    return seconds, result["loads"][0]["events"], result["peakRssKiB"] * 1024
