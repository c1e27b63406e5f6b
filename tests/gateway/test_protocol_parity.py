"""Parity on the wire: the same raw JSON-RPC to the protocol fixture directly and through `coffer serve`.

Registered with `prefix = ""`, the fixture keeps its own names through Coffer, so each assertion is
written once: request `_meta` reaches the upstream, a URL-elicitation-required error (-32042) reaches
the host as that error with its `data`, and `notifications/elicitation/complete` reaches the host.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coffer.manage import servers
from coffer.vault import registry
from tests.fixtures.gateway_harness import wait_for
from tests.fixtures.raw_peer import RawPeer, protocol_peer, raw_peer, register_protocol_server, serve_argv

pytestmark = pytest.mark.anyio
VIAS = pytest.mark.parametrize("via", ["direct", "coffer"])
TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "com.example/trace": "abc"}
URL_HOST = {"elicitation": {"url": {}, "form": {}}}


def peer(via: str, home: Path, capabilities: dict[str, Any] | None = None) -> Any:
    return protocol_peer(via, home, capabilities=capabilities)


def text_of(response: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in response["result"]["content"])


@VIAS
async def test_request_meta_reaches_the_upstream(via: str, coffer_home: Path) -> None:
    async with peer(via, coffer_home) as p:
        seen = json.loads(text_of(await p.call("whoami", _meta={**TRACE, "progressToken": "p1"})))
        assert seen["meta"] == TRACE  # trace context and vendor keys as sent (the progress token is per hop)
        assert json.loads(text_of(await p.call("whoami")))["meta"] == {}


@VIAS
async def test_url_elicitation_required_reaches_the_host_as_that_error(via: str, coffer_home: Path) -> None:
    async with peer(via, coffer_home, URL_HOST) as p:
        response = await p.call("sign_in")
        assert "result" not in response
        error = response["error"]
        assert error["code"] == -32042 and "sign in" in error["message"]
        (item,) = error["data"]["elicitations"]
        assert item == {
            "mode": "url",
            "elicitationId": "proto-sign-in-1",
            "url": "https://auth.example.com/authorize?state=fixture",
            "message": "Sign in to go on.",
        }


@VIAS
async def test_elicitation_complete_reaches_the_host(via: str, coffer_home: Path) -> None:
    async with peer(via, coffer_home, URL_HOST) as p:
        await p.call("sign_in")
        assert text_of(await p.call("finish_sign_in")) == "sign-in complete"
        note = await p.wait_note(lambda n: n["method"] == "notifications/elicitation/complete")
        assert note["params"] == {"elicitationId": "proto-sign-in-1"}


async def test_the_invocation_log_records_the_elicitation_error_without_its_urls(coffer_home: Path) -> None:
    async with peer("coffer", coffer_home, URL_HOST) as p:
        await p.call("sign_in")
    from coffer.log import calls, query

    def rows_now() -> list[dict[str, Any]]:
        return [r for r in query.query(calls.open_log()) if r["tool"] == "sign_in"]

    await wait_for(lambda: rows_now() != [], what="the row (the engine writes it off the call path)")
    rows = rows_now()
    assert [(r["outcome"], r["error_class"]) for r in rows] == [("error", "url_elicitation_required")]
    assert "auth.example.com" not in json.dumps(rows)


async def all_pages(p: RawPeer, method: str, key: str) -> tuple[list[str], int]:
    names: list[str] = []
    params: dict[str, Any] = {}
    pages = 0
    while True:
        result = (await p.request(method, params))["result"]
        pages += 1
        names += [item.get("name") or item.get("uri") for item in result[key]]
        if "nextCursor" not in result:
            return names, pages
        params = {"cursor": result["nextCursor"]}


@VIAS
async def test_lists_page_and_refuse_a_cursor_they_did_not_give(via: str, coffer_home: Path) -> None:
    if via == "coffer":
        (coffer_home / "coffer.toml").parent.mkdir(parents=True, exist_ok=True)
        (coffer_home / "coffer.toml").write_text("[settings]\npage_size = 3\n")
    async with peer(via, coffer_home) as p:
        names, pages = await all_pages(p, "tools/list", "tools")
        upstream = ["whoami", "sign_in", "finish_sign_in", "research", "maybe_task", "show_ui"]
        assert sorted(n for n in names if not n.startswith(("coffer__", "filler_"))) == sorted(upstream)
        assert len(names) == len(set(names)) and pages == -(-len(names) // 3)
        for bogus in ("bogus", "page-999", "Y29mZmVyLXBhZ2U6OTk5"):
            response = await p.request("tools/list", {"cursor": bogus})
            assert response["error"]["code"] == -32602 and "cursor" in response["error"]["message"]


async def test_by_default_a_list_is_one_page_and_any_cursor_is_refused(coffer_home: Path) -> None:
    async with peer("coffer", coffer_home) as p:
        result = (await p.request("tools/list"))["result"]
        assert "nextCursor" not in result and len(result["tools"]) == 3 + 10  # the built-ins and the upstream's
        for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
            response = await p.request(method, {"cursor": "anything"})
            assert response["error"]["code"] == -32602, method


APPS = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}


@VIAS
async def test_the_hosts_extensions_reach_the_upstream(via: str, coffer_home: Path) -> None:
    async with peer(via, coffer_home, {"extensions": APPS}) as p:
        assert json.loads(text_of(await p.call("whoami")))["extensions"] == APPS


async def test_no_extensions_are_made_up_for_a_host_without_them(coffer_home: Path) -> None:
    """Standalone (one host): the upstream is told exactly the host's extensions, none here. Through the
    engine it is told MCP Apps, since it serves every session (a host without UI ignores it)."""
    async with protocol_peer("direct", coffer_home, capabilities={}) as p:
        assert json.loads(text_of(await p.call("whoami")))["extensions"] is None
    await register_protocol_server(coffer_home)
    argv, env = serve_argv(coffer_home, "--standalone")
    async with raw_peer(argv, env, capabilities={}) as p:
        assert json.loads(text_of(await p.call("whoami")))["extensions"] is None


@VIAS
async def test_the_upstreams_experimental_capabilities_and_extensions_are_advertised(
    via: str, coffer_home: Path
) -> None:
    """Through Coffer from the second session on: capabilities are answered at initialize, before a
    never-seen upstream has started; once catalogued they are known at once."""
    if via == "coffer":
        async with peer(via, coffer_home) as p:
            await p.request("tools/list")
    async with peer(via, coffer_home) as p:
        caps = p.init["capabilities"]
        assert caps["experimental"]["coffer.test/protocol"] == {"version": 1}
        assert caps["extensions"] == {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}


NPM = Path(__file__).resolve().parents[2] / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = NPM / "server-everything" / "dist" / "index.js"


@pytest.mark.skipif(not EVERYTHING.exists(), reason="run .ci/run for server-everything")
@VIAS
async def test_server_everything_url_elicitation_error(via: str, coffer_home: Path) -> None:
    """The real server's -32042 (errorPath), by parity: the same error code, message and URL in `data`."""
    argv = ["node", str(EVERYTHING), "stdio"]
    name = "trigger-url-elicitation"
    if via == "coffer":
        cfg = registry.ServerConfig(name="everything", command=argv[0], args=argv[1:], timeout=30, prefix="")
        servers.add_server(cfg)
        argv, env = serve_argv(coffer_home)
    else:
        env = None
    async with raw_peer(argv, env, capabilities=URL_HOST) as p:
        tools = [t["name"] for t in (await p.request("tools/list"))["result"]["tools"]]
        assert name in tools  # listed only for a client that declared URL elicitation
        args = {"url": "https://example.com/consent", "errorPath": True}
        error = (await p.call(name, args))["error"]
        assert error["code"] == -32042 and "requires browser-based authorization" in error["message"]
        (item,) = error["data"]["elicitations"]
        assert item["mode"] == "url" and item["url"] == "https://modelcontextprotocol.io" and item["elicitationId"]
