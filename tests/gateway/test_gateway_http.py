"""Streamable HTTP on both sides: `coffer serve --http PORT`, and upstreams registered by `url`."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from coffer.engine import control
from coffer.errors import UpstreamError
from coffer.gateway.pool import probe
from coffer.loopback import tcp_listener
from coffer.manage import servers
from coffer.vault import registry
from tests.fixtures.gateway_harness import FIXTURE, add_fixture, alive, descendants, serve, serve_env, text, wait_for

pytestmark = pytest.mark.anyio
TOKEN = "http-fixture-token-1234"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bearer(home: Path) -> str:
    """The gateway's HTTP token, as a user gets it (`coffer serve --print-token`)."""
    argv = [sys.executable, "-m", "coffer", "serve", "--print-token"]
    return subprocess.run(argv, env=serve_env(home), capture_output=True, text=True, check=True).stdout.strip()


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def http_upstream() -> Iterator[int]:
    """The fixture server over streamable HTTP on a free loopback port, requiring a bearer token."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURE), "--name", "web", "--http", str(port), "--token", TOKEN],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


async def test_http_upstreams_with_header_secrets(
    coffer_home: Path, http_upstream: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    await wait_for(lambda: listening(http_upstream), what="the HTTP fixture to listen")
    monkeypatch.setenv("COFFER_TEST_HTTP_TOKEN", TOKEN)
    url = f"http://127.0.0.1:{http_upstream}/mcp"
    good = registry.ServerConfig(name="web", url=url, headers={"Authorization": "Bearer ${COFFER_TEST_HTTP_TOKEN}"})
    bad = registry.ServerConfig(name="badauth", url=url, headers={"Authorization": "Bearer wrong-token"}, timeout=5)
    lists = await probe(good)
    assert "echo" in [t["name"] for t in lists["tools"]]
    with pytest.raises(UpstreamError, match="HTTP 401"):
        await probe(bad)

    servers.add_server(good)
    servers.add_server(bad)
    async with serve(coffer_home) as s:
        assert text(await s.call("web__echo", {"text": "via http"})) == "via http"
        assert text(await s.call("web__add", {"a": 1, "b": 41})) == "42"
        for _ in range(2):  # a 401 is not retried: same clear reason each time
            refused = await s.call("badauth__echo", {"text": "x"})
            assert refused.is_error and "HTTP 401" in text(refused)
        assert TOKEN not in text(refused)


@pytest.mark.parametrize("standalone", [False, True], ids=["engine", "in-process"])
async def test_serve_over_http_and_stop_cleanly(coffer_home: Path, standalone: bool) -> None:
    """Through the engine the front's going closes the port and the engine's upstreams stop with the engine;
    standalone they stop with `coffer serve`."""
    add_fixture(coffer_home, "alpha", "relay")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "coffer", "serve", "--http", str(port), *(["--standalone"] if standalone else [])],
        env=serve_env(coffer_home),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_for(lambda: listening(port), timeout=20, what="coffer serve --http to listen")
        token = bearer(coffer_home)
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            assert {"coffer__search_tools", "alpha__echo"} <= set(names)
            result = await session.call_tool("alpha__echo", {"text": "over http"})
            assert text(result) == "over http"
            refused = await session.call_tool("alpha__ask_model")  # hosts vary here: decided per request
            assert refused.is_error and "the client did not declare sampling" in text(refused), text(refused)

        async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            reply = types.TextContent(type="text", text="sampled over http")
            return types.CreateMessageResult(role="assistant", model="m", content=reply)

        async with (  # the request rides the call's own response stream
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write),
            ClientSession(read, write, sampling_callback=sampling) as session,
        ):
            await session.initialize()
            assert text(await session.call_tool("alpha__ask_model")) == "model said: sampled over http"
        state = control.status()
        engine = None if state is None else int(state["engine"]["pid"])
        assert (engine is None) == standalone
        tree = descendants(engine if engine is not None else proc.pid)
        assert tree
        os.kill(proc.pid, signal.SIGTERM)
        await wait_for(lambda: proc.poll() is not None, timeout=10, what="coffer serve to exit")
        if engine is not None:
            await wait_for(lambda: not listening(port), timeout=10, what="the engine to close the front's port")
            assert all(alive(p) for p in tree)  # other sessions may use them: they go with the engine
            assert control.stop(coffer_home / "coffer.toml")
        await wait_for(lambda: not any(alive(p) for p in tree), timeout=10, what="its upstreams to be gone")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


async def test_a_front_restarted_on_its_port_serves_every_new_session(coffer_home: Path) -> None:
    """`serve --http PORT` stopped and started again at once (a user's restart): the engine stays, and
    no session opened after the restart may land on the old front's server while it winds down (each
    of its later requests would then reach the new one and be told "Session not found")."""
    add_fixture(coffer_home, "alpha", "relay")
    port = free_port()
    argv = [sys.executable, "-m", "coffer", "serve", "--http", str(port), "--no-auth"]
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(3):
            proc = subprocess.Popen(argv, env=serve_env(coffer_home), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:  # the sessions open as soon as this front says it serves (the old front's listener, still
                # winding down, may take a connection before that, and then close)
                assert proc.stderr is not None
                with anyio.fail_after(60):
                    said = await anyio.to_thread.run_sync(proc.stderr.readline)
                assert b"serving MCP on http://127.0.0.1:" in said, said
                assert listening(port)
                async with anyio.create_task_group() as tg:
                    for n in range(3):

                        async def one(n: int = n) -> None:
                            async with (
                                streamable_http_client(url) as (read, write),
                                ClientSession(read, write) as session,
                            ):
                                await session.initialize()
                                for _ in range(3):  # each call on a connection of its own, often
                                    assert text(await session.call_tool("alpha__echo", {"text": f"s{n}"})) == f"s{n}"

                        tg.start_soon(one)
            finally:
                proc.terminate()
                proc.wait(10)
    finally:
        control.stop(coffer_home / "coffer.toml")


def test_port_in_use_is_one_error_and_nothing_starts(coffer_home: Path, tmp_path: Path) -> None:
    events = tmp_path / "events"
    add_fixture(coffer_home, "alpha", events=events)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [sys.executable, "-m", "coffer", "serve", "--http", str(port)]
        done = subprocess.run(argv, env=serve_env(coffer_home), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr == f"coffer: error: cannot serve on 127.0.0.1:{port}: Address already in use\n"
    assert "serving" not in done.stdout + done.stderr
    assert not events.exists()  # no upstream was started for a server that could not listen


def test_http_requires_the_bearer_token_unless_told_not_to(coffer_home: Path) -> None:
    import httpx2 as client

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}

    def status(port: int, headers: dict[str, str]) -> int:
        return client.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=accept | headers, timeout=30).status_code

    for extra, expect_open in (((), False), (("--no-auth",), True)):
        port = free_port()
        argv = [sys.executable, "-m", "coffer", "serve", "--http", str(port), *extra]
        proc = subprocess.Popen(argv, env=serve_env(coffer_home), stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not listening(port) and time.monotonic() < deadline:
                time.sleep(0.05)
            token = bearer(coffer_home)
            assert status(port, {}) == (200 if expect_open else 401)
            assert status(port, {"Authorization": "Bearer wrong"}) == (200 if expect_open else 401)
            assert status(port, {"Authorization": f"Bearer {token}"}) == 200
        finally:
            proc.terminate()
            proc.wait(10)
    token_file = next(coffer_home.rglob("http-token"))
    assert token_file.stat().st_mode & 0o777 == 0o600 and len(token) >= 40


async def test_an_unknown_protocol_version_header_is_named_as_such(coffer_home: Path) -> None:
    """400 with what was wrong (the SDK alone says a 2026-07-28 `_meta` key is missing)."""
    from coffer.gateway import http as serving
    from coffer.gateway.server import Gateway

    listener = tcp_listener(0)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    gateway = Gateway(host_wait=None)
    async with gateway.running(), anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(serving.server(gateway, None).serve, sockets=[listener]))
        async with httpx2.AsyncClient(timeout=10) as http:
            for bad in ("2099-01-01", "not-a-version"):
                response = await http.post(url, json=body, headers=headers | {"MCP-Protocol-Version": bad})
                assert response.status_code == 400
                message = response.json()["error"]["message"]
                assert f"unsupported MCP-Protocol-Version '{bad}'" in message and "2025-11-25" in message
            response = await http.post(url, json=body, headers=headers | {"MCP-Protocol-Version": "2025-11-25"})
            assert "unsupported MCP-Protocol-Version" not in response.text
        tg.cancel_scope.cancel()


async def _response(conn: anyio.abc.ByteStream) -> bytes:
    """One whole HTTP/1.1 response with a Content-Length (EndOfStream if the server closed instead)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await conn.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
    while len(body) < length:
        body += await conn.receive()
    return head


async def test_an_idle_kept_alive_connection_is_left_for_the_client_to_close() -> None:
    """httpx drops a pooled connection idle for 5 s. A server that closed it at 5 s too (uvicorn's default)
    raced the client's next request on it, and the ReadError ended the SDK client's whole session."""
    from coffer.gateway import http as serving
    from coffer.gateway.server import Gateway

    listener = tcp_listener(0)
    port = listener.getsockname()[1]
    gateway = Gateway(host_wait=None)
    async with gateway.running(), anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(serving.server(gateway, None).serve, sockets=[listener]))
        async with await anyio.connect_tcp("127.0.0.1", port) as conn:
            for wait in (0.0, 5.5):  # the second request after longer than httpx's (and uvicorn's) 5 s
                await anyio.sleep(wait)
                await conn.send(b"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                with anyio.fail_after(10):
                    assert (await _response(conn)).startswith(b"HTTP/1.1 404")
        tg.cancel_scope.cancel()
