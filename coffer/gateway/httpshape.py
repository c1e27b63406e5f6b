"""`serve --http` answers a POSTed request as plain JSON when its answer is all there is to send, as an
SSE stream when anything comes first (progress, logs, a sampling or elicitation request) or when the
answer is slow.

Streamable HTTP lets a server answer a request either way, and clients must take both. The SDK's server
picks one way per session: SSE always (what Coffer needs for mid-call traffic) or JSON always (which has
no wire for it, so it drops progress and logs and refuses sampling, elicitation and roots mid-call: what
mcp-proxy serves). SSE always costs twice over: the SDK runs an event-source response per request (its
own tasks, a writer task, two memory streams) and a kept-alive client loses its connection, since the
SDK's own client (httpx) closes an SSE response once it has read the answer event, before the chunked
stream's end (measured: 17-23 new TCP connections for 50 calls). So Coffer's transport
(`coffer.gateway.sdk.StreamableHTTPTransport`) hands each request's messages to a `Reply`, which
commits to a kind only when it must: the answer first goes out as one JSON body; anything else first,
or no answer within `HOLD_S`, sends SSE headers (a slow call's client does not wait on headers long)
and every message after them as an event, with a comment every `PING_S` so a proxy between keeps an
idle stream open. The answer's JSON is written once, as bytes, and sent as it is (no copy to frame it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp_types import JSONRPCError, JSONRPCResponse

from coffer.upstreams.framing import wire_bytes

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Any, Any, Send], Awaitable[None]]

HOLD_S = 1.0  # an answer not there by then streams as SSE (a new connection costs ~1 ms; the call took 1 s)
PING_S = 15.0  # sse-starlette's default, which the SDK's SSE answers used
_EVENT = b"event: message\r\ndata: "
_END = b"\r\n\r\n"
_PING = b": ping\r\n\r\n"


class Reply:
    """The HTTP response to one POSTed request; `headers` are sent with it either way (the session id)."""

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]]) -> None:
        self._send = send
        self._headers = headers
        self.started = False  # response headers sent
        self.done = False  # the response is complete

    async def answer(self, body: bytes) -> None:
        """The request's answer (its JSON-RPC result or error): the whole response, or its last event."""
        if not self.started:
            self.started = self.done = True
            headers = [*self._headers, (b"content-type", b"application/json")]
            headers.append((b"content-length", str(len(body)).encode()))
            await self._send({"type": "http.response.start", "status": 200, "headers": headers})
            await self._send({"type": "http.response.body", "body": body})
            return
        await self.event(body)
        await self.end()

    async def event(self, body: bytes) -> None:
        """A message before the answer (progress, a log, a server request): SSE from here on."""
        await self.stream()
        await self._body(_EVENT)
        await self._body(body)
        await self._body(_END)

    async def stream(self) -> None:
        """Commit to SSE (nothing sent yet, or already SSE)."""
        if not self.started:
            self.started = True
            headers = [
                *self._headers,
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache, no-transform"),
                (b"x-accel-buffering", b"no"),
            ]
            await self._send({"type": "http.response.start", "status": 200, "headers": headers})

    async def ping(self) -> None:
        await self._body(_PING)

    async def end(self) -> None:
        """End an SSE stream (after its answer, or when the request's stream closed without one)."""
        if self.started and not self.done:
            self.done = True
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _body(self, chunk: bytes) -> None:
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})


async def relay(streams: tuple[MemoryObjectSendStream[Any], ObjectReceiveStream[Any]], reply: Reply) -> bool:
    """Send one request's messages (the SDK's events, `.message` each) until its answer; False when the
    stream closed first with nothing sent (the caller answers with an error then).

    A silence is noticed by a loop timer that puts a tick on the request's own stream (`streams`: its
    send and receive ends), not by a cancel scope around every wait: anyio's scope was 3% of the
    gateway's CPU per call under load, a timer handle a fraction of that. A tick that was already on
    its way when the wait ended is told apart by identity and skipped."""
    wake, messages = streams
    loop = asyncio.get_running_loop()
    wait = HOLD_S
    while True:
        tick = _Tick()
        timer = loop.call_later(wait, tick.put, wake)
        try:
            got = await messages.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            await reply.end()
            return reply.started
        finally:
            timer.cancel()
        if isinstance(got, _Tick):
            if got is tick:  # nothing for `wait` seconds: SSE headers now, then a comment now and then
                await (reply.ping() if reply.started else reply.stream())
                wait = PING_S
            continue
        message = got.message
        body = wire_bytes(message)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            await reply.answer(body)
            return True
        await reply.event(body)
        wait = PING_S


class _Tick:
    __slots__ = ()

    def put(self, stream: MemoryObjectSendStream[Any]) -> None:
        with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            stream.send_nowait(self)


def lifespan_app(lifespan: Callable[[], AbstractAsyncContextManager[Any]], path: str, app: App) -> App:
    """`app` at `path` (404 elsewhere), `lifespan` entered at the server's startup and left at its shutdown."""
    missing = b'{"error": "not found: coffer serves MCP at /mcp"}'

    async def routed(scope: Any, receive: Any, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(lifespan, receive, send)
        elif scope["type"] == "http" and scope["path"] == path:
            await app(scope, receive, send)
        elif scope["type"] == "http":
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(missing)).encode())]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": missing})

    return routed


async def _lifespan(lifespan: Callable[[], AbstractAsyncContextManager[Any]], receive: Any, send: Send) -> None:
    await receive()  # lifespan.startup
    started = False
    try:
        async with lifespan():
            await send({"type": "lifespan.startup.complete"})
            started = True
            await receive()  # lifespan.shutdown
    except Exception as exc:
        failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
        await send({"type": failed, "message": f"{type(exc).__name__}: {exc}"})
        raise
    await send({"type": "lifespan.shutdown.complete"})
