"""`coffer install CLIENT` right after `npm i -g`: the client's program is on PATH but it never ran, so it has
no config yet. Before: refused ("does not look installed here"). Now the config is created where and as the
client reads it, and the real CLI (where .ci/run installed it into .ci/node) lists Coffer from it; with
neither the program nor its config, still one line that says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import run_cli
from tests.fixtures.gateway_harness import ROOT

NODE_BIN = ROOT / ".ci" / "node" / "node_modules" / ".bin"
CASES = {  # client: (its program, where its config is created, how to read it)
    "claude-code": ("claude", ".claude.json", json.loads),
    "codex": ("codex", ".codex/config.toml", tomllib.loads),
    "gemini": ("gemini", ".gemini/settings.json", json.loads),
}


def fake_program(folder: Path, name: str) -> None:
    folder.mkdir(exist_ok=True)
    program = folder / name
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)


@pytest.mark.parametrize("client", sorted(CASES))
def test_a_client_on_path_that_never_ran_gets_its_config(
    cli: CliRunner, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    program, rel, parse = CASES[client]
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    refused = run_cli(cli, "install", client, code=3).stderr  # type: ignore[attr-defined]
    assert refused.count("\n") == 1 and f"no `{program}` on PATH" in refused and "--force" in refused
    assert not any(home.iterdir())  # nothing created

    fake_program(tmp_path / "bin", program)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    run_cli(cli, "install", client)
    data = parse((home / rel).read_text())
    entry = data["mcp_servers" if client == "codex" else "mcpServers"]["coffer"]
    assert entry["args"][-1] == "serve" and entry["env"] == {"COFFER_HOME": os.environ["COFFER_HOME"]}
    assert (home / rel).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("client", ["claude-code", "codex"])
def test_the_real_cli_lists_coffer_from_the_config_install_created(
    cli: CliRunner, home: Path, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    program = CASES[client][0]
    if shutil.which("node") is None or not (NODE_BIN / program).exists():
        pytest.skip(f"the {program} CLI is not installed: run .ci/run (npm install --prefix .ci/node)")
    monkeypatch.setenv("PATH", f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}")
    assert not any(home.iterdir())  # as after `npm i -g`: it never ran
    run_cli(cli, "install", client)
    env = dict(os.environ, PYTHONPATH=str(ROOT), COFFER_STANDALONE="1")  # Claude Code's health check serves it
    done = subprocess.run(
        [program, "mcp", "list"], cwd=home, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    line = next((ln for ln in out.splitlines() if ln.split() and ln.split()[0].rstrip(":") == "coffer"), "")
    assert "serve" in line, out
    if client == "claude-code":
        assert "Connected" in line, out
