"""Knowledge from a real upstream: the resource fixture server over stdio, read with a real ClientSession."""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from coffer import memory
from tests.conftest import FIXTURES, PYTHON

RESOURCE_SERVER = FIXTURES / "resource_server.py"


async def _fetch(tmp_path: Path) -> list[tuple[str, str, str]]:
    params = StdioServerParameters(command=PYTHON, args=[str(RESOURCE_SERVER)])
    with (tmp_path / "upstream.stderr").open("w") as errlog, anyio.fail_after(30):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            # resources the gateway already listed (wire dicts) are read without listing again
            listed = [{"uri": "docs://oncall", "name": "oncall"}, {"uri": "docs://logo.png"}, {"uri": "docs://broken"}]
            pre = await memory.fetch_text_resources(session, "res", listed=listed)
            assert [(uri, name) for uri, name, _ in pre] == [("docs://oncall", "oncall")]
            return await memory.fetch_text_resources(session, "res")


def test_fixture_resources_are_indexed_and_answered(coffer_home: Path, tmp_path: Path) -> None:
    items = anyio.run(_fetch, tmp_path)
    # all three pages were walked; the PNG blob and the resource that fails to read are skipped
    assert [(uri, name) for uri, name, _ in items] == [
        ("docs://runbook", "runbook"),
        ("docs://glossary", "glossary"),
        ("docs://oncall", "oncall"),
    ]
    assert all(isinstance(text, str) and text.strip() for _, _, text in items)
    assert memory.index_resources("res", items) == 3
    memory.add_note("Rollbacks of the data pipeline are done by the data team, not ops.", ["data"])

    prompts: list[str] = []

    async def sample(prompt: str) -> str:
        prompts.append(prompt)
        return "Run `make rollback ENV=prod` from the ops box [1]."

    result = anyio.run(memory.answer, "how do I roll back a bad production deploy?", 3, sample)
    top = result["passages"][0]
    assert top["source"] == {"type": "resource", "server": "res", "uri": "docs://runbook"}
    assert "make rollback ENV=prod" in top["text"] and top["score"] > 0
    assert result["answer"].startswith("Run `make rollback")
    assert "make rollback ENV=prod" in prompts[0] and "res docs://runbook" in prompts[0]
    assert result["total_searched"] >= 4 and len(result["passages"]) == 3

    cluster = anyio.run(memory.answer, "what is the Quokka cluster?")
    assert cluster["passages"][0]["source"]["uri"] == "docs://glossary"


def test_server_without_resources_gives_nothing(tmp_path: Path) -> None:
    """A server that declares no resources capability is not asked to list any."""

    async def run() -> list[tuple[str, str, str]]:
        params = StdioServerParameters(command=PYTHON, args=["-c", _TOOLS_ONLY])
        with (tmp_path / "e.log").open("w") as errlog, anyio.fail_after(30):
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.capabilities.resources is None
                return await memory.fetch_text_resources(session, "tools-only")

    assert anyio.run(run) == []


_TOOLS_ONLY = """
import anyio, mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
async def tools(ctx, params):
    return types.ListToolsResult(tools=[])
server = Server("tools-only", on_list_tools=tools)
async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())
anyio.run(main)
"""
