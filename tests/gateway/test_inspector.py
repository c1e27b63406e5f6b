"""End to end with a client Coffer did not write: the MCP Inspector CLI drives `coffer serve` over stdio.

The Inspector (npm `@modelcontextprotocol/inspector`, installed by .ci/run into .ci/node) starts
`coffer serve` itself, lists its tools and calls one, as a host would. Skipped only when node or the
package is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import run_cli
from tests.fixtures.gateway_harness import ROOT, add_fixture

LOCAL_BIN = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"
RUN_LIMIT_S = 60  # a bound on a hung run, not a speed target


def inspector() -> str:
    """The Inspector CLI from .ci/node (what .ci/run installs), else one on PATH; skip without either."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the MCP Inspector CLI cannot run")
    found = str(LOCAL_BIN) if LOCAL_BIN.exists() else shutil.which("mcp-inspector")
    if found is None:
        pytest.skip(f"MCP Inspector not installed: run .ci/run (npm install --prefix .ci/node) to get {LOCAL_BIN}")
    return found


def drive(home: Path, *method: str) -> Any:
    """One Inspector run: it spawns `coffer serve` (vault at `home`), sends one request, prints the result."""
    argv = [inspector(), "--cli", "-e", f"COFFER_HOME={home}", "-e", f"PYTHONPATH={ROOT}", "--cwd", str(home)]
    argv += [sys.executable, "-m", "coffer", "serve", *method]
    env = {k: v for k, v in os.environ.items() if k != "COFFER_HOME"}  # only -e reaches the gateway
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=env, cwd=home)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    return json.loads(done.stdout)


def test_inspector_lists_and_calls_through_the_gateway(cli: CliRunner, coffer_home: Path) -> None:
    inspector()
    add_fixture(coffer_home, "alpha")
    run_cli(cli, "refresh", "alpha")  # the snapshot answers the Inspector's first tools/list at once

    listed = drive(coffer_home, "--method", "tools/list")
    names = [t["name"] for t in listed["tools"]]
    assert names[:2] == ["coffer__search_tools", "coffer__ask"]
    assert {"alpha__echo", "alpha__add"} <= set(names)
    assert all(name.split("__")[0] in ("coffer", "alpha") for name in names)
    echo = next(t for t in listed["tools"] if t["name"] == "alpha__echo")
    assert echo["inputSchema"]["required"] == ["text"]  # the upstream's own schema, under the namespaced name

    called = drive(coffer_home, "--method", "tools/call", "--tool-name", "alpha__echo", "--tool-arg", "text=hi there")
    assert called["isError"] is False
    assert called["content"] == [{"type": "text", "text": "hi there"}]  # the upstream's result, passed through

    found = drive(
        coffer_home, "--method", "tools/call", "--tool-name", "coffer__search_tools", "--tool-arg", "query=echo text"
    )
    assert found["isError"] is False and found["structuredContent"]["tools"][0]["name"] == "alpha__echo"

    expected = {("inspector-cli", "alpha", "echo", "ok"), ("inspector-cli", "coffer", "search_tools", "ok")}
    deadline = time.monotonic() + 15  # the engine's log writer is off the call path: its rows come a moment later
    while True:
        rows = json.loads(run_cli(cli, "log", "--json").stdout)["calls"]
        logged = {(r["client_name"], r["server"], r["tool"], r["outcome"]) for r in rows}
        if logged >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert logged >= expected
