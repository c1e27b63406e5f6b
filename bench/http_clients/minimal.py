"""The smallest MCP client that can call a tool: one kept-alive socket, hand-written HTTP/1.1, JSON
built and matched by hand. The same code reaches every gateway in bench_http_peers.py (a streamable
HTTP POST, or the older HTTP+SSE pair of a GET stream and POSTed messages that mcp-hub serves) and the
upstream directly over stdio, so what it measures is the gateway, not one SDK client transport being
dearer than another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

Call = Callable[[], Awaitable[None]]
VERSION = "2025-11-25"
_INIT = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench-minimal", "version": "1"}}


class Client:
    """`call()` makes one echo call and returns once its answer is in; `aclose()` ends it."""

    def __init__(self) -> None:
        self.call: Call = self._unset
        self._closers: list[Callable[[], Any]] = []
        self._next = 1

    async def _unset(self) -> None:
        raise RuntimeError("not connected")

    def request(self, method: str, params: dict[str, Any]) -> tuple[int, bytes]:
        self._next += 1
        return self._next, json.dumps({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}).encode()

    async def aclose(self) -> None:
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()


class _Http:
    """A kept-alive connection, opened again when the server has closed it (mcp-proxy and mcp-hub close
    one idle for 5 s), as an HTTP client's pool does."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        head = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{self.port}", "content-type: application/json"]
        head += [f"{k}: {v}" for k, v in headers.items()] + [f"content-length: {len(body)}", "", ""]
        if self.reader is None or self.writer is None or self.reader.at_eof():
            self.close()
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writer.write("\r\n".join(head).encode() + body)
        return await read_response(self.reader)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One whole response: a Content-Length body or every chunk (an SSE answer ends its stream)."""
    line = await reader.readline()
    if not line:
        raise ConnectionError("the server closed the connection")
    status = int(line.split()[1])
    headers = await _headers(reader)
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    body = b""
    while size := int((await reader.readline()).strip(), 16):
        body += await reader.readexactly(size)
        await reader.readline()
    await reader.readline()
    return status, headers, body


async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers


async def streamable(port: int, tool: str) -> Client:
    """A streamable HTTP session at /mcp: each call is one POST and its response."""
    client = Client()
    http = _Http(port)
    client._closers.append(http.close)
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": VERSION}
    _, body = client.request("initialize", _INIT)
    _, got, answer = await http.post("/mcp", body, headers)
    headers["mcp-session-id"] = got["mcp-session-id"]
    negotiated = re.search(rb'"protocolVersion":\s*"([^"]+)"', answer)  # (a JSON body or an SSE event)
    if negotiated is not None:
        headers["mcp-protocol-version"] = negotiated.group(1).decode()
    await http.post("/mcp", b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', headers)

    async def call() -> None:
        n, body = client.request("tools/call", {"name": tool, "arguments": {"text": "hi"}})
        status, _, answer = await http.post("/mcp", body, headers)
        if status != 200 or f'"id":{n}'.encode() not in answer.replace(b" ", b""):
            raise RuntimeError(f"no answer to call {n}: HTTP {status}")

    client.call = call
    return client


async def sse(port: int, tool: str, path: str = "/mcp") -> Client:
    """An HTTP+SSE session: the answers come on the GET stream, each call is POSTed to its endpoint."""
    client = Client()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client._closers.append(writer.close)
    writer.write(f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: text/event-stream\r\n\r\n".encode())
    await reader.readline()
    chunked = (await _headers(reader)).get("transfer-encoding") == "chunked"
    events: asyncio.Queue[bytes] = asyncio.Queue()

    async def read_events() -> None:
        buf = b""
        while True:
            if chunked:
                size = int((await reader.readline()).strip(), 16)
                buf += await reader.readexactly(size)
                await reader.readline()
            else:
                buf += await reader.read(65536)
            while b"\n\n" in buf:
                event, _, buf = buf.partition(b"\n\n")
                await events.put(event)

    task = asyncio.create_task(read_events())
    client._closers.append(task.cancel)
    found = re.search(rb"data: (\S+)", await events.get())
    if found is None:
        raise RuntimeError("the SSE stream named no endpoint")
    http = _Http(port)
    client._closers.append(http.close)
    endpoint = found.group(1).decode()

    async def exchange(n: int | None, body: bytes) -> None:
        status, _, _ = await http.post(endpoint, body, {})
        if status not in (200, 202):
            raise RuntimeError(f"POST answered HTTP {status}")
        while n is not None and f'"id":{n}'.encode() not in (await events.get()).replace(b" ", b""):
            pass

    await exchange(*client.request("initialize", _INIT))
    await exchange(None, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    async def call() -> None:
        await exchange(*client.request("tools/call", {"name": tool, "arguments": {"text": "hi"}}))

    client.call = call
    return client


async def stdio(argv: list[str], tool: str) -> Client:
    """The upstream itself, one JSON line each way: the baseline."""
    client = Client()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    client._closers.append(proc.kill)

    async def exchange(n: int, body: bytes) -> None:
        stdin.write(body + b"\n")
        while f'"id":{n}'.encode() not in (await stdout.readline()).replace(b" ", b""):
            pass

    await exchange(*client.request("initialize", _INIT))
    stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')

    async def call() -> None:
        await exchange(*client.request("tools/call", {"name": tool, "arguments": {"text": "hi"}}))

    client.call = call
    return client
