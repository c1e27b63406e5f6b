"""The filtering proxy behind a confined upstream whose policy names hosts (`network = ["api.github.com"]`).

It listens on a Unix socket in the upstream's private temporary directory, which the sandbox binds in;
inside, coffer.upstreams.netgate carries the server's proxy connections to it, and nothing else leaves
the server's network namespace. It speaks what HTTP clients send to a proxy: `CONNECT host:port` (HTTPS
and anything tunnelled) and absolute-form requests (`GET http://host/path`, plain HTTP). A host is
allowed when the policy names it (`*.example.com`: its subdomains), on ports 443 and 80 unless the entry
names a port; anything else gets 403 and is remembered, so the server's last error names the host.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc

log = logging.getLogger("coffer.egress")
HEAD_LIMIT = 16384
CONNECT_TIMEOUT_S = 15.0
DEFAULT_PORTS = (443, 80)


def allowed(hosts: tuple[str, ...], host: str, port: int) -> bool:
    """Whether `host:port` is one the policy names (`*.x.com` covers its subdomains, not x.com itself)."""
    host = host.lower().rstrip(".")
    for entry in hosts:
        name, _, want = entry.partition(":")
        ports = (int(want),) if want else DEFAULT_PORTS
        if port not in ports:
            continue
        if name == host or (name.startswith("*.") and host.endswith(name[1:])):
            return True
    return False


def target(head: bytes) -> tuple[str, str, int, bytes] | None:
    """(method, host, port, the head to send on) of a proxy request; None when it is not one."""
    line, _, rest = head.partition(b"\r\n")
    parts = line.decode("latin-1").split()
    if len(parts) != 3:
        return None
    method, where, version = parts
    if method == "CONNECT":
        host, _, port = where.rpartition(":")
        return (method, host.strip("[]"), int(port), b"") if port.isdigit() else None
    if not where.startswith("http://"):
        return None
    authority, _, path = where[len("http://") :].partition("/")
    host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "80")
    if not port.isdigit():
        return None
    origin = f"{method} /{path} {version}".encode("latin-1")
    return method, host, int(port), origin + b"\r\n" + rest


async def _pump(src: anyio.abc.ByteStream, dst: anyio.abc.ByteStream) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        async for chunk in src:
            await dst.send(chunk)
    with contextlib.suppress(Exception):
        await dst.send_eof()


async def _handle(client: anyio.abc.ByteStream, hosts: tuple[str, ...], denied: Callable[[str], None]) -> None:
    async with client:
        head = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
                head += await client.receive()
        wanted = target(head) if b"\r\n\r\n" in head else None
        if wanted is None:
            await _answer(client, 400, "coffer: not a proxy request")
            return
        method, host, port, forward = wanted
        if not allowed(hosts, host, port):
            denied(f"{host}:{port}")
            await _answer(client, 403, f"coffer: {host}:{port} is not among this server's allowed hosts")
            return
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_S):
                upstream = await anyio.connect_tcp(host, port)
        except (OSError, TimeoutError) as exc:
            await _answer(client, 502, f"coffer: cannot reach {host}:{port}: {exc}")
            return
        async with upstream:
            if method == "CONNECT":
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                await upstream.send(forward)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pump, upstream, client)
                await _pump(client, upstream)


async def _answer(client: anyio.abc.ByteStream, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = text.encode()
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with contextlib.suppress(Exception):
        await client.send(head.encode() + body)


@asynccontextmanager
async def filtering_proxy(path: str, hosts: tuple[str, ...], denied: Callable[[str], None]) -> AsyncIterator[None]:
    """Serve the proxy on the Unix socket `path` for as long as the block runs."""
    listener = await anyio.create_unix_listener(path)
    async with listener, anyio.create_task_group() as tg:

        async def serve() -> None:
            async def handle(client: anyio.abc.ByteStream) -> None:
                await _handle(client, hosts, denied)

            await listener.serve(handle)

        tg.start_soon(serve)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()
