"""Knowledge from a real upstream: the resource fixture server over stdio, read by
`coffer.upstreams.resources.text_resources` (the one reader, used by the gateway and by `coffer refresh`)."""

from __future__ import annotations

from pathlib import Path

import anyio

from coffer.gateway.pool import Pool
from coffer.memory import knowledge as memory
from coffer.upstreams import resources
from coffer.upstreams.upstream import State
from coffer.vault.registry import ServerConfig
from tests.conftest import FIXTURES, PYTHON

RESOURCE_SERVER = FIXTURES / "resource_server.py"


async def _read(cfg: ServerConfig) -> list[tuple[str, str, str]]:
    """Start the server as the gateway does, list it, read its text resources, stop it."""
    async with Pool(limit=1) as pool:
        pool.sync([cfg])
        up = pool.upstreams[cfg.name]
        await up.wait_settled(30)
        assert up.state is State.READY, up.last_error
        return await resources.text_resources(up)


def test_fixture_resources_are_indexed_and_answered(coffer_home: Path) -> None:
    items = anyio.run(_read, ServerConfig(name="res", command=PYTHON, args=[str(RESOURCE_SERVER)]))
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


def test_server_without_resources_gives_nothing() -> None:
    """A server that declares no resources capability is not asked to list any, so nothing is read."""
    cfg = ServerConfig(name="tools-only", command=PYTHON, args=["-c", _TOOLS_ONLY])
    assert anyio.run(_read, cfg) == []


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
