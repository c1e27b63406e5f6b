"""A team member's profile is a wall (coffer.gateway.advertise): through the real OpenID provider and the
MCP SDK's OAuth client, `agent-bob` (bounded by the profile `ops`: the server beta) tries every way to
reach alpha, whose tools, prompts and resources `agent-alice` (the whole vault) reaches; neither reads
the other's kept results or speaks in the other's session; an owner's edit of the profile holds at once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError

from coffer.vault import registry
from tests.fixtures.gateway_harness import add_fixture, text
from tests.gateway.test_team_gateway import Gateway, member, pytestmark, served

__all__ = ["pytestmark"]

TEAM = """[team.members]
"sub:agent-bob" = "ops"
"group:eng" = "*"

[profiles.ops]
servers = ["beta"]
code_mode = true

[settings]
code_mode = true
result_max_tokens = 2000
"""


SCRIPT = """
out = []
for name in ["alpha__echo", "beta__echo"]:
    try:
        out.append(call_tool(name, {"text": "s"}))
    except Exception as e:
        out.append(str(e))
out
"""


def setup(home: Path) -> None:
    add_fixture(home, "beta")
    with registry.edit(home / "coffer.toml") as doc:
        for name in ("alpha", "beta"):
            doc["servers"][name]["code_mode"] = "all"  # scripts may call any of their tools


@pytest.fixture
def walled(coffer_home: Path) -> Iterator[Gateway]:
    with served(coffer_home, members=TEAM, setup=setup) as gateway:
        yield gateway


def link(result: Any) -> str:
    """The `coffer://results/<id>` link of a result kept for being over the cap."""
    return next(str(c.uri) for c in result.content if getattr(c, "type", "") == "resource_link")


def payload(result: Any) -> dict[str, Any]:
    return dict(json.loads(text(result)))


async def test_a_members_profile_is_a_wall_it_cannot_find_a_way_through(walled: Gateway) -> None:
    g = walled
    async with member(g, "agent-alice") as alice:
        names = [t.name for t in (await alice.list_tools()).tools]
        assert {"alpha__echo", "beta__echo"} <= set(names)
        assert text(await alice.call_tool("alpha__echo", {"text": "hi"})) == "hi"
        big = await alice.call_tool("alpha__big", {"kb": 60, "word": "needle"})
        kept = link(big)
        assert kept.startswith("coffer://results/")
        assert "needle" in (await alice.read_resource(kept)).contents[0].text  # type: ignore[union-attr]

    async with member(g, "agent-bob") as bob:
        listed = [t.name for t in (await bob.list_tools()).tools]
        assert "beta__echo" in listed and not [n for n in listed if n.startswith("alpha__")]
        assert text(await bob.call_tool("beta__echo", {"text": "mine"})) == "mine"
        direct = await bob.call_tool("alpha__echo", {"text": "x"})
        assert direct.is_error and "unknown tool 'alpha__echo'" in text(direct)  # as if it were not there
        relayed = await bob.call_tool("coffer__call_tool", {"name": "alpha__echo", "arguments": {"text": "x"}})
        assert relayed.is_error and "unknown tool 'alpha__echo'" in text(relayed)
        found = payload(await bob.call_tool("coffer__search_tools", {"query": "echo the text back", "top_k": 10}))
        assert found["tools"] and all(t["name"].startswith(("beta__", "coffer__")) for t in found["tools"])
        assert "alpha" not in json.dumps(found)
        script = SCRIPT
        from_script, allowed = payload(await bob.call_tool("coffer__run", {"code": script}))["result"]
        assert "unknown tool 'alpha__echo'" in from_script and allowed == "s"
        searched = payload(await bob.call_tool("coffer__run", {"code": 'search_tools("echo", 10)'}))["result"]
        assert searched and all(t["name"].startswith("beta__") for t in searched)

        assert [p.name for p in (await bob.list_prompts()).prompts] == ["beta__greet"]
        with pytest.raises(MCPError, match="unknown prompt"):
            await bob.get_prompt("alpha__greet", {"name": "x"})
        assert [str(r.uri) for r in (await bob.list_resources()).resources] == ["fixture://beta/readme"]
        templates = (await bob.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["fixture://beta/item/{id}"]
        with pytest.raises(MCPError, match="no enabled server serves"):
            await bob.read_resource("fixture://alpha/readme")
        assert "pineapple" in (await bob.read_resource("fixture://beta/readme")).contents[0].text  # type: ignore[union-attr]

        # alice's kept result: its URI and id lead nowhere for bob
        with pytest.raises(MCPError):
            await bob.read_resource(kept)
        read = await bob.call_tool("coffer__read_result", {"id": kept.removeprefix("coffer://results/")})
        assert read.is_error and "no kept result" in text(read)
        own = await bob.call_tool("beta__echo", {"text": "needle " * 3000})  # bob's own, kept for bob
        mine = link(own)
        assert mine != kept and "needle" in (await bob.read_resource(mine)).contents[0].text  # type: ignore[union-attr]
    async with member(g, "agent-alice") as alice:
        with pytest.raises(MCPError):
            await alice.read_resource(mine)


def hello(url: str, token: str, session: str | None = None, method: str = "initialize") -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
    params: dict[str, Any] = {}
    if method == "initialize":
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}
    return httpx2.post(url, json=body, headers=headers, timeout=10)


async def test_a_session_is_its_members_alone(walled: Gateway) -> None:
    """Bob holding alice's session id gets the 404 of a session that is not there; alice goes on."""
    g = walled
    alice, bob = g.idp.token("agent-alice", g.url), g.idp.token("agent-bob", g.url)
    opened = hello(g.url, alice)
    session = opened.headers["mcp-session-id"]
    assert opened.status_code == 200 and session
    stolen = hello(g.url, bob, session, "tools/list")
    assert stolen.status_code == 404 and "Session not found" in stolen.text
    assert hello(g.url, alice, session, "tools/list").status_code == 200


