"""2026-07-28 hosts take no requests from servers: what an older upstream asks in the middle of a call
reaches them as that revision's multi-round-trip result (InputRequiredResult), and the SDK's own client
answers it and retries. Before this bridge the upstream was refused ("servers cannot ask it")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import StdioServerParameters, stdio_client
from mcp.client.client import Client

from tests.fixtures.gateway_harness import add_fixture, serve_env, wait_for

pytestmark = pytest.mark.anyio


def params(home: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "coffer", "serve"], env=serve_env(home))


async def elicit(ctx: Any, request: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def sample(ctx: Any, request: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", model="m", content=types.TextContent(type="text", text="hello"))


async def roots(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])


def modern(home: Path, errlog: Any, **callbacks: Any) -> Client:
    """The SDK's own client at 2026-07-28 through `coffer serve`, answering elicitation and sampling."""
    return Client(
        stdio_client(params(home), errlog=errlog),
        mode="auto",
        cache=None,
        elicitation_callback=elicit,
        sampling_callback=sample,
        **callbacks,
    )


async def test_a_modern_host_is_asked_through_input_required_results(coffer_home: Path, tmp_path: Path) -> None:
    add_fixture(coffer_home, "alpha", "relay")
    with open(tmp_path / "stderr", "w") as errlog:
        async with modern(coffer_home, errlog, list_roots_callback=roots) as client:
            assert client.protocol_version == "2026-07-28"
            answered = await client.call_tool("alpha__ask_user")
            assert not answered.is_error and answered.content[0].text == "accept: Ada"  # type: ignore[union-attr]
            sampled = await client.call_tool("alpha__ask_model", {"prompt": "hi"})
            assert sampled.content[0].text == "model said: hello"  # type: ignore[union-attr]
            listed = await client.call_tool("alpha__roots")
            assert listed.content[0].text == "file:///work/project"  # type: ignore[union-attr]
    from coffer.log import calls, query

    def rows_now() -> list[dict[str, Any]]:
        return [r for r in query.query(calls.open_log()) if r["tool"] in ("ask_user", "ask_model", "roots")]

    await wait_for(lambda: len(rows_now()) >= 3, what="the rows (the engine writes them off the call path)")
    rows = rows_now()
    assert sorted((r["tool"], r["outcome"]) for r in rows) == [("ask_model", "ok"), ("ask_user", "ok"), ("roots", "ok")]


async def test_a_request_state_from_elsewhere_is_refused(coffer_home: Path, tmp_path: Path) -> None:
    add_fixture(coffer_home, "alpha", "relay")
    with open(tmp_path / "stderr", "w") as errlog:
        async with Client(stdio_client(params(coffer_home), errlog=errlog), mode="auto", cache=None) as client:
            with pytest.raises(Exception, match="unknown or expired requestState"):
                await client.session.call_tool("alpha__echo", {"text": "x"}, request_state="forged", input_responses={})


async def test_a_modern_host_hears_list_changes_on_its_listen_stream(coffer_home: Path, tmp_path: Path) -> None:
    """2026-07-28 has no standing notifications: a host opens `subscriptions/listen` and the gateway puts
    its merged lists' changes there (an upstream that grew a tool)."""
    import anyio
    from mcp.shared.subscriptions import ToolsListChanged

    add_fixture(coffer_home, "alpha")
    with open(tmp_path / "stderr", "w") as errlog:
        async with Client(stdio_client(params(coffer_home), errlog=errlog), mode="auto", cache=None) as client:
            await client.list_tools()
            async with client.listen(tools_list_changed=True) as sub:
                assert sub.honored.tools_list_changed
                added = (await client.call_tool("alpha__grow")).content[0].text  # type: ignore[union-attr]
                with anyio.fail_after(10):
                    event = await sub.__anext__()
                assert isinstance(event, ToolsListChanged)
            # the event may be the first live listing's own announcement (a loaded machine lists late):
            # the grown tool is then listed once its relist lands, waited for (bounded)
            with anyio.fail_after(10):
                while f"alpha__{added}" not in [t.name for t in (await client.list_tools()).tools]:
                    await anyio.sleep(0.1)


EVERYTHING = Path(__file__).resolve().parents[2] / ".ci/node/node_modules/@modelcontextprotocol/server-everything"


@pytest.mark.skipif(not (EVERYTHING / "dist/index.js").exists(), reason="run .ci/run for server-everything")
async def test_every_session_of_an_engine_is_asked_by_a_real_server(coffer_home: Path, tmp_path: Path) -> None:
    """server-everything asks for roots right after its handshake, so the engine runs it once per session
    from its second session on; a 2026-07-28 host's requests each come on a connection of their own, and
    its asks must still find the call they belong to (it was: ok, refused, refused)."""
    import anyio

    from coffer.manage import servers
    from coffer.vault import registry

    args = [str(EVERYTHING / "dist/index.js"), "stdio"]
    cfg = registry.ServerConfig(name="ev", command="node", args=args, timeout=30)
    assert (await anyio.to_thread.run_sync(lambda: servers.add(cfg))).failure is None
    for i in range(3):
        with open(tmp_path / f"stderr{i}", "w") as errlog:
            async with modern(coffer_home, errlog) as client:
                assert client.protocol_version == "2026-07-28"
                asked = await client.call_tool("ev__trigger-elicitation-request")
                assert not asked.is_error, (i, asked.content)
                assert "Ada" in str(asked.content), (i, asked.content)
                sampled = await client.call_tool("ev__trigger-sampling-request", {"prompt": "hi"})
                assert not sampled.is_error and "hello" in sampled.content[0].text, (i, sampled.content)  # type: ignore[union-attr]
