"""One POSTed request's response (coffer.gateway.httpshape): what goes on the ASGI wire and when, for the
cases the HTTP tests cannot wait for (a silent call's keep-alive comments) or cannot cause (the SDK
closing a request's stream). The messages are the SDK's own types on a real memory stream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
import pytest

from coffer.gateway import httpshape
from coffer.gateway.httpshape import Reply, relay

pytestmark = pytest.mark.anyio


@dataclass
class Event:  # what the SDK's router hands a request's stream: the message (and an event id, unused)
    message: Any


class Wire:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: Any) -> None:
        self.sent.append(dict(message))

    def kinds(self) -> list[str]:
        out = []
        for m in self.sent:
            if m["type"] == "http.response.start":
                out.append(dict(m["headers"])[b"content-type"].decode())
            elif m.get("body", b"").startswith(b": ping"):
                out.append("ping")
            elif m.get("body", b"").startswith(b"event: message"):
                out.append("event")
            elif not m.get("more_body", False):
                out.append("end")
        return out

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


ANSWER = types.JSONRPCResponse(jsonrpc="2.0", id=7, result={"content": []})
PROGRESS = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"progress": 1})


async def test_an_answer_that_comes_first_is_one_json_body() -> None:
    wire = Wire()
    send, receive = anyio.create_memory_object_stream[Any](4)
    await send.send(Event(ANSWER))
    assert await relay((send, receive), Reply(wire.send, [(b"mcp-session-id", b"s1")]))
    assert wire.kinds() == ["application/json", "end"]
    assert dict(wire.sent[0]["headers"])[b"mcp-session-id"] == b"s1"
    assert wire.body() == b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}'


async def test_a_silent_call_gets_sse_headers_then_comments_then_its_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpshape, "HOLD_S", 0.05)
    monkeypatch.setattr(httpshape, "PING_S", 0.05)
    wire = Wire()
    send, receive = anyio.create_memory_object_stream[Any](4)

    async def late() -> None:
        await anyio.sleep(0.3)
        await send.send(Event(PROGRESS))
        await send.send(Event(ANSWER))

    async with anyio.create_task_group() as tg:
        tg.start_soon(late)
        assert await relay((send, receive), Reply(wire.send, []))
    kinds = wire.kinds()
    assert kinds[0] == "text/event-stream" and kinds[-3:] == ["event", "event", "end"]
    assert kinds.count("ping") >= 2  # headers at HOLD_S, then a comment every PING_S while silent
    assert b'"method":"notifications/progress"' in wire.body() and b'"id":7' in wire.body()


async def test_a_stream_closed_before_anything_is_left_to_the_caller_after_sse_it_is_ended() -> None:
    wire = Wire()
    send, receive = anyio.create_memory_object_stream[Any](4)
    send.close()  # the session ended with the request in flight
    assert not await relay((send, receive), Reply(wire.send, []))
    assert wire.sent == []  # nothing sent: the caller answers with an error status

    wire = Wire()
    send, receive = anyio.create_memory_object_stream[Any](4)
    await send.send(Event(PROGRESS))
    send.close()
    assert await relay((send, receive), Reply(wire.send, []))
    assert wire.kinds() == ["text/event-stream", "event", "end"]


async def test_a_tick_from_an_earlier_wait_changes_nothing() -> None:
    """A timer that fired as its wait ended leaves a tick behind: the answer after it is still one JSON body."""
    wire = Wire()
    send, receive = anyio.create_memory_object_stream[Any](4)
    await send.send(httpshape._Tick())
    await send.send(Event(ANSWER))
    assert await relay((send, receive), Reply(wire.send, []))
    assert wire.kinds() == ["application/json", "end"]
