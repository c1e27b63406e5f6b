"""The engine process: one gateway, every upstream once, one MCP session per connected front.

Run as `python -m coffer.engine.daemon` (the front starts it detached). Each connection on the socket
starts with one JSON line saying what it is: `{"coffer": "front", "profile": ...}` is followed by the
host's MCP stream, served like `coffer serve`'s stdio (each message parsed once, answers written as
bytes); `{"coffer": "status"}` gets one JSON line back (`coffer status`); `{"coffer": "stop"}` ends
the engine. A connection from another user is closed at once (`SO_PEERCRED`). The engine exits after
`COFFER_ENGINE_IDLE` seconds with no session (0: when the last one ends), on SIGTERM/SIGINT, or when
told to stop; every upstream stops with it (a `kill -9` included: coffer.upstreams.reaper).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from coffer.engine import handed, handover, place, report
from coffer.engine.hosting import setup_logging
from coffer.gateway import http, sessions, stdio
from coffer.gateway.server import Gateway
from coffer.gateway.sessions import HostSession
from coffer.vault import shellenv

log = logging.getLogger("coffer.engine")
HEADER_LIMIT = 65536  # the socket's line limit: a front's hello carries the values of the vault's variables
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FIRST_SESSION_GRACE_S = 10.0  # a new engine waits this long for the front that started it, whatever the idle


@dataclass(eq=False)
class Session(HostSession):
    """One connected front: what its handlers see (a `HostSession`: its profile, its own pool, its
    tasks), and what `coffer status` shows."""

    pid: int | None = None
    since: float = field(default_factory=time.time)
    port: int | None = None  # a `serve --http` front: the port this engine listens on for it


class Engine:
    def __init__(self, gateway: Gateway, idle_s: float) -> None:
        self.gateway = gateway
        self.idle_s = idle_s
        self.sessions: dict[int, Session] = {}
        self.started = time.time()
        self.changed = anyio.Event()
        self.stop = anyio.Event()
        self._ids = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._shell_stamp: tuple[int, int] | None = None  # the shell recording last taken (coffer.vault.shellenv)
        self._shell: dict[str, str] = {}  # its values

    def _touch(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def take(self, conn: socket.socket) -> None:
        """A new connection: its first byte read alone (with the host's fds, from a front handing them
        over: coffer.engine.handover), the rest as a stream."""
        fds: list[int] = []
        try:
            if _peer_uid(conn) != os.getuid():
                return
            first, fds = await handover.first_byte(conn)
            if not first:
                return
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader()
            if first != handed.HANDING:
                reader.feed_data(first)  # a hello's first byte, before the transport reads the rest
            transport, protocol = await loop.connect_accepted_socket(lambda: asyncio.StreamReaderProtocol(reader), conn)
            conn = None  # type: ignore[assignment]  # the transport's now
            taken, fds = fds, []
            await self.handle(reader, asyncio.StreamWriter(transport, protocol, reader, loop), taken)
        finally:
            for fd in fds:
                os.close(fd)
            if conn is not None:
                conn.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fds: list[int]) -> None:
        self._writers.add(writer)
        try:
            try:
                header = await reader.readline()
            except ValueError:  # a line over the stream's limit
                return
            if len(header) > HEADER_LIMIT or not header.endswith(b"\n"):
                return
            try:
                hello = json.loads(header)
            except ValueError:
                return
            kind = hello.get("coffer") if isinstance(hello, dict) else None
            if kind == "status":
                writer.write(json.dumps(self.status()).encode() + b"\n")
                await writer.drain()
            elif kind == "env":
                writer.write(json.dumps(self.adopt_env(hello.get("env"))).encode() + b"\n")
                await writer.drain()
            elif kind == "stop":
                self.stop.set()
            elif kind == "front" and fds:
                taken, fds = fds, []
                await self._serve_handed(hello, taken, reader, writer)
            elif kind == "front":
                await self._serve(hello, reader, writer)
            elif kind == "http":
                await self._serve_http(hello, reader, writer)
        finally:
            for fd in fds:  # handed over by what turned out not to be a front's hello
                os.close(fd)
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    def close_all(self) -> None:
        """End every connection (the engine is stopping): each front sees its engine go and reattaches."""
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.close()

    @contextlib.asynccontextmanager
    async def _session(
        self, hello: dict[str, Any], port: int | None = None, one_host: bool = True
    ) -> AsyncIterator[Session]:
        """One front's session for its duration: listed for `coffer status`, current for its handlers
        (`sessions.serving`: its profile, its tasks), its own per-session servers (`Pool.session`); its
        tasks are cancelled when it ends, since nobody can collect them then."""
        self._ids += 1
        key = self._ids
        profile = hello.get("profile") if isinstance(hello.get("profile"), str) else None
        pid = hello.get("pid") if isinstance(hello.get("pid"), int) else None
        session = self.sessions[key] = Session(profile=profile, pid=pid, port=port)
        self._touch()
        try:
            with sessions.serving(session):
                async with self.gateway.pool.session(one_host) as own:  # servers it runs for itself
                    session.pool = own
                    yield session
        finally:
            del self.sessions[key]
            self._touch()
            await self.gateway.tasks.session_ended(session)

    async def _serve(self, hello: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            lines, wire = stdio.StdinLines(reader), stdio.StdoutWire(writer)
            async with self._session(hello), stdio.pipe_streams(lines, wire) as (read, write):
                await self.gateway.serve(read, write)

    async def _serve_handed(
        self, hello: dict[str, Any], fds: list[int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """A front that handed over its host's stdin and stdout: served from them directly, the front told
        what it must know (coffer.engine.handover). The session ends with the host's stdin (the front is
        told) or with the front's socket (Ctrl-C, a kill: the host's fds are let go)."""
        notes = handover.Notes(writer)
        ended = False
        with contextlib.suppress(ConnectionError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            async with (
                handover.host_streams(fds, hello, notes) as (lines, wire),
                self._session(hello),
                stdio.pipe_streams(lines, wire) as (read, write),
                anyio.create_task_group() as tg,
            ):

                async def front_gone() -> None:
                    with contextlib.suppress(ConnectionError):
                        while await reader.read(4096):
                            pass
                    tg.cancel_scope.cancel()

                tg.start_soon(front_gone)
                await self.gateway.serve(read, write)
                ended = lines.ended
                tg.cancel_scope.cancel()
        if ended:
            notes.say(handed.ENDED)
            with contextlib.suppress(Exception):
                await writer.drain()

    async def _serve_http(
        self, hello: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """`coffer serve --http`: this engine listens on the port for as long as that front is connected.
        The answer is one JSON line: `{"port": N}` once listening, or `{"error": ..., "code": ...}`."""
        from coffer.errors import CofferError
        from coffer.loopback import tcp_listener

        port = hello.get("port")
        try:
            if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536:
                raise CofferError(f"invalid port {port!r}")
            sock = tcp_listener(port)
        except CofferError as exc:
            writer.write(json.dumps({"error": str(exc), "code": exc.exit_code}).encode() + b"\n")
            await writer.drain()
            return
        token = None
        if hello.get("auth", True) is not False:
            from coffer.trust.http_token import serve_token

            token = await anyio.to_thread.run_sync(serve_token)
        server = http.server(self.gateway, token, quiet=True)
        try:
            async with (
                self._session(hello, sock.getsockname()[1], one_host=False) as session,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(server.serve, [sock])  # its tasks inherit this session's profile and pool
                while not server.started and not server.should_exit:
                    await anyio.sleep(0.01)
                writer.write(json.dumps({"port": session.port}).encode() + b"\n")
                await writer.drain()
                with contextlib.suppress(ConnectionError):
                    while await reader.read(4096):  # the front says nothing more: EOF is its going
                        pass
                server.should_exit = True
                for listening in server.servers:  # now, not at uvicorn's next check: a new front may want
                    listening.close()  # the port, and a client must not open a session on a server going away
        finally:
            sock.close()

    def take_shell_env(self) -> list[str]:
        """Take the runtime variables the user's own shell gave `coffer` commands (coffer.vault.shellenv)
        over what the session that started this engine had: at start, and again whenever they were recorded
        anew. The names whose value changed; servers that were down start again. Values are never logged."""
        stamp = shellenv.stamp()
        if stamp == self._shell_stamp:
            return []
        self._shell_stamp, self._shell = stamp, shellenv.recorded()
        took = shellenv.adopt(os.environ, self._shell)
        if took:
            self.gateway.pool.retry_down()
        return took

    def adopt_env(self, env: object) -> dict[str, list[str]]:
        """The rule for `${VAR}` and a runtime's variables (certificates, proxies, locale): the user's shell's
        as recorded come first (`take_shell_env`); one the engine still lacks is taken from the first session
        that has it, and PATH gains the entries it lacks, so the engine's environment is the user's, else the
        fullest its sessions gave; servers that are down start again. One it has with another value keeps the
        engine's. Answered: the names that differ (for that session to be told; `from_shell`: of those, the
        ones whose value is the shell's) and those taken from the shell's recording now (`shell`). Values are
        never logged."""
        took = self.take_shell_env()
        differs, adopted = [], False
        for name, value in env.items() if isinstance(env, dict) else ():
            if not isinstance(name, str) or not isinstance(value, str) or not ENV_NAME.match(name):
                continue
            held = os.environ.get(name)
            if name == "PATH" and held is not None:  # a runtime on any session's PATH is found
                wider = shellenv.path_union(held, value)
                adopted |= wider != held
                os.environ[name] = wider
            elif held is None and name not in place.STARTUP_ENV:
                os.environ[name] = value
                adopted = True
            elif held != value:
                differs.append(name)
        if adopted:  # what failed for want of it may start now: a missing variable, a certificate, a runtime
            self.gateway.pool.retry_down()
        from_shell = [n for n in differs if n != "PATH" and self._shell.get(n) == os.environ.get(n)]
        return {"differs": sorted(differs), "shell": took, "from_shell": sorted(from_shell)}

    def status(self) -> dict[str, Any]:
        """What `coffer status` shows (coffer.engine.report)."""
        return report.status(self.gateway, self.sessions.values(), self.started)

    async def watch_idle(self) -> None:
        """Stop after `idle_s` seconds in a row without a session (a new engine first waits for the
        front that started it)."""
        first = True
        while not self.stop.is_set():
            changed = self.changed
            if self.sessions:
                first = False
                await changed.wait()
                continue
            with anyio.move_on_after(max(self.idle_s, FIRST_SESSION_GRACE_S) if first else self.idle_s):
                await changed.wait()
            if not self.sessions and not changed.is_set():
                self.stop.set()


def _peer_uid(sock: socket.socket | None) -> int | None:
    """The connecting process's uid (Linux `SO_PEERCRED`); None where that cannot be read."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return os.getuid() if sock is not None else None  # elsewhere the socket's 0600 mode is the guard
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return int(uid)


