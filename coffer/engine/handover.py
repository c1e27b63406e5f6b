"""The engine's side of a handed-over session: the host's own stdin and stdout, passed by its front over
the socket (`SCM_RIGHTS`), served here with no process between host and engine.

A front whose stdio are pipes or sockets (every host's) sends one byte, `F`, with its fds 0 and 1, then its
JSON hello. The engine reads the host's requests from the one and writes its answers to the other, and keeps
the front told, in short lines on the front's socket (`coffer.engine.handed` reads them), of what only
the front can act on if this engine dies: each request read (`+id`) and answered (`-id`), the handshake
(`h` + its line, to replay), a large write under way (`w` ... `d`: a line the death would cut), and the
host's stdin ending (`.`: the session is over, not lost). A new engine given the replayed handshake
(`replay`) drops its own answer to the replayed initialize (`drop`): the host already has one. When the
front's socket closes (Ctrl-C, kill) the session ends and the host's fds are closed here, so the host sees
its server's streams end with its process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types

from coffer.engine import handed
from coffer.engine.front import EDGE, message_id
from coffer.gateway import stdio
from coffer.upstreams.framing import wire_bytes

FIRST_WAIT_S = 10.0  # a connection that says nothing for this long is closed


async def first_byte(conn: socket.socket) -> tuple[bytes, list[int]]:
    """A new connection's first byte and any fds sent with it (a handing front's); b"" when it closed or
    said nothing in time. Read alone, so that everything after it is left to the connection's stream."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(conn.fileno(), readable)
    try:
        await asyncio.wait_for(ready, FIRST_WAIT_S)
    except TimeoutError:
        return b"", []
    finally:
        loop.remove_reader(conn.fileno())
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1, 2)
    except OSError:
        return b"", []
    if data != handed.HANDING and fds:  # fds with anything but a front's hand-over: not kept
        for fd in fds:
            os.close(fd)
        fds = []
    return data, fds


class Notes:
    """What the front is told, on its socket."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def say(self, kind: bytes, text: bytes = b"") -> None:
        with contextlib.suppress(Exception):  # a front gone is noticed by its reader, not here
            self._writer.write(kind + text + b"\n")

    def read(self, lines: list[bytearray | None]) -> None:
        """Lines just read from the host, before any is handled: each request among them is noted (all of
        a chunk at once: a request still waiting its turn when the engine dies is owed an answer too),
        its id read from the line's ends as the relaying front reads it (`message_id`); the handshake's
        two lines are kept whole, for a new engine to replay."""
        for line in lines:
            if not line:
                continue
            head, tail = bytes(line[:EDGE]), bytes(line[-EDGE:])
            asked = message_id(head, tail, len(line), request=True)
            if asked is not None:
                self.say(handed.ASKED, asked.encode())
            if _HANDSHAKE.search(head) and _method(bytes(line)) in ("initialize", "notifications/initialized"):
                self.say(handed.HANDSHAKE, bytes(line).strip())


_HANDSHAKE = re.compile(rb'"(?:initialize|notifications/initialized)"')  # what may be one, parsed to be sure


def _method(line: bytes) -> object:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message.get("method") if isinstance(message, dict) else None


class NotedWire(stdio.StdoutWire):
    """The host's stdout: each answer noted once written, a large write bracketed, and the answer to a
    replayed initialize dropped (its host had one from the engine before)."""

    def __init__(self, writer: asyncio.StreamWriter, notes: Notes, drop: object = None) -> None:
        super().__init__(writer)
        self._notes = notes
        self._drop = drop

    async def send(self, message: Any) -> None:
        answer = isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None
        said = json.dumps(message.id).encode() if answer else b""
        if answer and self._drop is not None and message.id == self._drop:
            self._drop = None
            self._notes.say(handed.ANSWERED, said)
            return
        data = wire_bytes(message)
        large = len(data) >= handed.ATOMIC
        if large:
            self._notes.say(handed.WRITING)
        await self.line(data)
        if large:
            self._notes.say(handed.WRITTEN)
        if answer:
            self._notes.say(handed.ANSWERED, said)


class Replayed:
    """The host's lines, after the handshake a restarted engine is replayed; `ended` once the host's
    stdin ended (not when the front went)."""

    def __init__(self, replay: list[bytes], lines: stdio.StdinLines) -> None:
        self._replay = [bytearray(line) for line in replay]
        self._lines = lines
        self.ended = False

    def __aiter__(self) -> Replayed:
        return self

    async def __anext__(self) -> bytearray | None:
        if self._replay:
            return self._replay.pop(0)
        try:
            return await self._lines.__anext__()
        except StopAsyncIteration:
            self.ended = True
            raise


@contextlib.asynccontextmanager
async def host_streams(
    fds: list[int], hello: dict[str, Any], notes: Notes
) -> AsyncIterator[tuple[Replayed, NotedWire]]:
    """The host's stdin and stdout (`fds`, owned from here on and closed on the way out) on this loop."""
    loop = asyncio.get_running_loop()
    fd_in, fd_out = fds
    reader = asyncio.StreamReader(limit=stdio.READ_CHUNK)
    pipes = [os.fdopen(fd_in, "rb", buffering=0), os.fdopen(fd_out, "wb", buffering=0)]
    transports: list[asyncio.BaseTransport] = []
    try:
        read, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipes[0])
        transports.append(read)
        write, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipes[1])
        transports.append(write)
        replay = [line.encode() for line in hello.get("replay") or [] if isinstance(line, str)]
        wire = NotedWire(asyncio.StreamWriter(write, protocol, None, loop), notes, hello.get("drop"))
        yield Replayed(replay, stdio.StdinLines(reader, notes.read)), wire
    finally:
        for transport in transports:
            transport.close()  # closes its pipe once what is buffered is written
        for pipe in pipes[len(transports) :]:  # those no transport took
            with contextlib.suppress(OSError):
                pipe.close()
