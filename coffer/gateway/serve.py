"""`coffer serve` as a process: stdio (or loopback HTTP) transport, signals, and an orphan-free exit.

The host owns our stdin/stdout; stdout carries only protocol (the SDK diverts fd 1 to stderr while
serving), and our logs go to stderr. The process ends when stdin closes or on SIGTERM/SIGINT/SIGHUP,
and every upstream process group is gone before it does (each stop is bounded to a few seconds).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import anyio

from coffer.gateway.framing import MAX_LINE_BYTES, LineSplitter, framed, wire_bytes
from coffer.gateway.server import Gateway

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCMessage

log = logging.getLogger("coffer.serve")
READ_CHUNK = 1024 * 1024
HOST_WAIT_S = 2.0  # an upstream's handshake waits at most this long for the host's (normally instant)
# An idle kept-alive connection is closed by the client, not by us: uvicorn's default (5 s) equals httpx's
# pool expiry, and a call made 5 s after the last one raced the close and lost (ReadError), which ends
# the MCP SDK client's whole session. Longer than httpx (5 s), undici (4 s), aiohttp (15 s) and Go (90 s).
KEEP_ALIVE_S = 120


PARSE_ERROR = '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON"}}'
LINE_TOO_LONG = (
    '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is over the 64 MB limit"}}'
)
INVALID_REQUEST = (
    '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: id must be a string or a number"}}'
)


def _inbound(line: bytes | bytearray | None) -> SessionMessage | Exception | str | None:
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

    from coffer.gateway.framing import loads_owned

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


class _StdinLines:
    """stdin as async byte lines read by the event loop, so a shutdown never waits on a thread blocked
    in read(). Split by `framing.LineSplitter` (no copy of a line: StreamReader's readline holds a
    50 MB line twice); a line over the limit comes out as None, to be answered, not to end the server.
    At EOF an unterminated last line still counts, as readline would give it."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._splitter = LineSplitter(MAX_LINE_BYTES)
        self._ready: collections.deque[bytearray | None] = collections.deque()
        self._eof = False

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> bytearray | None:
        while not self._ready:
            if self._eof:
                raise StopAsyncIteration
            chunk = await self._reader.read(READ_CHUNK)
            if chunk:
                self._ready.extend(self._splitter.feed(chunk))
            else:
                self._eof = True
                last = self._splitter.rest()
                if last is None or last:
                    self._ready.append(last)
        return self._ready.popleft()


