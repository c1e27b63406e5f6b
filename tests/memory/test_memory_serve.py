"""`coffer__ask` end to end: `coffer serve` as a subprocess, the resource fixture registered as an upstream,
and real MCP clients with and without the sampling capability."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext
from typer.testing import CliRunner

from tests.conftest import FIXTURES, PYTHON, run_cli, subprocess_env

QUESTION = "how do I roll back a bad production deploy?"


def _payload(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    if isinstance(result.structured_content, dict) and "passages" in result.structured_content:
        return result.structured_content
    return json.loads(result.content[0].text)


async def _ask_through_serve(home: Path, tmp_path: Path, sampling: bool) -> tuple[dict[str, Any], list[str]]:
    prompts: list[str] = []

    async def on_sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        prompts.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant",
            model="test-model",
            stop_reason="endTurn",
            content=types.TextContent(type="text", text="Run `make rollback ENV=prod` from the ops box [1]."),
        )

    params = StdioServerParameters(command=PYTHON, args=["-m", "coffer", "serve"], env=subprocess_env(home))
    with (tmp_path / f"serve-{sampling}.stderr").open("w") as errlog, anyio.fail_after(60):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, sampling_callback=on_sampling if sampling else None) as session,
        ):
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert "coffer__ask" in tools
            # the gateway indexes the upstream's resources once it is up: ask until they are in (bounded)
            while True:
                payload = _payload(await session.call_tool("coffer__ask", {"question": QUESTION, "top_k": 3}))
                if any(p["source"]["type"] == "resource" for p in payload["passages"]):
                    return payload, prompts
                await anyio.sleep(0.2)


def test_coffer_ask_through_serve_with_and_without_sampling(cli: CliRunner, coffer_home: Path, tmp_path: Path) -> None:
    run_cli(cli, "add", "res", "--", PYTHON, str(FIXTURES / "resource_server.py"))
    run_cli(cli, "memory", "add", "Rollbacks of the data pipeline are done by the data team.")

    with_sampling, prompts = anyio.run(_ask_through_serve, coffer_home, tmp_path, True)
    top = with_sampling["passages"][0]
    assert top["source"] == {"type": "resource", "server": "res", "uri": "docs://runbook"}
    assert "make rollback ENV=prod" in top["text"]
    assert with_sampling["answer"] == "Run `make rollback ENV=prod` from the ops box [1]."
    assert "answer_error" not in with_sampling
    assert prompts and "make rollback ENV=prod" in prompts[-1] and QUESTION in prompts[-1]
    assert with_sampling["total_searched"] >= 4  # the note and the three text resources

    without, none = anyio.run(_ask_through_serve, coffer_home, tmp_path, False)
    assert none == [] and "answer" not in without
    assert without["passages"][0]["source"]["uri"] == "docs://runbook"
    assert without["total_searched"] == with_sampling["total_searched"]


async def _ask_once(home: Path, tmp_path: Path) -> dict[str, Any]:
    params = StdioServerParameters(command=PYTHON, args=["-m", "coffer", "serve"], env=subprocess_env(home))
    with (tmp_path / "serve-once.stderr").open("w") as errlog, anyio.fail_after(60):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return _payload(await session.call_tool("coffer__ask", {"question": QUESTION, "top_k": 5}))


def test_coffer_ask_hides_knowledge_of_an_unapproved_server(cli: CliRunner, coffer_home: Path, tmp_path: Path) -> None:
    run_cli(cli, "add", "res", "--", PYTHON, str(FIXTURES / "resource_server.py"))  # the probe indexes its resources
    assert any(p["source"]["type"] == "resource" for p in _ask_offline(cli))
    toml = coffer_home / "coffer.toml"  # an agent edits the launch config behind the user's back
    toml.write_text(toml.read_text().replace("resource_server.py", "resource_server.py --evil", 1))
    payload = anyio.run(_ask_once, coffer_home, tmp_path)
    assert [p for p in payload["passages"] if p["source"]["type"] == "resource"] == []
    run_cli(cli, "approve", "res")
    assert any(p["source"]["type"] == "resource" for p in _ask_offline(cli))


def _ask_offline(cli: CliRunner) -> list[dict[str, Any]]:
    return json.loads(run_cli(cli, "ask", QUESTION, "--json").stdout)["passages"]
