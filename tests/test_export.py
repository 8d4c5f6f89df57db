"""``dsh-store export``: the transcript of a session, as Markdown and as one HTML page."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_store import (
    CorruptLogError,
    JsonlStore,
    assistant_message,
    reasoning_block,
    request_header,
    step_end,
    step_start,
    text_block,
    tool_call,
    tool_call_block,
    tool_failure,
    tool_result,
    turn_end,
    turn_start,
    user_message,
)
from dsh_store.cli import main
from dsh_store.export import export_file, export_transcript
from tests.conftest import REPO

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)></details>&amp;'
FENCE_BREAKER = "```\n# not a heading\n````"
P, M = "deepseek", "deepseek-chat"
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}


def _record(store: JsonlStore) -> None:
    """Turn 1: reasoning, two tool calls (one fails); turn 2 cut off; a crash in turn 3."""
    with store.new("s1", cwd="/home/me/project") as live:
        live.append("turn/start", turn_start(1))
        live.append("step/start", step_start(1, 1))
        live.append("request/header", request_header(P, M))
        live.append("user/message", user_message(HOSTILE, id="u1"), surface_op="append")
        content = [
            reasoning_block("Think about " + HOSTILE),
            text_block("Running two commands."),
            tool_call_block("call-1", "bash", '{"command": "cat x"}'),
            tool_call_block("call-2", "bash", '{"command": "rm -r /nope"}'),
        ]
        answer = assistant_message(1, 1, content, provider=P, model=M, id="a1")
        live.append("assistant/message", answer, surface_op="append")
        live.append("tool/call", tool_call(1, 1, "call-1", "bash", '{"command": "cat x"}'))
        live.append(
            "tool/result", tool_result(1, 1, "call-1", FENCE_BREAKER + HOSTILE), surface_op="append"
        )
        failure = tool_failure("CommandError", "EXIT_1", "no such directory")
        live.append(
            "tool/result",
            tool_result(1, 1, "call-2", "rm: /nope", error=failure),
            surface_op="append",
        )
        live.append("todo/write", {"todos": [HOSTILE]})
        live.append("plugin:probe/state", {"note": HOSTILE}, ignorable=True)
        live.append("step/end", step_end(1, 1))
        live.append("turn/end", turn_end(1))
        live.append("turn/start", turn_start(2))
        live.append("step/start", step_start(2, 1))
        live.append("user/message", user_message("Go on.", id="u2"), surface_op="append")
        cut = assistant_message(2, 1, "I was about", provider=P, model=M, id="a2", interrupted=True)
        live.append("assistant/message", cut, surface_op="append")
        live.append("step/end", step_end(2, 1))
        live.append("turn/end", turn_end(2, {"kind": "aborted", "reason": {"kind": "user"}}))
        live.append("turn/start", turn_start(3))
        live.append("step/start", step_start(3, 1))
        asks = [tool_call_block("call-3", "bash", "{}")]
        live.append(
            "assistant/message",
            assistant_message(3, 1, asks, provider=P, model=M, id="a3"),
            surface_op="append",
        )
        live.append("tool/call", tool_call(3, 1, "call-3", "bash", "{}"))
    # Closing leaves turn 3 open, as a crash would.


def _log(store: JsonlStore, session_id: str) -> Path:
    return store.inspect(session_id).path


def _render(path: Path, fmt: Any) -> str:
    parts: list[str] = []
    export_transcript(path, parts.append, format=fmt)
    return "".join(parts)


class _Page(HTMLParser):
    """Records the element tree's facts and checks that it nests properly."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.errors: list[str] = []
        self.classes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self.classes.extend((dict(attrs).get("class") or "").split())
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.stack == [], (parser.errors, parser.stack)
    return parser