def _is_pipe(fd: int) -> bool:
    """Hosts talk over pipes (or sockets); a terminal or a file keeps the SDK's threaded defaults."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def _stdin() -> AsyncIterator[_StdinLines | None]:
    """A loop-driven reader over a duplicate of fd 0; None when stdin is not a pipe or socket."""
    if not _is_pipe(0):
        yield None
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_CHUNK)  # only paces the pipe: lines are split by _StdinLines
    pipe = os.fdopen(os.dup(0), "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except (ValueError, OSError):
        pipe.close()
        yield None
        return
    try:
        yield _StdinLines(reader)
    finally:
        transport.close()


class _StdoutWire:
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
async def _stdout() -> AsyncIterator[_StdoutWire | None]:
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
        yield _StdoutWire(asyncio.StreamWriter(transport, protocol, None, loop))
    finally:
        transport.close()
        os.dup2(original, 1)
        os.close(original)


def _setup_logging() -> None:
    from coffer.trust.redact import RedactingFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("coffer: %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())  # resolved secret/env values never reach the log
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)


async def _watch_signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _serve_stdio(gateway: Gateway) -> None:
    async with _stdin() as lines, _stdout() as wire:
        if lines is None or wire is None:  # a terminal or a file on one side: the SDK's transport, on our
            from mcp.server.stdio import stdio_server  # pipe for the side that is one (fd 1 is diverted)

            async with stdio_server(stdin=lines, stdout=wire) as (read, write):  # type: ignore[arg-type]
                await gateway.server.run(read, write, gateway.initialization_options())
            return
        await _serve_pipes(gateway, lines, wire)


async def _serve_pipes(gateway: Gateway, lines: _StdinLines, wire: _StdoutWire) -> None:
    """The stdio transport over loop-driven pipes: each line parsed once (`_inbound`), each answer
    written as bytes; ends when stdin closes."""
    from mcp.shared.message import SessionMessage

    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with read_send:
                async for line in lines:
                    message = _inbound(line)
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
        await gateway.server.run(read_recv, write_send, gateway.initialization_options())
        tg.cancel_scope.cancel()


def _listen(port: int) -> socket.socket:
    """Bind the loopback port before anything starts, so a port in use is one clear error, not a half start."""
    from coffer.loopback import tcp_listener

    return tcp_listener(port)


def _guarded(app: Any, token: str) -> Any:
    """Every HTTP request must carry `Authorization: Bearer <token>` (coffer.trust.http_token)."""
    from coffer.trust.http_token import authorised

    body = b'{"error": "unauthorized", "error_description": "send Authorization: Bearer <coffer http token>"}'

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not authorised(dict(scope["headers"]).get(b"authorization", b""), token):
            headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="coffer"')]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return guarded


def _versioned(app: Any) -> Any:
    """A request whose `MCP-Protocol-Version` header names no revision Coffer speaks gets 400 with that
    said (the SDK would take it for a 2026-07-28 request and complain about missing `_meta` keys)."""
    import json

    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    async def versioned(scope: Any, receive: Any, send: Any) -> None:
        version = dict(scope["headers"]).get(b"mcp-protocol-version") if scope["type"] == "http" else None
        if version is not None and version.decode("latin-1").strip() not in SUPPORTED_PROTOCOL_VERSIONS:
            shown = version.decode("latin-1")[:40]
            message = (
                f"Bad Request: unsupported MCP-Protocol-Version {shown!r}; "
                f"coffer speaks {', '.join(SUPPORTED_PROTOCOL_VERSIONS)}"
            )
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
            await send(
                {"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": json.dumps(error).encode()})
            return
        await app(scope, receive, send)

    return versioned


def http_server(gateway: Gateway, token: str | None, quiet: bool = False) -> Any:
    """A uvicorn server for the gateway's streamable HTTP app (bearer-guarded unless `token` is None);
    `quiet`: it leaves signals to its process (the engine runs several, one per `serve --http`)."""
    import uvicorn

    from coffer.gateway.sdk import streamable_http_app

    # Host and Origin checks stay on; an answer with nothing before it goes out as JSON (httpshape)
    app = _versioned(streamable_http_app(gateway.server))
    if token is not None:
        app = _guarded(app, token)
    # httptools (a dependency) parses HTTP in C: measured 0.5-1 ms less per call than h11 (bench --http)
    # in the engine, a `serve --http` that ends must not wait on a client's open event stream for ever
    # no proxy headers: loopback only, and one middleware less on every request
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        http="auto",
        proxy_headers=False,
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=2 if quiet else None,
    )

    class Quiet(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Quiet(config) if quiet else uvicorn.Server(config)


def serving_line(port: int, token: bool) -> str:
    how = "bearer token required (coffer paths: http_token)" if token else "no authentication (--no-auth)"
    return f"coffer: serving MCP on http://127.0.0.1:{port}/mcp, {how}\n"


async def _serve_http(gateway: Gateway, sock: socket.socket, token: str | None) -> None:
    port = sock.getsockname()[1]
    server = http_server(gateway, token)
    # uvicorn re-raises the signal it caught once it has stopped; with a no-op handler in place that
    # re-raise cannot kill us before the upstreams are stopped.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    sys.stderr.write(serving_line(port, token is not None))
    await server.serve(sockets=[sock])


async def _main(http_sock: socket.socket | None, profile: str | None = None, token: str | None = None) -> None:
    from coffer.log.calls import CallLog

    calllog = CallLog.open()
    # stdio has one host: upstreams are told what it can take; HTTP hosts come and go (coffer.gateway.relay)
    gateway = Gateway(calllog=calllog, host_wait=HOST_WAIT_S if http_sock is None else None, profile=profile)
    try:
        async with gateway.running(), anyio.create_task_group() as tg:
            if http_sock is None:
                tg.start_soon(_watch_signals, tg.cancel_scope)
                await _serve_stdio(gateway)
            else:
                await _serve_http(gateway, http_sock, token)
            tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(calllog.close)


def run(http_port: int | None = None, profile: str | None = None, auth: bool = True) -> None:
    """Serve until stdin closes or a signal arrives, then exit the process (never returns).

    Raises CofferError before anything starts when the HTTP port cannot be bound.
    """
    sock = None if http_port is None else _listen(http_port)
    token = None
    if sock is not None and auth:
        from coffer.trust.http_token import serve_token

        token = serve_token()
    _setup_logging()
    code = 0
    try:
        anyio.run(_main, sock, profile, token)
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # report, then still exit without leaving threads behind
        log.error("coffer serve stopped: %s", _describe(exc))
        code = 1
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    # Worker threads (a ranker build, a blocked read) must not keep a dead server alive.
    os._exit(code)


def _describe(exc: BaseException) -> Any:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
