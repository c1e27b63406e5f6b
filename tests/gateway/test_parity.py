"""Parity: the same assertions against the fixture server directly and through `coffer serve`.

The fixture is registered with `prefix = ""`, so through Coffer it is served under its own names and
every assertion below is written once: list, call, prompts/get, resources/read, subscribe and
unsubscribe (with resources/updated), logging/setLevel (with the level applied), completion and ping.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from typer.testing import CliRunner

from tests.conftest import run_cli
from tests.fixtures.gateway_harness import FIXTURE, serve, text, wait_for

# subscribe and setLevel are deprecated at 2026-07-28, and still what every 2025 host sends
pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]
README = "fixture://ref/readme"
ARGV = [str(FIXTURE), "--mode", "pubsub", "--name", "ref"]


@dataclass
class Peer:
    session: ClientSession
    notes: list[Any] = field(default_factory=list)

    def logs(self) -> list[str]:
        return [
            f"{n.params.level}:{n.params.data}"
            for n in self.notes
            if isinstance(n, types.LoggingMessageNotification) and "line" in str(n.params.data)
        ]

    def updates(self) -> list[str]:
        return [str(n.params.uri) for n in self.notes if isinstance(n, types.ResourceUpdatedNotification)]


@asynccontextmanager
async def peer(via: str, tmp_path: Path) -> AsyncIterator[Peer]:
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    if via == "direct":
        params = StdioServerParameters(command=sys.executable, args=ARGV)
        async with stdio_client(params) as (read, write), ClientSession(read, write, message_handler=on_message) as s:
            await s.initialize()
            yield Peer(s, notes)
        return
    home = Path(os.environ["COFFER_HOME"])  # conftest's own vault for this test
    add = ("add", "ref", "--prefix", "", "--timeout", "20", "--", sys.executable, *ARGV)
    await anyio.to_thread.run_sync(lambda: run_cli(CliRunner(), *add))  # probes it, as a user's `coffer add`
    async with serve(home) as served:
        yield Peer(served.session, served.notifications)


VIAS = pytest.mark.parametrize("via", ["direct", "coffer"])


@VIAS
async def test_capabilities(via: str, tmp_path: Path) -> None:
    async with peer(via, tmp_path) as p:
        caps = p.session.server_capabilities
        assert caps is not None and caps.logging is not None
        assert caps.resources is not None and caps.resources.subscribe
        assert caps.prompts is not None and caps.tools is not None and caps.completions is not None


@VIAS
async def test_list_call_and_ping(via: str, tmp_path: Path) -> None:
    async with peer(via, tmp_path) as p:
        tools = {t.name: t for t in (await p.session.list_tools()).tools}
        assert {"echo", "add", "chatter", "touch"} <= set(tools)
        assert tools["echo"].input_schema["required"] == ["text"]
        result = await p.session.call_tool("echo", {"text": "hi"})
        assert not result.is_error and text(result) == "hi"
        failed = await p.session.call_tool("fail", {})
        assert failed.is_error and "bad input" in text(failed)
        assert isinstance(await p.session.send_ping(), types.EmptyResult)


@VIAS
async def test_prompts_get(via: str, tmp_path: Path) -> None:
    async with peer(via, tmp_path) as p:
        prompts = [pr.name for pr in (await p.session.list_prompts()).prompts]
        assert "greet" in prompts
        got = await p.session.get_prompt("greet", {"name": "Ada"})
        content = got.messages[0].content
        assert isinstance(content, types.TextContent) and content.text == "Hello, Ada!"


@VIAS
async def test_resources_read(via: str, tmp_path: Path) -> None:
    async with peer(via, tmp_path) as p:
        uris = [str(r.uri) for r in (await p.session.list_resources()).resources]
        assert README in uris
        templates = [t.uri_template for t in (await p.session.list_resource_templates()).resource_templates]
        assert "fixture://ref/item/{id}" in templates
        body = (await p.session.read_resource(README)).contents[0]
        assert isinstance(body, types.TextResourceContents) and "pineapple" in body.text
        item = (await p.session.read_resource("fixture://ref/item/7")).contents[0]
        assert isinstance(item, types.TextResourceContents) and item.text == "item 7"


@VIAS
async def test_complete(via: str, tmp_path: Path) -> None:
    async with peer(via, tmp_path) as p:
        ref = types.PromptReference(name="greet")
        done = await p.session.complete(ref, {"name": "name", "value": "A"})
        assert done.completion.values == ["Ada", "Alan"]
        tpl = types.ResourceTemplateReference(uri="fixture://ref/item/{id}")
        done = await p.session.complete(tpl, {"name": "id", "value": "x"})
        assert done.completion.values == ["x0", "x1", "x2"]


@VIAS
async def test_subscribe_and_unsubscribe(via: str, tmp_path: Path) -> None:
    async with peer(via, tmp_path) as p:
        await p.session.subscribe_resource(README)
        assert text(await p.session.call_tool("touch", {})) == "touched: notified"
        await wait_for(lambda: README in p.updates(), 30, "resources/updated")
        await p.session.unsubscribe_resource(README)
        assert text(await p.session.call_tool("touch", {})) == "touched: nobody subscribed"
        assert p.updates() == [README]


@VIAS
async def test_set_level(via: str, tmp_path: Path) -> None:
    async with peer(via, tmp_path) as p:
        await p.session.set_logging_level("warning")
        assert text(await p.session.call_tool("chatter", {})) == "chattered at warning"  # the level reached it
        await wait_for(lambda: "warning:warning line" in p.logs(), 30, "the warning line")
        await p.session.set_logging_level("debug")
        assert text(await p.session.call_tool("chatter", {})) == "chattered at debug"
        await wait_for(lambda: "debug:debug line" in p.logs(), 30, "the debug line")
        assert p.logs() == ["warning:warning line", "debug:debug line", "info:info line", "warning:warning line"]


async def test_coffer_keeps_debug_off_the_host_until_it_sets_a_level(tmp_path: Path) -> None:
    """The upstream sends every level (nobody set one); Coffer forwards info and above by default."""
    async with peer("coffer", tmp_path) as p:
        assert text(await p.session.call_tool("chatter", {})) == "chattered at no level"
        await wait_for(lambda: "warning:warning line" in p.logs(), 30, "the warning line")
        await anyio.sleep(0)  # nothing is awaited here: the order of delivery is the upstream's order
        assert p.logs() == ["info:info line", "warning:warning line"]
