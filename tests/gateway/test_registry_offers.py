"""`coffer__search_tools` names registry servers for what no tool in the vault knows ("figma" in a vault
without Figma), from the registry cache only: no request reaches the registry on the call path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coffer.discovery import cache
from tests.fixtures.gateway_harness import add_fixture, serve
from tests.fixtures.registry_server import RecordedRegistry

pytestmark = pytest.mark.anyio


async def search(s: Any, query: str) -> dict[str, Any]:
    found = await s.call("coffer__search_tools", {"query": query, "top_k": 3})
    assert not found.is_error and found.structured_content is not None
    return dict(found.structured_content)


async def test_search_names_registry_servers_for_what_the_vault_lacks(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    with RecordedRegistry() as reg:
        text = (coffer_home / "coffer.toml").read_text()
        (coffer_home / "coffer.toml").write_text(f'[registries]\nofficial = "{reg.url}"\n\n{text}')
        async with serve(coffer_home) as s:
            lacking = await search(s, "read a Figma design")
            assert "registry" not in lacking  # nothing cached yet: nothing offered, and nothing fetched
            assert reg.requests == []
            cache.refresh(reg.url)
            reg.requests.clear()
            lacking = await search(s, "read a Figma design")
            assert lacking["registry"][0]["name"] == "io.github.GLips/Figma-Context-MCP"
            assert lacking["registry"][0]["install"] == "coffer add io.github.GLips/Figma-Context-MCP"
            assert "No tool in this vault knows 'Figma'" in lacking["note"]
            postgres = await search(s, "query a postgres database")
            assert {o["name"] for o in postgres["registry"]} >= {"io.github.neverinfamous/postgres-mcp", "com.neon/mcp"}
            known = await search(s, "echo some text")  # every word is the vault's: no offer
            assert "registry" not in known and known["tools"][0]["name"] == "alpha__echo"
            assert reg.requests == []  # the cache only: never the network on the call path
