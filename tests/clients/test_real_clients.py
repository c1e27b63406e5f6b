"""The agents' own CLIs judge what `coffer import --move` wrote: `claude mcp list`, `codex mcp list` and
`gemini mcp list` (all offline) read their config files and must list Coffer and no longer the moved
servers. Claude Code and Gemini CLI also health-check each server (they start it, and Claude Code lists its
tools): on a cold engine, whose servers are still starting, both must say Coffer is healthy in their exact
words ("✔ Connected", not "! Connected · tools fetch failed"; "✓ ... - Connected"). Codex's `mcp list`
starts nothing. .ci/run installs them into .ci/node (@anthropic-ai/claude-code, @openai/codex,
@google/gemini-cli); each test is skipped without its CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from coffer.engine import control
from tests.clients.conftest import put
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import FIXTURE, ROOT, slow_vault

CLAUDE = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "claude"
RUN_LIMIT_S = 120  # a bound on a hung run, not a speed target
CLAUDE_HEALTHY = "✔ Connected"  # what `claude mcp list` ends a healthy server's line with
GEMINI_UNTRUSTING = '"security": {"folderTrust": {"enabled": false}}'  # else it starts no server to check


def agent_cli(name: str) -> str:
    if shutil.which("node") is None:
        pytest.skip(f"node is not installed: the {name} CLI cannot run")
    local = CLAUDE.parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"the {name} CLI is not installed: run .ci/run (npm install --prefix .ci/node) to get {local}")
    return found


def claude() -> str:
    return agent_cli("claude")


def test_claude_code_lists_coffer_after_a_move(
    cli: CliRunner, home: Path, coffer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = home / "app"
    project.mkdir()
    fixture = {"type": "stdio", "command": sys.executable, "args": [str(FIXTURE), "--name", "fx"]}
    user_file = {"mcpServers": {"fx": fixture}, "projects": {str(project): {"mcpServers": {"fx2": fixture}}}}
    put(home, ".claude.json", json.dumps(user_file, indent=2))
    monkeypatch.chdir(project)
    run_cli(cli, "import", "claude-code", "--move")
    control.stop(coffer_home / "coffer.toml")  # a cold engine: the health check starts it
    env = dict(os.environ, HOME=str(home), COFFER_HOME=str(coffer_home), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [claude(), "mcp", "list"], cwd=project, env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    lines = [line for line in out.splitlines() if line.startswith(("coffer:", "fx:", "fx2:"))]
    assert len(lines) == 1 and lines[0].startswith("coffer:") and lines[0].endswith(CLAUDE_HEALTHY), out


@pytest.mark.parametrize(
    ("client", "rel", "text"),
    [
        ("codex", ".codex/config.toml", '[mcp_servers.fx]\ncommand = "{py}"\nargs = ["{fixture}", "--name", "fx"]\n'),
        (
            "gemini",
            ".gemini/settings.json",
            "{{"
            + GEMINI_UNTRUSTING.replace("{", "{{").replace("}", "}}")
            + ', "mcpServers": {{"fx": {{"command": "{py}", '
            '"args": ["{fixture}"]}}}}}}',
        ),
    ],
)
def test_codex_and_gemini_list_coffer_after_a_move(
    cli: CliRunner, home: Path, coffer_home: Path, client: str, rel: str, text: str
) -> None:
    exe = agent_cli(client)
    put(home, rel, text.format(py=sys.executable, fixture=FIXTURE))
    run_cli(cli, "import", client, "--move", "--no-probe")
    control.stop(coffer_home / "coffer.toml")  # a cold engine: Gemini's health check starts it
    env = dict(os.environ, HOME=str(home), COFFER_HOME=str(coffer_home), CODEX_HOME=str(home / ".codex"))
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([exe, "mcp", "list"], cwd=home, env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    listed = [line for line in out.splitlines() if "coffer" in line or " fx" in line or line.startswith("fx")]
    assert any("coffer" in line and "serve" in line for line in listed), out
    assert not any(line.split()[0].strip("○●✓✗:") == "fx" for line in listed if line.split()), out
    if client == "gemini":
        assert any(line.startswith("✓ coffer:") and line.endswith(" - Connected") for line in listed), out


@pytest.mark.parametrize("client", ["claude", "gemini"])
def test_agents_say_coffer_is_healthy_on_a_cold_engine_whose_servers_are_slow(
    home: Path, coffer_home: Path, client: str
) -> None:
    """Two servers that take 6 s to start, known from the snapshot a warm engine left: the health check
    (Claude Code's lists the tools) is answered from it at once, for the capabilities the agent declares."""
    exe = agent_cli(client)
    anyio.run(slow_vault, coffer_home, ("slow0", "slow1"), 6.0)
    control.stop(coffer_home / "coffer.toml")
    coffer = {"command": sys.executable, "args": ["-m", "coffer", "serve"]}
    if client == "claude":
        put(home, ".claude.json", json.dumps({"mcpServers": {"coffer": {"type": "stdio", **coffer}}}))
    else:
        put(
            home,
            ".gemini/settings.json",
            "{" + GEMINI_UNTRUSTING + ', "mcpServers": ' + json.dumps({"coffer": coffer}) + "}",
        )
    env = dict(os.environ, HOME=str(home), COFFER_HOME=str(coffer_home), PYTHONPATH=str(ROOT))
    done = subprocess.run([exe, "mcp", "list"], cwd=home, env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    (line,) = [line for line in out.splitlines() if "coffer" in line and "serve" in line]
    healthy = (
        line.endswith(CLAUDE_HEALTHY) if client == "claude" else line.startswith("✓") and line.endswith("- Connected")
    )
    assert healthy, out
