"""The host side of the stdio transport: a host's byte stream as the MCP server's (read, write) streams.

As the SDK's `mcp.server.stdio`, a transport is a context manager yielding `(read, write)`, and the server
never knows which one it has: `process_streams()` is this process's own stdin and stdout (`coffer serve`
in-process), `pipe_streams(lines, wire)` any line source and sink (the engine: one per front's socket).
Each line is parsed once (`inbound`), and each answer written as the bytes pydantic serialised it to.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio

from coffer.upstreams.framing import MAX_LINE_BYTES, LineSplitter, framed, loads_owned, wire_bytes

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCMessage

READ_CHUNK = 1024 * 1024
Streams = tuple[Any, Any]  # (read, write): the memory object streams `Server.run` takes

PARSE_ERROR = '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON"}}'
LINE_TOO_LONG = (
    '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is over the 64 MB limit"}}'
)
INVALID_REQUEST = (
    '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: id must be a string or a number"}}'
)


def inbound(line: bytes | bytearray | None) -> SessionMessage | Exception | str | None:
    """One client line, parsed once: the message; the validation error the SDK's session expects for
    JSON that is not JSON-RPC; the error text to answer (id null, as the spec says) for a line that
    is not JSON or a request whose id is neither string nor number (the SDK would drop both without
    a word, and a client waiting on them would wait forever) or a line over the limit (None here);
    None for a blank line.

    Parsed with pydantic-core, then validated from the objects: the SDK's own path parses the line
    with pydantic and a check needs a second parse, which for a 50 MB argument is 50 MB more."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage
    from pydantic_core import from_json

    if line is None:
        return LINE_TOO_LONG
    if not line or line.isspace():  # (not strip(): that copies the line, 50 MB more for a 50 MB argument)
        return None
    try:
        message = loads_owned(line if isinstance(line, bytearray) else bytearray(line))
    except ValueError:
        try:  # not UTF-8: read it as the SDK did (replacement characters), then judge the JSON
            message = from_json(bytes(line).decode("utf-8", "replace")) if line else None
        except ValueError:
            return PARSE_ERROR
        if message is None:  # a large line is read with replacement characters already: not JSON
            return PARSE_ERROR
    if isinstance(message, dict) and "id" in message:
        rid = message["id"]
        if isinstance(rid, bool) or (not isinstance(rid, str | int | float) and rid is not None):
            return INVALID_REQUEST
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False))
    except Exception as exc:  # what the SDK's stdio reader hands its session for such a line
        return exc


class StdinLines:
    """stdin as async byte lines read by the event loop, so a shutdown never waits on a thread blocked
    in read(). Split by `framing.LineSplitter` (no copy of a line: StreamReader's readline holds a
    50 MB line twice); a line over the limit comes out as None, to be answered, not to end the server.
    At EOF an unterminated last line still counts, as readline would give it."""

    def __init__(
        self, reader: asyncio.StreamReader, on_lines: Callable[[list[bytearray | None]], None] | None = None
    ) -> None:
        self._reader = reader
        self._splitter = LineSplitter(MAX_LINE_BYTES)
        self._ready: collections.deque[bytearray | None] = collections.deque()
        self._eof = False
        self._on_lines = on_lines  # told of each chunk's lines as it is read, before any is handled

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> bytearray | None:
        while not self._ready:
            if self._eof:
                raise StopAsyncIteration
            chunk = await self._reader.read(READ_CHUNK)
            if chunk:
                lines = list(self._splitter.feed(chunk))
            else:
                self._eof = True
                last = self._splitter.rest()
                lines = [last] if last is None or last else []
            if self._on_lines is not None and lines:
                self._on_lines(lines)
            self._ready.extend(lines)
        return self._ready.popleft()


def _is_pipe(fd: int) -> bool:
    """Hosts talk over pipes (or sockets); a terminal or a file keeps the SDK's threaded defaults."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def _stdin() -> AsyncIterator[StdinLines | None]:
    """A loop-driven reader over a duplicate of fd 0; None when stdin is not a pipe, socket or terminal
    (a terminal is read on the loop too, so Ctrl-C in `coffer serve --standalone` is not stuck behind a
    thread blocked in read)."""
    if not (_is_pipe(0) or os.isatty(0)):
        yield None
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_CHUNK)  # only paces the pipe: lines are split by StdinLines
    pipe = os.fdopen(os.dup(0), "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except (ValueError, OSError):
        pipe.close()
        yield None
        return
    try:
        yield StdinLines(reader)
    finally:
        transport.close()


class StdoutWire:
    """Protocol lines out on the loop: no thread hop per message, and a message goes out as the bytes
    pydantic serialises it to (no str copy, no re-encoding: a 50 MB result is not held three times)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, message: JSONRPCMessage) -> None:
        await self.line(wire_bytes(message))

    async def write(self, text: str) -> None:  # the SDK transport's interface (stdin not a pipe)
        await self.line(text.removesuffix("\n"))

    async def flush(self) -> None:
        await self._writer.drain()

    async def line(self, data: bytes | str) -> None:
        for piece in framed(data.encode("utf-8") if isinstance(data, str) else data):
            self._writer.write(piece)  # paced: the transport never buffers a whole 50 MB copy
            await self._writer.drain()


@contextlib.asynccontextmanager
async def _stdout() -> AsyncIterator[StdoutWire | None]:
    """Protocol on a private duplicate of fd 1; fd 1 itself points at stderr meanwhile, so a stray
    print (ours or a library's) can never corrupt the wire. None when stdout is not a pipe or socket."""
    if not _is_pipe(1):
        yield None
        return
    sys.stdout.flush()
    original, wire = os.dup(1), os.dup(1)
    os.dup2(2, 1)
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire, "wb", buffering=0)
        )
    except (ValueError, OSError):
        os.dup2(original, 1)
        os.close(original)
        yield None
        return
    try:
        yield StdoutWire(asyncio.StreamWriter(transport, protocol, None, loop))
    finally:
        transport.close()
        os.dup2(original, 1)
        os.close(original)


@contextlib.asynccontextmanager
async def process_streams() -> AsyncIterator[Streams]:
    """This process's stdin and stdout as (read, write): loop-driven pipes where they are pipes or
    sockets (a host), the SDK's own transport for the side that is a terminal or a file (fd 1 is
    diverted to stderr meanwhile either way)."""
    async with _stdin() as lines, _stdout() as wire:
        if lines is None or wire is None:
            from mcp.server.stdio import stdio_server

            async with stdio_server(stdin=lines, stdout=wire) as streams:  # type: ignore[arg-type]
                yield streams
            return
        async with pipe_streams(lines, wire) as streams:
            yield streams


@contextlib.asynccontextmanager
async def pipe_streams(lines: AsyncIterator[bytearray | None], wire: StdoutWire) -> AsyncIterator[Streams]:
    """(read, write) over a line source and a sink: each line parsed once (`inbound`), a line that
    cannot be a message answered here, each answer written as bytes. The read stream ends with the
    lines; leaving the block stops both pumps."""
    from mcp.shared.message import SessionMessage

    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with read_send:
                async for line in lines:
                    message = inbound(line)
                    del line  # the bytes of a large line need not outlive their parse
                    if isinstance(message, str):
                        await wire.line(message)
                    elif message is not None:
                        await read_send.send(message)

    async def writer() -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with write_recv:
                async for outgoing in write_recv:
                    await wire.send(outgoing.message)
                    del outgoing  # not held while waiting for the next message

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_recv, write_send
        finally:
            tg.cancel_scope.cancel()