def _check_inert(parser: _Page) -> None:
    """No scripts, no element that loads anything, no event handlers."""
    names = {tag for tag, _ in parser.tags}
    assert names <= {
        "html", "head", "meta", "title", "style", "body", "header", "h1", "dl", "dt", "dd",
        "main", "section", "h2", "div", "h3", "article", "span", "details", "summary", "pre",
        "p", "b",
    }, names  # fmt: skip
    for tag, attrs in parser.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert "src" not in attrs and "href" not in attrs, (tag, attrs)
    csp = [
        attrs for tag, attrs in parser.tags if attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and "default-src 'none'" in (csp[0]["content"] or "")


def test_the_html_page_shows_the_conversation_and_escapes_the_log(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    _record(store)
    page = _render(_log(store, "s1"), "html")
    parser = _parse(page)
    _check_inert(parser)
    text = "".join(parser.text)
    assert text.count(HOSTILE) == 3  # the user message, reasoning and tool result
    assert text.count("<script>alert") == 5  # and the two notes (their payload as JSON)
    assert parser.classes.count("turn") == 3
    assert parser.classes.count("step") == 3
    assert "reasoning" in parser.classes  # reasoning is collapsed in a <details>
    summaries = [tag for tag, _ in parser.tags if tag == "summary"]
    assert summaries
    assert parser.classes.count("failed") == 1
    assert "failed, error CommandError (EXIT_1): no such directory" in text
    assert "Tool call bash (call-1)" in text and '"command": "cat x"' in text
    assert "interrupted mid-stream" in text
    assert "Turn ended: aborted (user)." in text
    assert "The log ends inside turn 3" in text and "call-3" in text
    assert "todo/write" in text and "plugin:probe/state" in text


def test_markdown_escapes_markup_and_fences_code_safely(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    _record(store)
    page = _render(_log(store, "s1"), "markdown")
    prose, code = _split_fences(page)
    # Markup in prose is entity-escaped; in fenced code it is literal text (inert there).
    assert "<script>" not in prose and "<img" not in prose
    assert "&lt;script&gt;" in prose
    assert HOSTILE in code
    assert "## Turn 1" in page and "## Turn 3" in page
    assert "<details><summary>Reasoning</summary>" in page
    # The result holds a run of four backticks: its fence is five long.
    assert "`````\n```\n# not a heading\n````" in page
    assert "**The log ends inside turn 3**" in page


def _split_fences(page: str) -> tuple[str, str]:
    """(text outside fenced code blocks, text inside them), closing fences matched by length."""
    prose: list[str] = []
    code: list[str] = []
    fence: str | None = None
    for line in page.splitlines():
        if fence is None and line.startswith("```"):
            fence = line[: len(line) - len(line.lstrip("`"))]
        elif fence is not None and line == fence:
            fence = None
        else:
            (prose if fence is None else code).append(line)
    assert fence is None
    return "\n".join(prose), "\n".join(code)


def test_crash_closers_and_forks_are_marked(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    _record(store)
    store.load("s1")  # the restore closes turn 3
    fork_at = next(e.seq for e in store.inspect("s1").events if e.type == "tool/call")
    child = store.fork("s1", boundary=fork_at, child_id="s1-fork")
    restored = _parse(_render(_log(store, "s1"), "html"))
    text = "".join(restored.text)
    assert "written by a restore or fork, not by the tool" in text
    assert "Turn ended: interrupted: closed by a restore after a crash." in text
    assert "The log ends inside" not in text
    forked = "".join(_parse(_render(_log(store, child), "html")).text)
    assert "Fork point: everything above is inherited from the parent session." in forked
    assert "Turn ended: forked: closed at the fork point." in forked
    assert "forked" in forked and "yes: it starts with an inherited prefix" in forked


@pytest.mark.parametrize(
    "name", sorted(path.name for path in (REPO / "fixtures" / "valid").iterdir())
)
def test_every_format_version_exports_like_its_v4_upgrade(name: str) -> None:
    directory = REPO / "fixtures" / "valid" / name
    source = next(path for path in directory.glob("session*.jsonl"))
    expected = directory / "expected.v4.jsonl"
    for fmt in ("markdown", "html"):
        old = _render(source, fmt)
        new = _render(expected, fmt)
        if fmt == "html":
            _check_inert(_parse(old))
        # Only the header's format line differs.
        differing = [
            (a, b) for a, b in zip(old.splitlines(), new.splitlines(), strict=True) if a != b
        ]
        assert all("format" in a and "v4" in b for a, b in differing), differing[:3]


def test_a_corrupt_log_stops_the_export_and_leaves_the_output_untouched(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    _record(store)
    log = _log(store, "s1")
    lines = log.read_bytes().splitlines(keepends=True)
    lines[5] = b'{"type":"turn/start","seq":5,"time":1,"dat\n'  # a committed bad line
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(lines))
    output = tmp_path / "out.html"
    output.write_text("previous export")
    with pytest.raises(CorruptLogError):
        export_file(broken, output, format="html")
    assert output.read_text() == "previous export"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["broken.jsonl", "out.html", "store"]


def test_the_command_writes_stdout_or_a_file(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    _record(store)
    log = str(_log(store, "s1"))
    runner = CliRunner()
    done = runner.invoke(main, ["export", log])
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("# Session s1\n")
    target = tmp_path / "t.html"
    done = runner.invoke(main, ["export", log, "--format", "html", "-o", str(target)])
    assert done.exit_code == 0, done.output
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert "wrote" in done.stderr
    done = runner.invoke(main, ["export", log, "--format", "pdf"])
    assert done.exit_code == 2
    done = runner.invoke(main, ["export", str(tmp_path / "missing.jsonl")])
    assert done.exit_code == 2


CONTROLS = "clear\x1b[2J csi\x9b1;1H bell\x07 cr\r done"
"""Log text that clears the screen, moves the cursor, rings and overwrites its line."""
CONTROLS_SHOWN = "clear\\x1b[2J csi\\x9b1;1H bell\\x07 cr\\x0d done"


def _control_log(root: Path) -> Path:
    store = JsonlStore(root)
    with store.new("s1", cwd="/w") as live:
        live.append("turn/start", turn_start(1))
        live.append("step/start", step_start(1, 1))
        live.append("user/message", user_message(CONTROLS, id="u1"), surface_op="append")
        live.append("step/end", step_end(1, 1))
        live.append("turn/end", turn_end(1))
    return _log(store, "s1")


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_control_characters_in_the_log_are_shown_escaped(tmp_path: Path, fmt: Any) -> None:
    page = _render(_control_log(tmp_path / "store"), fmt)
    assert not any(ch in page for ch in "\x1b\x9b\x07\r"), page
    assert CONTROLS_SHOWN in page
    assert "\n" in page  # the transcript's own newlines stay


def test_markdown_export_to_a_terminal_cannot_clear_it(tmp_path: Path) -> None:
    from tests.cli.conftest import run_script_on_terminal

    log = _control_log(tmp_path / "store")
    done, shown = run_script_on_terminal("export", log, terminal="stdout")
    assert done.returncode == 0, done.stderr
    assert shown.startswith(b"# Session s1")
    assert b"\x1b" not in shown and b"\xc2\x9b" not in shown and b"\x07" not in shown
    assert CONTROLS_SHOWN.encode() in shown


# -- a large log: bounded memory, and a kill mid-export ---------------------------------------

LARGE_BYTES = 200_000_000  # 200 MB
RESULT_BYTES = 256 * 1024


def _large_log(root: str | Path) -> Path:
    """About 200 MB: turns of one tool call each, with 256 KB results."""
    store = JsonlStore(root)
    chunk = ("output line with <tags> & text\n" * (RESULT_BYTES // 32))[:RESULT_BYTES]
    with store.new("big") as live:
        turn = 0
        written = 0
        while written < LARGE_BYTES:
            turn += 1
            live.append("turn/start", turn_start(turn))
            live.append("step/start", step_start(turn, 1))
            live.append(
                "user/message", user_message(f"Question {turn}", id=f"u{turn}"), surface_op="append"
            )
            asks = [tool_call_block(f"c{turn}", "bash", '{"command": "cat"}')]
            live.append(
                "assistant/message",
                assistant_message(turn, 1, asks, provider=P, model=M, id=f"a{turn}"),
                surface_op="append",
            )
            live.append("tool/result", tool_result(turn, 1, f"c{turn}", chunk), surface_op="append")
            live.append("step/end", step_end(turn, 1))
            live.append("turn/end", turn_end(turn))
            written += RESULT_BYTES  # an underestimate of the turn's bytes
            if turn % 50 == 0:
                live.flush()
    return next(Path(root).glob("*/big/session.v4.jsonl"))


# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across execve, so a child
# would report its parent's peak.
PEAK_PROBE = (
    "import sys\n"
    "from dsh_store.cli import main\n"
    "sys.argv = ['dsh-store', *sys.argv[1:]]\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    status = open('/proc/self/status').read()\n"
    "    peak = status.split('VmHWM:')[1].split()[0]\n"
    "    print(f'peak-rss-kib {peak}', file=sys.stderr)\n"
)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM from /proc")
def test_a_large_log_exports_in_bounded_memory_and_a_kill_leaves_no_output(
    tmp_path: Path,
) -> None:
    # Written by a child: a live session keeps every line, which this process need not.
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tests.test_export import _large_log; "
            f"print(_large_log({str(tmp_path / 'store')!r}))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    log = Path(made.stdout.strip())
    size = log.stat().st_size
    assert size >= LARGE_BYTES
    out = tmp_path / "big.html"
    done = subprocess.run(
        [sys.executable, "-c", PEAK_PROBE, "export", str(log), "--format", "html", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stderr.split("peak-rss-kib ")[1].split()[0])
    print(f"log {size / 2**20:.0f} MiB, html {out.stat().st_size / 2**20:.0f} MiB, "
          f"peak RSS {peak_kib / 1024:.0f} MiB")  # fmt: skip
    # Generous: the interpreter and dsh_store take ~40 MiB; one event is ~0.3 MiB.
    assert peak_kib < 150 * 1024, peak_kib
    assert peak_kib * 1024 < size / 2
    with out.open("rb") as page:
        assert page.read(15) == b"<!DOCTYPE html>"
        page.seek(-8, os.SEEK_END)
        assert page.read() == b"</html>\n"

    # SIGKILL mid-export: the output keeps its previous content; only a hidden temp is left.
    out.write_text("previous")
    child = subprocess.Popen(
        [sys.executable, "-m", "dsh_store", "export", str(log), "--format", "html", "-o", str(out)],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    temps: list[Path] = []
    while time.monotonic() < deadline:
        temps = [path for path in tmp_path.glob(".big.html.*.tmp") if path.stat().st_size > 2**20]
        if temps or child.poll() is not None:
            break
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert temps, "the export finished before it could be killed"
    assert out.read_text() == "previous"


# -- a real browser -------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"


def _png_size_and_pixels(png: bytes) -> tuple[int, int, bytes]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    position, data = 8, b""
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        if kind == b"IDAT":
            data += png[position + 8 : position + 8 + length]
        position += 12 + length
    return width, height, zlib.decompress(data)


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"needs headless Chromium at {CHROMIUM}")
def test_chromium_renders_the_page_without_running_anything(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    _record(store)
    page = tmp_path / "t.html"
    export_file(_log(store, "s1"), page, format="html")
    flags = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1000,1400",
    ]
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    width, height, pixels = _png_size_and_pixels(shot.read_bytes())
    assert (width, height) == (1000, 1400)
    # Not blank: the filtered rows hold many distinct byte values (text, boxes, colours).
    assert len(set(pixels)) > 50
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    parser = _Page()
    parser.feed(dom)
    names = {tag for tag, _ in parser.tags}
    assert "script" not in names and "img" not in names
    assert [tag for tag, attrs in parser.tags if "turn" in (attrs.get("class") or "").split()] == [
        "section"
    ] * 3
    assert HOSTILE in "".join(parser.text)
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_a_surface_replacement_is_noted() -> None:
    page = _render(REPO / "fixtures" / "valid" / "v2-replacement" / "expected.v4.jsonl", "markdown")
    assert "replaces the messages from seq" in page
