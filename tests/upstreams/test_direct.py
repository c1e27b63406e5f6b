"""The direct lane (coffer.upstreams.direct) on a real fixture upstream: the answers and errors the SDK's
client path gives, matched by id among the SDK's own traffic on the same pipe."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError

from coffer.gateway.pool import Pool
from coffer.upstreams import sdk
from coffer.upstreams.direct import Lane
from coffer.upstreams.transport import StreamStats, child_env, stdio_pipe
from coffer.vault.registry import ServerConfig
from tests.fixtures.gateway_harness import FIXTURE

pytestmark = pytest.mark.anyio


BURST = [sys.executable, str(Path(__file__).parents[1] / "fixtures" / "burst_server.py")]


@asynccontextmanager
async def piped(argv: list[str] | None = None, **session: Any) -> AsyncIterator[tuple[ClientSession, Lane]]:
    lane = Lane()
    argv = argv or [sys.executable, str(FIXTURE), "--mode", "normal", "--name", "lane"]
    async with AsyncExitStack() as stack:
        pipe = stdio_pipe(argv, child_env({}), None, StreamStats(), lambda: None, lane=lane)
        read, write = await stack.enter_async_context(pipe)
        session = await stack.enter_async_context(ClientSession(read, write, **session))
        await session.initialize()
        yield session, lane


def echo(text: str) -> dict[str, Any]:
    return {"name": "echo", "arguments": {"text": text}}


async def sdk_request(session: ClientSession, method: str, params: dict[str, Any], rid: str) -> Any:
    return await sdk.send_raw(session, method, params, {"request_id": rid, "cancel_on_abandon": False})


async def test_answers_match_the_sdk_path_and_reach_their_own_caller_among_concurrent_sdk_requests() -> None:
    async with piped() as (session, lane):
        assert await lane.request("tools/call", echo("one"), "lane-0", 5) == await sdk_request(
            session, "tools/call", echo("one"), "sdk-0"
        )
        got: dict[str, str] = {}

        async def one(n: int, direct: bool) -> None:
            text = f"{'lane' if direct else 'sdk'} {n}"
            if direct:
                result = await lane.request("tools/call", echo(text), f"lane-{n + 1}", 5)
            else:
                result = await sdk_request(session, "tools/call", echo(text), f"sdk-{n + 1}")
            got[text] = result["content"][0]["text"]

        async with anyio.create_task_group() as tg:
            for n in range(40):
                tg.start_soon(one, n, n % 2 == 0)
        assert got == {text: text for text in got} and len(got) == 40
        tools = await lane.request("tools/list", None, "lane-list", 5)  # a request without params
        assert "echo" in {tool["name"] for tool in tools["tools"]}


async def test_what_the_upstream_sent_before_an_answer_is_dispatched_before_the_answer_returns() -> None:
    """Three log lines and the answer in one write: the session has dispatched all three lines by the
    time the answer reaches the caller, as on the SDK's path. (Taken off the pipe as it was read, an
    answer overtook the last line, and a host got the result before that log line.)"""
    logged: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(str(params.data))

    async with piped(BURST, logging_callback=on_log) as (_session, lane):
        for n in range(5):
            logged.clear()
            result = await lane.request("tools/call", {"name": "any", "arguments": {}}, f"lane-{n}", 5)
            assert result["content"][0]["text"] == "done"
            assert logged == ["line 1", "line 2", "line 3"]


async def test_errors_are_the_sdk_paths_errors() -> None:
    async with piped() as (session, lane):
        for method, params in (("tools/call", {"name": "boom", "arguments": {}}), ("no/such/method", {})):
            with pytest.raises(MCPError) as direct:
                await lane.request(method, params, f"lane-{method}", 5)
            with pytest.raises(MCPError) as via_sdk:
                await sdk_request(session, method, params, f"sdk-{method}")
            assert (direct.value.code, direct.value.message, direct.value.data) == (
                via_sdk.value.code,
                via_sdk.value.message,
                via_sdk.value.data,
            )
            assert direct.value.code in (types.INTERNAL_ERROR, types.METHOD_NOT_FOUND)


async def test_a_timeout_counts_from_the_write_and_the_late_answer_harms_nothing() -> None:
    async with piped() as (session, lane):
        began = time.monotonic()
        with pytest.raises(MCPError) as info:
            await lane.request("tools/call", {"name": "slow", "arguments": {"seconds": 0.8}}, "lane-slow", 0.2)
        assert info.value.code == types.REQUEST_TIMEOUT and info.value.message == "Request 'tools/call' timed out"
        assert 0.2 <= time.monotonic() - began < 0.7
        await anyio.sleep(1.0)  # the answer arrives for nobody: the SDK's reader drops it
        assert (await lane.request("tools/call", echo("after"), "lane-after", 5))["content"][0]["text"] == "after"
        assert (await session.send_ping()) is not None


async def test_a_process_that_dies_fails_the_waiting_request_and_every_later_one_as_closed() -> None:
    async with piped() as (_session, lane):
        with anyio.fail_after(10), pytest.raises(MCPError) as info:
            await lane.request("tools/call", {"name": "crash", "arguments": {}}, "lane-crash", 30)
        assert (info.value.code, info.value.message, info.value.data) == (
            types.CONNECTION_CLOSED,
            "Connection closed",
            None,
        )
        with pytest.raises(MCPError, match="Connection closed"):
            await lane.request("tools/call", echo("late"), "lane-late", 5)


async def test_upstreams_use_the_lane_but_not_for_progress_or_with_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = ServerConfig(name="alpha", command=sys.executable, args=[str(FIXTURE), "--name", "alpha"])
    slow = types.CallToolRequest(params=types.CallToolRequestParams(name="slow", arguments={"seconds": 0.2}))
    steps: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        steps.append(done)

    async with Pool() as pool:
        pool.sync([cfg])
        up = pool.upstreams["alpha"]
        assert (await up.request(slow))["content"][0]["text"] == "slow done"
        assert up.lane is not None
        assert (await up.request(slow, progress=progress))["content"][0]["text"] == "slow done"
        assert steps == [1, 2, 3, 4]  # progress is matched by the SDK, which the lane leaves it to
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    async with Pool() as pool:
        pool.sync([cfg])
        up = pool.upstreams["alpha"]
        assert (await up.request(slow))["content"][0]["text"] == "slow done"
        assert up.lane is None  # the SDK's client span and trace context for every request
