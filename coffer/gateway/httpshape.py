"""`serve --http` answers a request as plain JSON when its answer is all there is to send, as an SSE
stream when anything comes first (progress, logs, a sampling or elicitation request, a big result).

Streamable HTTP lets a server answer a POSTed request either way, and clients must take both. The SDK's
server picks one way per session: SSE always (what Coffer needs for mid-call traffic) or JSON always
(which has no wire for it). But an SSE answer costs a kept-alive client its connection: the SDK's own
client (httpx) closes the response as soon as it has read the answer event, before the chunked stream's
end, so its pool drops the connection and the next call opens a new one (measured: 17-23 new TCP
connections for 50 calls; a JSON answer is read to its end and the connection is kept). So the SSE
answer is held until its first event is complete: if that event is the answer, it goes out as one JSON
body; otherwise the held headers and event go out as they were and the rest streams through. Only the
first event is ever held, only up to `HOLD_LIMIT` bytes (a bigger answer streams as before) and only
for `HOLD_S` (a slow call gets its SSE headers then, as before, so no client waits on headers long).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Any, Any, Send], Awaitable[None]]

HOLD_LIMIT = 4 << 20  # an answer event larger than this streams as SSE (no full copy of a big result)
HOLD_S = 1.0  # an answer not there by then streams as SSE (a new connection costs ~1 ms; the call took 1 s)
_DROPPED = {b"content-type", b"content-length", b"transfer-encoding", b"x-accel-buffering"}


def json_when_single(app: App) -> App:
    """Wrap the SDK's streamable HTTP app (see the module's docstring)."""

    async def shaped(scope: Any, receive: Any, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        shaper = _Shaper(send)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(shaper.release_after, HOLD_S)
                await app(scope, receive, shaper.send)
                group.cancel_scope.cancel()
        except BaseExceptionGroup as failed:  # the app's own error, as it would be raised without the timer
            if len(failed.exceptions) == 1:
                raise failed.exceptions[0] from None
            raise

    return shaped


class _Shaper:
    """One response: passes it through, or holds an SSE answer's first event to send it as JSON."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._start: Message | None = None  # the held response start, while holding
        self._held = bytearray()
        self._mode = "undecided"  # then "through" (as it came) or "done" (answered as JSON)
        self._lock = anyio.Lock()  # the timer and the app both send

    async def release_after(self, seconds: float) -> None:
        await anyio.sleep(seconds)
        async with self._lock:
            if self._mode == "undecided":
                if self._start is None:
                    self._mode = "through"  # no headers yet: they go out as they come
                else:
                    await self._release(more=True)

    async def send(self, message: Message) -> None:
        async with self._lock:
            await self._send_locked(message)

    async def _send_locked(self, message: Message) -> None:
        if self._mode == "through":
            await self._send(message)
        elif self._mode == "done":
            return  # the rest of the SSE stream: its answer went out as JSON
        elif message["type"] == "http.response.start":
            if _is_sse(message):
                self._start = message
            else:
                self._mode = "through"
                await self._send(message)
        else:
            await self._body(message)

    async def _body(self, message: Message) -> None:
        self._held += message.get("body", b"")
        more = message.get("more_body", False)
        if len(self._held) > HOLD_LIMIT:  # big: streamed as it came, not copied to be looked at
            await self._release(more)
            return
        at = 0
        while True:  # events with no data (a ping, a priming event) are passed over
            event, at = _next_event(self._held, at)
            if event is None:
                if not more:
                    await self._release(more)
                return
            kind, data = _read_event(event)
            if kind == "answer":
                await self._json(data)
                return
            if kind == "other":
                await self._release(more)
                return

    async def _json(self, body: bytes) -> None:
        assert self._start is not None
        headers = [(k, v) for k, v in self._start.get("headers", []) if k.lower() not in _DROPPED]
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        self._mode = "done"
        self._held = bytearray()
        await self._send({"type": "http.response.start", "status": self._start["status"], "headers": headers})
        await self._send({"type": "http.response.body", "body": body, "more_body": False})

    async def _release(self, more: bool) -> None:
        assert self._start is not None
        self._mode = "through"
        held, self._held = bytes(self._held), bytearray()
        await self._send(self._start)
        await self._send({"type": "http.response.body", "body": held, "more_body": more})


def _is_sse(start: Message) -> bool:
    for key, value in start.get("headers", []):
        if key.lower() == b"content-type":
            return bool(value.lower().startswith(b"text/event-stream"))
    return False


def _next_event(buffer: bytearray, start: int) -> tuple[bytes | None, int]:
    """The complete SSE event from `start` and where the next begins; (None, start) while incomplete."""
    ends = [(i, len(sep)) for sep in (b"\r\n\r\n", b"\n\n") if (i := buffer.find(sep, start)) >= 0]
    if not ends:
        return None, start
    at, width = min(ends)
    return bytes(buffer[start:at]), at + width


# `{"jsonrpc":"2.0","id":<id>,"result"|"error"`: how the SDK writes an answer (a big one is not parsed)
_ANSWER = re.compile(
    rb'\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(?:"(?:[^"\\]|\\.)*"|-?\d+)\s*,\s*"(?:result|error)"'
)
_PARSE_LIMIT = 1 << 16


def _read_event(event: bytes) -> tuple[str, bytes]:
    """("answer", its JSON) for a JSON-RPC result or error; ("empty", b"") for an event with no data (a
    comment, a priming event); ("other", b"") for anything else: a notification or a server request,
    which must go out as SSE with what follows it."""
    data: list[bytes] = []
    for line in event.replace(b"\r\n", b"\n").split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
        elif line.startswith(b"event:") and line[6:].strip() not in (b"", b"message"):
            return "other", b""
    if not data:
        return "empty", b""
    body = b"\n".join(data)
    if len(body) > _PARSE_LIMIT:
        return ("answer", body) if _ANSWER.match(body) else ("other", b"")
    try:
        message = json.loads(body)
    except ValueError:
        return "other", b""
    if isinstance(message, dict) and "id" in message and ("result" in message or "error" in message):
        return "answer", body
    return "other", b""
