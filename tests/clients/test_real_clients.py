"""The real Claude Code CLI judges what `coffer import --move` wrote: `claude mcp list` (offline) reads the
user file and the project's local scope, health-checks every entry, and must find Coffer connected and
the moved servers gone. .ci/run installs `@anthropic-ai/claude-code` into .ci/node; skipped without it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.clients.conftest import put
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import FIXTURE, ROOT

CLAUDE = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "claude"
RUN_LIMIT_S = 120  # a bound on a hung run, not a speed target


def claude() -> str:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the Claude Code CLI cannot run")
    found = str(CLAUDE) if CLAUDE.exists() else shutil.which("claude")
    if found is None:
        pytest.skip(f"Claude Code CLI not installed: run .ci/run (npm install --prefix .ci/node) to get {CLAUDE}")
    return found


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
    env = dict(os.environ, HOME=str(home), COFFER_HOME=str(coffer_home), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [claude(), "mcp", "list"], cwd=project, env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    lines = [line for line in out.splitlines() if line.startswith(("coffer:", "fx:", "fx2:"))]
    assert len(lines) == 1 and lines[0].startswith("coffer:") and "Connected" in lines[0], out