async def _main() -> None:
    from coffer.log.calls import CallLog

    path = place.socket_path()
    calllog = CallLog.open()
    gateway = Gateway(calllog=calllog, host_wait=None, sessions=True)  # many hosts: each request decided alone
    engine = Engine(gateway, place.idle_seconds())
    engine.take_shell_env()  # before any server starts: the user's certificates, not the first agent's lack of them
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a socket left by an engine that was killed (the lock says nobody else is starting)
    server: socket.socket | None = None
    ours = -1

    def unlisten() -> None:
        """Stop taking fronts first (a new one starts a new engine), then end the sessions."""
        if server is None:
            return
        server.close()
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_ino == ours:  # not a newer engine's socket
                path.unlink()
        engine.close_all()

    try:
        async with gateway.running(), anyio.create_task_group() as tg:
            # Fronts are taken only once the gateway runs: a restarted engine's front replays its host's
            # handshake the moment it connects, and a session must not begin before the pool and the
            # catalogue it is served from exist.
            old = os.umask(0o177)
            try:
                server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                server.bind(str(path))
                server.listen(128)
                server.setblocking(False)
            finally:
                os.umask(old)
            os.chmod(path, 0o600)
            ours = path.stat().st_ino
            tg.start_soon(_accept, server, engine, tg)
            tg.start_soon(engine.watch_idle)
            tg.start_soon(_watch_signals, engine.stop)
            await engine.stop.wait()
            unlisten()
            tg.cancel_scope.cancel()
    finally:
        unlisten()
        await anyio.to_thread.run_sync(calllog.close)


async def _accept(server: socket.socket, engine: Engine, tg: Any) -> None:
    """Take connections until the socket is closed, each in a task of its own."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError):
        while True:
            conn, _ = await loop.sock_accept(server)
            conn.setblocking(False)
            tg.start_soon(engine.take, conn)


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            stop.set()
            return


def main() -> None:
    if os.fork() > 0:  # detach: the front that started us waits for the socket, not for this process
        os._exit(0)
    setup_logging()
    code = 0
    try:
        anyio.run(_main)
    except KeyboardInterrupt:
        pass
    except BaseException as exc:
        log.error("the engine stopped: %s: %s", type(exc).__name__, exc)
        code = 1
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)  # worker threads must not keep a stopped engine alive


if __name__ == "__main__":
    main()
