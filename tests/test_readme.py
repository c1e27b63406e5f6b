"""README.md runs as written: every command of its bash blocks, in order, as a shell runs them, in a
throwaway HOME (so a throwaway vault: the README sets no COFFER_HOME) with `coffer` on PATH, the servers
it adds included (`uvx mcp-server-time` from PyPI, `npx @modelcontextprotocol/server-github` from npm)
and the agents' own CLIs (`claude`, `codex`, from .ci/node).

What a test cannot run as written is in NOT_AS_WRITTEN, with why and what runs instead; a command run
already (`coffer demo` is in two blocks) runs once; `coffer serve`, which the Serving block registers
with the agents, is started after it by a real MCP client (the SDK's, as an agent does) for one
tools/list. .ci/run installs uv and the agents' CLIs and fetches the packages; elsewhere, a missing
program or an unreachable package registry skips the test and says which.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import anyio
import pytest

from tests.fixtures.gateway_harness import serve, stop_process

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
AGENTS = ROOT / ".ci" / "node" / "node_modules" / ".bin"  # where .ci/run installs claude and codex
REQUIRED = bool(os.environ.get("CI") or os.environ.get("COFFER_REQUIRE_SANDBOX"))  # under .ci/run: never skip

# The commands a test cannot run as written (by their first words), and why; `coffer ui` runs otherwise.
NOT_AS_WRITTEN = {
    ("pip", "install", "."): "installs this checkout, which the suite runs from (`coffer` is a shim onto it)",
    ("pip", "install", ".[test]"): "the same, with the test tools this suite already runs with",
    ("pytest",): "runs this suite",
    ("pipx", "install", "."): "installs this checkout into a tool environment (`coffer` is a shim onto it)",
    ("coffer", "ui"): "serves until stopped: run with --no-browser, its page read with its token, then stopped",
}


def commands() -> list[list[str]]:
    """Every command of README.md's bash blocks in order, as a shell splits them (`a && b` is two)."""
    out: list[list[str]] = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            while words:
                cut = words.index("&&") if "&&" in words else len(words)
                out.append(words[:cut])
                words = words[cut + 1 :]
    return [c for c in out if c]


def instead(argv: list[str]) -> str | None:
    return next((why for start, why in NOT_AS_WRITTEN.items() if tuple(argv[: len(start)]) == start), None)


def test_the_list_of_commands_not_run_as_written_is_what_the_readme_holds() -> None:
    every = commands()
    assert every[0] == ["pip", "install", "."] and ["coffer", "demo"] in every
    for start in NOT_AS_WRITTEN:
        assert any(tuple(c[: len(start)]) == start for c in every), f"the README no longer says {start}"
    adds = [c[2] for c in every if c[:2] == ["coffer", "add"]]
    assert len(adds) == len(set(adds)), f"a block adds a server an earlier one added: {adds}"


def _missing() -> list[str]:
    """What the README's commands need that is not here: programs, then the package registries."""
    path = f"{AGENTS}{os.pathsep}{os.environ.get('PATH', '')}"
    gone = [p for p in ("uvx", "npx", "claude", "codex") if shutil.which(p, path=path) is None]
    for url in (
        "https://pypi.org/simple/mcp-server-time/",
        "https://registry.npmjs.org/@modelcontextprotocol%2fserver-github",
    ):
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10).close()
        except OSError as exc:
            gone.append(f"{url} ({exc})")
    return gone


def _environment(tmp_path: Path) -> dict[str, str]:
    """A user's shell in a throwaway HOME: `coffer` on PATH (this checkout), the agents' CLIs, the
    certificates and proxies of this machine, and the GITHUB_TOKEN the README's github line refers to."""
    home, shims = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    shims.mkdir()
    coffer = shims / "coffer"
    coffer.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m coffer "$@"\n')
    coffer.chmod(0o755)
    keep = ("LANG", "LC_ALL", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
    proxies = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
    tests = ("COFFER_EMBEDDINGS", "COFFER_ENGINE_IDLE", "COFFER_REGISTRY_REFRESH", "COLUMNS", "CI")
    env = {k: os.environ[k] for k in (*keep, *proxies, *tests) if k in os.environ}
    path = os.pathsep.join([str(shims), str(AGENTS), os.environ.get("PATH", "")])
    return env | {"HOME": str(home), "PATH": path, "PYTHONPATH": str(ROOT), "GITHUB_TOKEN": "ghp_readme_example"}


def test_every_readme_block_runs_in_order(tmp_path: Path) -> None:
    missing = [] if REQUIRED else _missing()
    if missing:
        pytest.skip(f"the README's commands need what is not here (.ci/run installs it): {', '.join(missing)}")
    env = _environment(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    # Claude Code as a user has it right after `npm i -g`: on PATH, never run (no ~/.claude.json yet)
    ran = []
    try:
        for argv in commands():
            if argv in ran:  # `coffer demo` is in two blocks: a second run shows nothing the first did not
                continue
            if instead(argv) is not None:
                if argv[:2] == ["coffer", "ui"]:
                    _console(env, work)
                continue
            done = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=240)
            assert done.returncode == 0, f"{shlex.join(argv)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
            ran.append(argv)
        names = anyio.run(_listed, env)
        assert {"time__get_current_time", "github__create_pull_request", "coffer__search_tools"} <= set(names)
        assert "github__merge_pull_request" not in names  # disabled by the README
    finally:
        subprocess.run(["coffer", "status", "--stop"], env=env, cwd=work, capture_output=True, timeout=60)
    assert ["coffer", "call", "time__get_current_time", '{"timezone": "Asia/Tokyo"}'] in ran


def _console(env: dict[str, str], work: Path) -> None:
    """`coffer ui`, without a browser: its page answers with the token it prints; then it is stopped."""
    proc = subprocess.Popen(["coffer", "ui", "--no-browser"], env=env, cwd=work, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("coffer console: http://127.0.0.1:"), line
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # it trades the token for a cookie
        with browser.open(line.split(": ", 1)[1].strip(), timeout=30) as page:
            assert page.status == 200 and b"Coffer" in page.read()
    finally:
        stop_process(proc)


async def _listed(env: dict[str, str]) -> list[str]:
    """`coffer serve` as the agents the README points at it start it: one tools/list."""
    async with serve(Path(env["HOME"]), env=env, timeout=60) as served:
        return await served.tool_names()
