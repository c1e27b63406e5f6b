"""A session of this process's own with the vault's running engine, for `coffer call`: the same hello line
a `coffer serve` front sends, then the MCP stream, so the call is one of the engine's sessions like any
agent's (its servers, its confinement, its log row). Unlike the front it never starts an engine."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from coffer.engine import place
from coffer.errors import CofferError
from coffer.upstreams.framing import LineSplitter, framed, wire_bytes


@asynccontextmanager
async def engine_session(profile: str | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """(read, write) streams for an MCP `ClientSession`, over a new connection to this vault's engine.

    Raises CofferError when no engine answers (it stopped since it was looked for)."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    try:
        stream = await anyio.connect_unix(str(place.socket_path()))
    except OSError as exc:
        raise CofferError(f"the engine behind `coffer serve` did not answer: {exc.strerror or exc}") from None
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](16)

    async def engine_to_session() -> None:
        splitter = LineSplitter()
        async with to_session:
            try:
                async for chunk in stream:
                    for line in splitter.feed(chunk):
                        if line is None:
                            await to_session.send(CofferError("the engine sent a line over the size limit"))
                        elif line.strip():
                            try:
                                parsed = types.jsonrpc_message_adapter.validate_json(bytes(line), by_name=False)
                            except ValueError as exc:
                                await to_session.send(exc)
                                continue
                            await to_session.send(SessionMessage(parsed))
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                pass  # the engine went away: the session sees its read stream end

    async def session_to_engine() -> None:
        async with from_session:
            async for message in from_session:
                for piece in framed(wire_bytes(message.message)):
                    await stream.send(bytes(piece))

    hello = {"coffer": "front", "version": 1, "profile": profile, "pid": os.getpid()}
    async with stream, anyio.create_task_group() as tg:
        await stream.send(json.dumps(hello).encode() + b"\n")
        tg.start_soon(engine_to_session)
        tg.start_soon(session_to_engine)
        try:
            yield read, write
        finally:
            tg.cancel_scope.cancel()
