"""Every TCP listener Coffer opens turns Nagle's algorithm off on the connections it accepts.

Read from the accepted socket itself, in this process (no timing): with Nagle on, a kept-alive HTTP
client waits up to 40 ms per call for the delayed ACK that releases uvicorn's last SSE write.
"""

from __future__ import annotations

import functools
import os
import socket
from contextlib import suppress

import anyio
import httpx2
import pytest

from coffer.errors import CofferError
from coffer.loopback import tcp_listener

pytestmark = pytest.mark.anyio


def accepted_nodelay(server: tuple[str, int], client: socket.socket) -> int | None:
    """TCP_NODELAY of the server side of `client`'s connection to `server`, found among this
    process's fds; None while the server has not accepted it yet."""
    want = (server, client.getsockname())
    for name in os.listdir("/proc/self/fd"):
        try:
            dup = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with dup, suppress(OSError):
            if dup.family == socket.AF_INET and (dup.getsockname(), dup.getpeername()) == want:
                return dup.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    return None


async def nodelay_of_a_connection(port: int) -> int:
    """Connect once and read the accepted socket's option (the loop accepts on a later turn)."""
    client = socket.create_connection(("127.0.0.1", port))
    with client, anyio.fail_after(10):
        while (nodelay := accepted_nodelay(("127.0.0.1", port), client)) is None:
            await anyio.sleep(0.01)
        return nodelay


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads the fd table from /proc")


@needs_proc
async def test_serve_http_connections_have_nodelay() -> None:
    """`coffer serve --http`: its listener (coffer.loopback.tcp_listener) under uvicorn and the gateway's real app."""
    from coffer.gateway import http as serve
    from coffer.gateway.server import Gateway

    listener = tcp_listener(0)
    gateway = Gateway(host_wait=None)
    async with gateway.running(), anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(serve.server(gateway, "t" * 32).serve, sockets=[listener]))
        assert await nodelay_of_a_connection(listener.getsockname()[1]) == 1
        tg.cancel_scope.cancel()


@needs_proc
async def test_oauth_callback_connections_have_nodelay() -> None:
    """The OAuth loopback callback, on the redirect URI's port, as `coffer auth` opens it."""
    from coffer.upstreams.oauth import interactive

    async with interactive("s", "http://127.0.0.1:9/mcp", headless=True) as provider:
        redirect = str(provider.context.client_metadata.redirect_uris[0])  # type: ignore[index]
        port = int(redirect.rsplit(":", 1)[1].split("/", 1)[0])
        assert await nodelay_of_a_connection(port) == 1


def test_listener_is_tcp_with_nodelay() -> None:
    with tcp_listener() as sock:
        assert sock.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY per connection only then
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert not sock.get_inheritable()


def test_a_port_in_use_is_one_clear_error() -> None:
    with tcp_listener() as taken:
        port = taken.getsockname()[1]
        with pytest.raises(CofferError, match=rf"cannot serve on 127\.0\.0\.1:{port}: "):
            tcp_listener(port)


async def test_the_gateway_answers_over_the_listener() -> None:
    """Not only accepted: a kept-alive client gets answers on one connection (401 without the token)."""
    from coffer.gateway import http as serve
    from coffer.gateway.server import Gateway

    listener = tcp_listener(0)
    port = listener.getsockname()[1]
    gateway = Gateway(host_wait=None)
    async with gateway.running(), anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(serve.server(gateway, "t" * 32).serve, sockets=[listener]))
        async with httpx2.AsyncClient() as http:
            for _ in range(3):
                response = await http.post(f"http://127.0.0.1:{port}/mcp", json={})
                assert response.status_code == 401
        tg.cancel_scope.cancel()
