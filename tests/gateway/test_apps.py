"""MCP Apps through the gateway: two servers with the same `ui://` URI each open their own app.

On the protocol fixture (whose app's HTML names its server) and on the ext-apps example server from
npm (`@modelcontextprotocol/server-basic-vanillajs`, which .ci/run installs), registered twice.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from coffer.manage import servers
from coffer.vault import registry
from tests.fixtures.raw_peer import RawPeer, raw_peer, register_protocol_server, serve_argv

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
VANILLA = (
    ROOT / ".ci" / "node" / "node_modules" / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist" / "index.js"
)
APPS = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}


def ui_uri(tool: dict[str, Any]) -> str:
    return str(tool["_meta"]["ui"]["resourceUri"])


async def tools(p: RawPeer) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in (await p.request("tools/list"))["result"]["tools"]}


async def read(p: RawPeer, uri: str) -> dict[str, Any]:
    response = await p.request("resources/read", {"uri": uri})
    assert "result" in response, response
    (content,) = response["result"]["contents"]
    assert content["uri"] == uri  # the URI the host asked for, not the upstream's own
    return dict(content)


async def test_a_second_server_with_the_same_app_uri_gets_its_own(coffer_home: Path) -> None:
    await register_protocol_server(coffer_home, "alpha", prefix=None)
    await register_protocol_server(coffer_home, "beta", prefix=None)
    argv, env = serve_argv(coffer_home)
    async with raw_peer(argv, env, APPS) as p:
        listed = await tools(p)
        first, second = ui_uri(listed["alpha__show_ui"]), ui_uri(listed["beta__show_ui"])
        assert first == "ui://widget/app.html" and second == "ui://beta/widget/app.html"
        assert "<p>The app of alpha</p>" in (await read(p, first))["text"]
        assert "<p>The app of beta</p>" in (await read(p, second))["text"]
        resources = {r["uri"]: r for r in (await p.request("resources/list"))["result"]["resources"]}
        assert resources[first]["name"] == "alpha app" and resources[second]["name"] == "beta app"
        called = (await p.call("beta__show_ui"))["result"]
        assert called["_meta"]["ui"]["resourceUri"] == second  # the call result points at the same app
    async with raw_peer(argv, env, APPS) as p:  # stable: the next session is given the same URIs
        listed = await tools(p)
        assert ui_uri(listed["beta__show_ui"]) == second


async def test_one_server_keeps_its_app_uri(coffer_home: Path) -> None:
    await register_protocol_server(coffer_home, "alpha", prefix=None)
    argv, env = serve_argv(coffer_home)
    async with raw_peer(argv, env, APPS) as p:
        assert ui_uri((await tools(p))["alpha__show_ui"]) == "ui://widget/app.html"


@pytest.mark.skipif(not VANILLA.exists() or shutil.which("node") is None, reason="run .ci/run for the ext-apps server")
async def test_two_copies_of_the_ext_apps_example_server(coffer_home: Path) -> None:
    for name in ("clock-a", "clock-b"):
        cfg = registry.ServerConfig(name=name, command="node", args=[str(VANILLA), "--stdio"], timeout=30)
        servers.add_server(cfg)
    argv, env = serve_argv(coffer_home)
    async with raw_peer(argv, env, APPS) as p:
        listed = await tools(p)
        a, b = ui_uri(listed["clock-a__get-time"]), ui_uri(listed["clock-b__get-time"])
        assert a == "ui://get-time/mcp-app.html" and b == "ui://clock-b/get-time/mcp-app.html"
        assert listed["clock-b__get-time"]["_meta"]["ui/resourceUri"] == b  # the flat key too
        html_a, html_b = (await read(p, a))["text"], (await read(p, b))["text"]
        assert html_a == html_b and "<html" in html_a.lower()  # the same app, each read from its own server
        time_b = (await p.call("clock-b__get-time"))["result"]
        assert not time_b.get("isError"), json.dumps(time_b)[:300]
