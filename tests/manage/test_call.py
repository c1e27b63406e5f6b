"""`coffer call` goes the agent's way: through the engine where one runs, else through a gateway in its own
process; logged either way (`coffer log`, `coffer log --tail`), with the hint a confined server's denial
gets, and the name meant for a typo. Before: no log row, no hint, never the engine."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from coffer.upstreams import sandbox
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import add_fixture, serve, serve_env

READER = '''
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("reader")


@app.tool()
def read(path: str) -> str:
    """Read a text file."""
    try:
        with open(path) as fh:
            return fh.read()
    except FileNotFoundError:  # worded as Node's fs does, as real servers answer
        raise ToolError(f"ENOENT: no such file or directory, open '{path}'") from None
    except PermissionError:
        raise ToolError(f"EACCES: permission denied, open '{path}'") from None


app.run()
'''


def rows(cli: CliRunner) -> list[dict[str, Any]]:
    return list(json.loads(run_cli(cli, "log", "--json").stdout)["calls"])  # type: ignore[attr-defined]


@pytest.mark.skipif(not sandbox.support().available, reason="no confinement here")
def test_a_call_without_an_engine_is_logged_and_a_denial_says_the_grant(
    cli: CliRunner, coffer_home: Path, tmp_path: Path
) -> None:
    server = tmp_path / "srv" / "reader.py"
    server.parent.mkdir()
    server.write_text(READER)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("mine\n")
    run_cli(cli, "add", "reader", "--no-probe", "--", sys.executable, str(server))

    denied = run_cli(cli, "call", "reader__read", json.dumps({"path": str(outside / "notes.txt")}), "--json", code=1)
    answer = json.loads(denied.stdout)  # type: ignore[attr-defined]
    said = "\n".join(c["text"] for c in answer["result"]["content"])
    assert answer["via"] == "in-process" and ("ENOENT" in said or "EACCES" in said)
    assert "coffer edit reader --allow-read" in said, said  # the hint an agent's failed call gets

    (row,) = rows(cli)
    assert (row["client_name"], row["server"], row["tool"], row["outcome"]) == (
        "coffer-call",
        "reader",
        "read",
        "error",
    )
    assert str(outside) not in json.dumps(row) and "mine" not in json.dumps(row)  # no arguments, no results

    # listed by that call: a typo of its tool, or of its server, gets the name meant, and is not a call
    for typo in ("reader__raed", "raeder__read"):
        assert "did you mean 'reader__read'?" in run_cli(cli, "call", typo, code=3).stderr  # type: ignore[attr-defined]
    assert len(rows(cli)) == 1


@pytest.mark.anyio
async def test_with_an_engine_the_call_is_one_of_its_sessions_and_tailed(coffer_home: Path) -> None:
    add_fixture(coffer_home, "fx")
    env = serve_env(coffer_home)
    coffer = [sys.executable, "-m", "coffer"]
    tail = subprocess.Popen(
        [*coffer, "log", "--tail", "--json", "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read(out: Any) -> None:
        for line in out:
            lines.put(line)

    threading.Thread(target=read, args=(tail.stdout,), daemon=True).start()
    try:
        async with serve(coffer_home):  # an agent's session: the engine runs
            done = await anyio.run_process([*coffer, "call", "fx__echo", '{"text": "hi"}', "--json"], env=env)
            answer = json.loads(done.stdout)
            assert answer["via"] == "engine" and answer["result"]["content"][0]["text"] == "hi"
        row = json.loads(await anyio.to_thread.run_sync(lambda: lines.get(timeout=20)))
        assert (row["client_name"], row["server"], row["tool"], row["outcome"]) == ("coffer-call", "fx", "echo", "ok")
    finally:
        tail.kill()
        tail.wait()
