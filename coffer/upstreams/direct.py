"""Requests to a stdio upstream answered without the SDK's client dispatcher: its answer is taken off
the session's read stream by id.

Why: the SDK's `send_raw_request` and the read loop behind it were a third of the gateway's CPU per
relayed call (profiled under `bench_http_peers.py`'s loads): per request a tracing span, a request
clock, a memory stream, a cancel scope, id coercion, and one more task hop for the answer. Coffer
already owns the upstream's pipe (coffer.upstreams.transport): a request goes onto that pipe's write
queue as the SDK would put it there, and its answer is picked out of the session's read stream
(`Lane.reader`) where the SDK's read loop would have met it: after everything the upstream sent before
it was dispatched, so a log line or a list change sent before an answer still reaches the host first
(taken any earlier, an answer overtook the log line the upstream wrote just before it). The JSON on the
wire is the same. What needs the SDK keeps it: a request with a
progress callback (the SDK matches the progress token), OpenTelemetry (the SDK's client span and the
trace context it injects), HTTP upstreams, and everything the upstream sends that is not an answer to
a lane request (its own requests, notifications, late answers).
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp import MCPError
from mcp.shared.message import SessionMessage


class _Waiter:
    __slots__ = ("answer", "done")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.answer: types.JSONRPCResponse | types.JSONRPCError | None = None  # None when the pipe closed


class Lane:
    """One stdio upstream process's lane: open while its pipe is (`stdio_pipe` opens and closes it)."""

    def __init__(self) -> None:
        self._write: MemoryObjectSendStream[SessionMessage] | None = None
        self._waiting: dict[types.RequestId, _Waiter] = {}

    def open(self, write: MemoryObjectSendStream[SessionMessage]) -> None:
        self._write = write

    def close(self) -> None:
        """The upstream's output ended: every request still waiting fails as the SDK's would."""
        self._write = None
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.done.set()

    def reader(
        self, stream: ObjectReceiveStream[SessionMessage | Exception]
    ) -> ObjectReceiveStream[SessionMessage | Exception]:
        """`stream` without the answers to this lane's requests, for the session to read."""
        return _Reader(stream, self)

    def take(self, message: types.JSONRPCMessage) -> bool:
        """True when `message` answers a lane request (it is delivered, and nobody else should see it)."""
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            return False
        waiter = self._waiting.pop(message.id, None) if message.id is not None else None
        if waiter is None:
            return False
        waiter.answer = message
        waiter.done.set()
        return True

    async def request(
        self, method: str, params: dict[str, Any] | None, request_id: str, timeout: float | None
    ) -> dict[str, Any]:
        """The raw result, with the errors `ClientSession`'s dispatcher raises: MCPError with the upstream's
        error, REQUEST_TIMEOUT once `timeout` seconds have passed after the write, CONNECTION_CLOSED."""
        write = self._write
        if write is None:
            raise _closed()
        waiter = self._waiting[request_id] = _Waiter()
        try:
            if params:
                message = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
            else:  # unset, not null: JSON-RPC forbids `"params": null`
                message = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method)
            try:
                await write.send(SessionMessage(message))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise _closed() from None
            with anyio.move_on_after(math.inf if timeout is None else timeout):
                await waiter.done.wait()
        finally:
            self._waiting.pop(request_id, None)
        answer = waiter.answer
        if not waiter.done.is_set():
            raise MCPError(code=types.REQUEST_TIMEOUT, message=f"Request {method!r} timed out")
        if answer is None:
            raise _closed()
        if isinstance(answer, types.JSONRPCError):
            raise MCPError(code=answer.error.code, message=answer.error.message, data=answer.error.data)
        return answer.result


class _Reader(ObjectReceiveStream[SessionMessage | Exception]):
    def __init__(self, stream: ObjectReceiveStream[SessionMessage | Exception], lane: Lane) -> None:
        self._stream = stream
        self._lane = lane

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._stream.receive()
            if not isinstance(item, SessionMessage) or not self._lane.take(item.message):
                return item

    async def aclose(self) -> None:
        await self._stream.aclose()


def _closed() -> MCPError:
    return MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