async def test_an_owners_edit_of_the_profile_holds_at_once(walled: Gateway) -> None:
    g = walled
    async with member(g, "agent-bob") as bob:
        assert (await bob.call_tool("alpha__echo", {"text": "x"})).is_error
        with registry.edit(g.home / "coffer.toml") as doc:
            doc["profiles"]["ops"]["servers"] = ["alpha"]
        for _ in range(200):  # the gateway reads the vault again once the file settles (a fraction of a second)
            if not (await bob.call_tool("alpha__echo", {"text": "x"})).is_error:
                break
            await anyio.sleep(0.05)
        assert text(await bob.call_tool("alpha__echo", {"text": "now"})) == "now"
        assert (await bob.call_tool("beta__echo", {"text": "x"})).is_error  # and beta is now outside


async def test_a_removed_profile_refuses_everything_with_a_json_rpc_error_a_person_reads(walled: Gateway) -> None:
    """The owner removes the profile that walls bob in while he uses it: every request of his is refused
    (fail closed) as a JSON-RPC error with a real code and a line that says why, and nothing in the log
    is a traceback; alice, who reaches the whole vault, goes on."""
    g = walled
    async with member(g, "agent-bob") as bob:
        assert text(await bob.call_tool("beta__echo", {"text": "x"})) == "x"
        with registry.edit(g.home / "coffer.toml") as doc:
            del doc["profiles"]["ops"]

        async def refused() -> bool:
            try:
                await bob.list_tools()
            except MCPError:
                return True
            return False

        for _ in range(200):  # the gateway reads the vault again once the file settles
            if await refused():
                break
            await anyio.sleep(0.05)
        attempts = {
            "tools/list": bob.list_tools(),
            "tools/call": bob.call_tool("beta__echo", {"text": "x"}),
            "coffer__call_tool": bob.call_tool("coffer__call_tool", {"name": "beta__echo", "arguments": {}}),
            "prompts/list": bob.list_prompts(),
            "resources/read": bob.read_resource("fixture://beta/readme"),
        }
        for what, attempt in attempts.items():
            with pytest.raises(MCPError) as caught:
                await attempt
            assert caught.value.code == -32603, (what, caught.value.code, caught.value.message)
            assert "profile 'ops'" in caught.value.message and "removed" in caught.value.message, what
    async with member(g, "agent-alice") as alice:
        assert text(await alice.call_tool("alpha__echo", {"text": "on"})) == "on"
    logged = g.log.read_text()
    assert "Traceback" not in logged, logged[-3000:]
