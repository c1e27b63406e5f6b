"""What `coffer__search_tools` tells an agent beyond its hits: its description names what the vault
holds (within a token budget, rebuilt when the vault changes, for profiles too), and a result counts
the matches the user has withheld (disabled, awaiting approval) with the command that shows them,
never naming the tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from coffer.gateway.builtins import HOLDINGS_TOKENS, holdings
from coffer.results.tokens import count
from coffer.vault.catalogue import build_tools
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import add_fixture, serve

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def real_tools() -> list[Any]:
    by_server: dict[str, list[dict[str, Any]]] = {}
    for tool in json.loads((ROOT / "tests" / "data" / "real-servers.json").read_text()):
        by_server.setdefault(tool.pop("server"), []).append(tool)
    return [t for server, tools in by_server.items() for t in build_tools(server, tools, None)]


def test_the_holdings_fit_their_budget_and_say_what_servers_act_on() -> None:
    tools = real_tools()
    said = holdings(tools)
    assert said.startswith("This vault holds 16 servers, 222 tools: ") and count(said) <= HOLDINGS_TOKENS
    assert "github (26: issue, repository, branch)" in said and "memory (9: observation, entity, relation)" in said
    tight = holdings(tools, budget=60)
    assert count(tight) <= 60 and tight.endswith("more servers.") and "firecrawl (29" in tight
    assert holdings([]) == "This vault holds no server's tools yet."


async def search_description(s: Any) -> str:
    listed = (await s.session.list_tools()).tools
    return next(t.description or "" for t in listed if t.name == "coffer__search_tools")


async def test_the_description_follows_the_vault(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    add_fixture(coffer_home, "beta")
    async with serve(coffer_home) as s:
        with anyio.fail_after(30):
            while "2 servers" not in (said := await search_description(s)):
                await anyio.sleep(0.1)
        assert "alpha (10" in said and "beta (10" in said
        await anyio.to_thread.run_sync(lambda: run_cli(CliRunner(), "disable", "beta"))
        with anyio.fail_after(30):  # the vault watcher sees the edit; the next listing says so
            while "1 server," not in (said := await search_description(s)):
                await anyio.sleep(0.1)
        assert "beta" not in said


async def test_withheld_matches_are_counted_never_named(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha", disabled_tools=["echo"])
    async with serve(coffer_home) as s:
        assert "alpha__add" in await s.tool_names()  # the first list waits for alpha's
        found = await s.call("coffer__search_tools", {"query": "echo the text back", "top_k": 3})
        payload = found.structured_content or {}
        assert "alpha__echo" not in [t["name"] for t in payload["tools"]]
        withheld = {"server": "alpha", "count": 1, "why": "disabled", "fix": "coffer enable alpha__echo"}
        assert payload["hidden"] == [withheld]
        assert "1 matching tool of 'alpha' is disabled: `coffer enable alpha__echo`" in payload["note"]
        plain = await s.call("coffer__search_tools", {"query": "add two numbers", "top_k": 1})
        assert "hidden" not in (plain.structured_content or {})


async def test_a_down_servers_tools_are_marked_and_ranked_after_the_reachable(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    add_fixture(coffer_home, "beta")
    async with serve(coffer_home) as s:
        with anyio.fail_after(30):
            while not {"alpha__echo", "beta__echo"} <= set(await s.tool_names()):
                await anyio.sleep(0.1)
        payload: dict[str, Any] = {}
        for _ in range(4):  # the first restart is at once; after the second crash it waits (backoff)
            assert (await s.call("alpha__crash", {})).is_error
            found = await s.call("coffer__search_tools", {"query": "echo the text back", "top_k": 4})
            payload = found.structured_content or {}
            if any(t.get("unavailable") for t in payload["tools"]):
                break
        names = [t["name"] for t in payload["tools"]]
        marked = {t["name"]: t.get("unavailable") for t in payload["tools"]}
        assert "beta__echo" in names and "alpha__echo" in names
        assert marked["beta__echo"] is None and names.index("beta__echo") < names.index("alpha__echo")
        assert "server 'alpha' is down" in (marked["alpha__echo"] or ""), marked
        assert "crashing on purpose" in (marked["alpha__echo"] or "") and "unavailable" in payload["note"]
