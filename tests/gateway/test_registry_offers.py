"""`coffer__search_tools` names registry servers for what no tool in the vault knows ("figma" in a vault
without Figma), from the registry cache only: no request reaches the registry on the call path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from coffer.discovery import cache
from coffer.discovery.entries import parse_item
from tests.fixtures.gateway_harness import add_fixture, serve, wait_for
from tests.fixtures.registry_server import WORLD, RecordedRegistry

RECORDED = "https://registry.modelcontextprotocol.io"  # the recording's registry (never reached: the cache only)

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


@pytest.mark.skipif(not WORLD.exists(), reason=f"the recorded registry is not here: {WORLD}")
async def test_search_abstains_when_the_query_asks_for_a_service_the_registry_knows(coffer_home: Path) -> None:
    """With the official registry (as recorded) cached, an ask for a service no tool here serves gets no
    tools, what ranked closest, and the registry's servers for it; an argument word that names no server
    ("Paris") does not stop the vault's own tool from answering."""
    add_fixture(coffer_home, "alpha")
    text = (coffer_home / "coffer.toml").read_text()
    (coffer_home / "coffer.toml").write_text(f'[registries]\nofficial = "{RECORDED}"\n\n{text}')
    entries = [parse_item(json.loads(line), RECORDED) for line in WORLD.open(encoding="utf-8")]
    cache.store(entries, RECORDED)
    async with serve(coffer_home) as s:
        with anyio.fail_after(60):  # the upstream's tools are listed once it is up
            while not (await search(s, "echo some text"))["tools"]:
                await anyio.sleep(0.1)
        slack = await search(s, "send a message on Slack to the #general channel")
        assert slack["tools"] == [] and slack.get("closest"), slack
        assert slack["registry"] and all("slack" in o["name"].lower() + o["about"].lower() for o in slack["registry"])
        assert "Nothing in this vault serves 'Slack'" in slack["note"]
        jira = await search(s, "create a Jira ticket for the login bug")
        assert jira["tools"] == [] and any("jira" in o["name"].lower() for o in jira["registry"])
        paris = await search(s, "echo the text Paris back")
        assert paris["tools"][0]["name"] == "alpha__echo" and "closest" not in paris and "registry" not in paris
        weather = await search(s, "what's the weather in Paris")  # servers for the word that names them
        assert weather["tools"] and "closest" not in weather and "'weather'" in weather["note"]
        assert all("weather" in (o["name"] + o["about"]).lower() for o in weather["registry"]), weather["registry"]
        plain = await search(s, "add two numbers")
        assert plain["tools"][0]["name"] == "alpha__add"


async def test_a_running_gateway_keeps_the_registry_cache_fresh_off_the_call_path(
    coffer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache abstention and suggestions read is filled in the background (incrementally: what
    changed since), and `registry_refresh = false` keeps a gateway off the registry."""
    from coffer.discovery.upkeep import FIRST_LOOK_S as REGISTRY_FIRST_LOOK_S

    monkeypatch.delenv("COFFER_REGISTRY_REFRESH")
    add_fixture(coffer_home, "alpha")
    text = (coffer_home / "coffer.toml").read_text()
    with RecordedRegistry() as reg:
        (coffer_home / "coffer.toml").write_text(f'[registries]\nofficial = "{reg.url}"\n\n{text}')
        async with serve(coffer_home, args=("--standalone",)) as s:
            await wait_for(
                lambda: cache.states([reg.url])[0].entries > 0,
                timeout=REGISTRY_FIRST_LOOK_S + 60,
                what="the background refresh to fill the cache",
            )
            assert cache.states([reg.url])[0].entries == len(reg.versions)
            from coffer.discovery.rank import index_key
            from coffer.ranking import Ranker
            from coffer.vault import paths

            await wait_for(  # and indexed: the next `coffer find` reads the index back, builds nothing
                lambda: Ranker.saved(paths.cache_dir(), index_key([reg.url]), english_docs=True) is not None,
                timeout=60,
                what="the background refresh to index the cache",
            )
            lacking = await search(s, "read a Figma design")
            assert lacking["registry"][0]["name"] == "io.github.GLips/Figma-Context-MCP"
        assert all("updated_since" not in r for r in reg.requests)  # the first read: everything
        reg.requests.clear()
        (coffer_home / "coffer.toml").write_text(
            f'[settings]\nregistry_refresh = false\n\n[registries]\nofficial = "{reg.url}"\n\n{text}'
        )
        import sqlite3

        with sqlite3.connect(cache.cache_path()) as conn:  # a day old: due again, but turned off
            conn.execute("UPDATE synced SET at = at - 2 * 86400")
        async with serve(coffer_home, args=("--standalone",)) as s:
            await search(s, "read a Figma design")
            await anyio.sleep(REGISTRY_FIRST_LOOK_S + 1.0)
        assert reg.requests == []
