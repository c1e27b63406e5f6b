"""The pipe to one upstream: a process in its own group (stdio) or a streamable HTTP endpoint.

Why not the SDK's `stdio_client`: Coffer needs the child's pid to kill its whole process group
quickly at shutdown, a stderr that is drained continuously into a bounded tail (a full 64 KB pipe
hangs a child silently), and stdout lines that are not JSON-RPC dropped and counted instead of being
handed to the session. Only `coffer.upstreams.upstream` uses this module. For a gateway, the long
strings of a big tools/call result are decoded from the line into files rather than parsed
(`coffer.results.spill`), so that a 50 MB result costs the line and no second copy.

On Linux each stdio child also dies with the gateway, even on `kill -9` (when no shutdown code runs):
it is started under a small supervisor, `coffer.upstreams.reaper`, which the kernel tells when the
gateway dies (PR_SET_PDEATHSIG) and which is the subreaper of the server's whole tree, so escapees
that call `setsid` end too. Why a separate program: `anyio.open_process` has no `preexec_fn`, and
`preexec_fn` is documented as unsafe in a process with threads (the gateway has worker threads). The
parent-death signal is tied to the *thread* that forked the child; asyncio forks on the event-loop
thread, which lives as long as the pool that stops these children, so it never fires early.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from coffer.results import spill
from coffer.upstreams.direct import Lane
from coffer.upstreams.framing import BIG_LINE, MAX_LINE_BYTES, WRITE_BATCH, LineSplitter, lines, loads_owned
from coffer.upstreams.reaper import ARGV_ENV as REAPER_ARGV_ENV
from coffer.vault import shellenv

TAIL_BYTES = 8192
STDIN_GRACE_S = 1.0  # after stdin closes, before SIGTERM to the group
TERM_GRACE_S = 1.0  # after SIGTERM, before SIGKILL; the whole stop stays well under the 5 s budget
KILL_REAP_S = 1.0
_POLL_S = 0.01


@dataclass
class StreamStats:
    """What the upstream did on its pipes besides protocol: kept for errors and `coffer doctor`."""

    secrets: tuple[str, ...] = ()
    garbage_lines: int = 0
    garbage_sample: str = ""
    broken: str | None = None
    returncode: int | None = None
    http_status: int | None = None  # the last HTTP error status, for streamable HTTP upstreams
    fed: int = 0  # bytes of stderr ever fed: a mark, to read what came after it (`stderr_since`)
    _tail: bytearray = field(default_factory=bytearray)

    def feed_stderr(self, chunk: bytes) -> None:
        self.fed += len(chunk)
        self._tail += chunk
        if len(self._tail) > TAIL_BYTES:
            del self._tail[: len(self._tail) - TAIL_BYTES]

    def stderr_since(self, mark: int) -> str:
        """What it wrote to stderr after `mark` (a `fed` read before): a call's own complaints, for its hint."""
        new = min(self.fed - mark, len(self._tail))
        return self.scrub(self._tail[len(self._tail) - new :].decode("utf-8", "replace")) if new > 0 else ""

    def stderr_tail(self) -> str:
        return self.scrub(self._tail.decode("utf-8", "replace"))

    def last_stderr_line(self, width: int = 300) -> str:
        """The line of its stderr that says why it failed, with what follows it (coffer.upstreams.cause)."""
        from coffer.upstreams.cause import cause

        return cause(self.stderr_tail(), width)

    def scrub(self, text: str) -> str:
        """Mask the server's resolved env/header values: a tail is shown to users and agents."""
        for value in self.secrets:
            if len(value) >= 4:
                text = text.replace(value, "****")
        from coffer.trust.redact import scrub  # every value this process resolved, and its encoded forms

        return scrub(text)

    def note_garbage(self, line: bytes) -> None:
        self.garbage_lines += 1
        if not self.garbage_sample:
            self.garbage_sample = self.scrub(line[:120].decode("utf-8", "replace"))


def _parse(line: bytearray, calls: set[types.RequestId] | None = None) -> SessionMessage | None:
    """A message from one upstream line (emptied when large), or None for a line that is not JSON-RPC:
    parsed (`loads_owned`), then validated from the objects (validate_json straight from the bytes peaks
    at four times a long string's size). `calls`: the ids of the tools/call requests in flight, whose
    long result strings are decoded into files instead (coffer.results.spill); None: never."""
    tokens: list[str] = []
    if calls is not None and len(line) >= BIG_LINE:
        cut = _spill(line)
        if cut is not None:
            line, tokens = cut
    try:
        message = types.jsonrpc_message_adapter.validate_python(loads_owned(line), by_name=False)
    except ValueError:
        spill.forget(tokens)
        return None
    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and calls is not None:
        call = message.id in calls
        calls.discard(message.id)
    else:
        call = False
    if tokens:
        if isinstance(message, types.JSONRPCResponse):
            spill.settle(message.result, tokens, call)
        elif isinstance(message, types.JSONRPCError):
            message.error.data = spill.restore(message.error.data, set(tokens))
        else:
            spill.restore(message.params, set(tokens))
    return SessionMessage(message)


def _spill(line: bytearray) -> tuple[bytearray, list[str]] | None:
    """The line split by coffer.results.spill, or None (nothing to spill, or no store to spill into)."""
    from coffer.errors import CofferError
    from coffer.results import archive

    try:
        return spill.split(line, archive.directory())
    except (OSError, CofferError):
        return None


# The supervisor every stdio upstream runs under on Linux (a subreaper of the server's tree, told by the
# kernel when the gateway dies): coffer/upstreams/reaper.py, run by path with the standard library only.
REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
Confine = Callable[[list[str]], list[str]]  # the program's argv -> what runs it confined


def _dies_with_us(argv: list[str], cwd: str | None, env: dict[str, str], confine: Confine | None = None) -> list[str]:
    """`argv` behind the supervisor (coffer.upstreams.reaper) on Linux (its argv goes into `env`); as it is elsewhere.
    `confine`: what the supervisor runs instead of the program itself (coffer.upstreams.sandbox.wrap).

    Raises FileNotFoundError or PermissionError, as spawning the program directly would, since
    the supervisor itself always starts.
    """
    if sys.platform != "linux" or not sys.executable:
        return argv
    program = argv[0] if os.path.isabs(argv[0]) else os.path.join(cwd or os.getcwd(), argv[0])
    mode = os.stat(program).st_mode  # FileNotFoundError, as Popen would raise
    if stat.S_ISDIR(mode) or not os.access(program, os.X_OK):
        raise PermissionError(13, "Permission denied", program)
    full = [program, *argv[1:]]
    env[REAPER_ARGV_ENV] = json.dumps(confine(full) if confine is not None else full)
    return [sys.executable, "-I", "-S", REAPER, str(os.getpid())]


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _exited(process: anyio.abc.Process, timeout: float) -> bool:
    """Poll the returncode (not `wait()`: a grandchild holding the pipes makes a dead leader look alive)."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(_POLL_S)
    return process.returncode is not None


async def stop_process_group(process: anyio.abc.Process) -> None:
    """Close stdin, then SIGTERM and SIGKILL the whole group; bounded to about 3 s in the worst case."""
    pgid = process.pid  # start_new_session=True: the leader's pid is the group id
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    if not await _exited(process, STDIN_GRACE_S):
        _killpg(pgid, signal.SIGTERM)
        await _exited(process, TERM_GRACE_S)
    # Always sweep the group: children of a leader that exited cleanly would otherwise live on.
    _killpg(pgid, signal.SIGKILL)
    await _exited(process, KILL_REAP_S)


@asynccontextmanager
async def stdio_pipe(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    stats: StreamStats,
    on_exit: Callable[[], None],
    pids: set[int] | None = None,
    spill_calls: bool = False,
    lane: Lane | None = None,
    confine: Confine | None = None,
) -> AsyncIterator[tuple[ObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]]:
    """Spawn `argv` in a new session and yield the (read, write) streams a `ClientSession` takes.

    Raises OSError (FileNotFoundError, PermissionError) when the program cannot be started.
    `on_exit` runs once the child's stdout ends (it exited or closed stdout). `spill_calls`: long
    strings of tools/call results are decoded into files (coffer.results.spill), for a gateway that
    claims them (coffer.gateway.bigresults) before anything else sees the result. `lane`: opened on
    this pipe, it takes the answers to its own requests out of what the session reads
    (coffer.upstreams.direct). `confine`: the program runs confined (coffer.upstreams.sandbox), under
    the supervisor.
    """
    calls: set[types.RequestId] | None = set() if spill_calls else None
    env = dict(env)
    process = await anyio.open_process(
        _dies_with_us(argv, cwd, env, confine),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    if pids is not None:
        pids.add(process.pid)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    if lane is not None:
        lane.open(write_send)

    async def read_stdout() -> None:
        """Split stdout into lines in linear time (each chunk is searched once), and end the session at
        once when one line outgrows `MAX_LINE_BYTES`: its pending requests fail now, with that reason."""
        assert process.stdout is not None
        splitter = LineSplitter(MAX_LINE_BYTES)
        try:
            async for chunk in process.stdout:
                too_long = False
                for line in splitter.feed(chunk):
                    if line is None:
                        too_long = True
                        break
                    if not line or line.isspace():  # (not strip(): a copy of a 50 MB line is 50 MB more)
                        continue
                    head = bytes(line[:120])  # what a garbage line is reported by (a large one is emptied)
                    message = _parse(line, calls)
                    if message is None:
                        stats.note_garbage(head)  # banners, warnings: never fatal
                        continue
                    del line  # parsed from the splitter's own buffer: not held while the message waits
                    await read_send.send(message)
                if too_long or splitter.overflowing:
                    stats.broken = f"a stdout frame exceeded {MAX_LINE_BYTES // (1024 * 1024)} MB"
                    return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            on_exit()  # before the session sees EOF, so nobody reuses a dead session
            read_send.close()
            if lane is not None:
                lane.close()

    async def drain_stderr() -> None:
        assert process.stderr is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in process.stderr:
                stats.feed_stderr(chunk)

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for first in write_recv:
                    # what else is queued goes in the same write (concurrent calls: one wake-up of the child)
                    batch = [first]
                    with contextlib.suppress(anyio.WouldBlock):
                        while len(batch) < WRITE_BATCH:
                            batch.append(write_recv.receive_nowait())
                    for line in lines(batch, calls):
                        await process.stdin.send(line)  # type: ignore[arg-type]  # anyio writes any buffer
                        del line  # a big message's last slice is not held while waiting for the next
                    del first, batch
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_send.aclose()
            return
        with contextlib.suppress(Exception):
            await process.stdin.aclose()  # our side is done writing: the child sees EOF, as the spec asks

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(drain_stderr)
        tg.start_soon(write_stdin)
        try:
            yield (read_recv if lane is None else lane.reader(read_recv)), write_send
        finally:
            with anyio.CancelScope(shield=True):
                write_send.close()
                read_recv.close()
                if lane is not None:
                    lane.close()
                await stop_process_group(process)
                stats.returncode = process.returncode
                if pids is not None:
                    pids.discard(process.pid)
            tg.cancel_scope.cancel()


@asynccontextmanager
async def http_pipe(
    url: str, headers: dict[str, str], stats: StreamStats, auth: Any = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams of a streamable HTTP upstream; HTTP error statuses land in `stats`.

    The SDK turns an HTTP 401 into a generic JSON-RPC error, so the status is caught here, where a
    failure a retry cannot fix (401/403) can still be told apart.
    """
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def on_response(response: Any) -> None:
        if response.status_code >= 400:
            stats.http_status = response.status_code

    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(
            headers=headers, timeout=timeout, auth=auth, event_hooks={"response": [on_response]}
        ) as http,
        streamable_http_client(url, http_client=http) as (read, write),
    ):
        yield read, write


# Beyond the SDK's safe basics: what launchers such as uvx and npx need to reach their registries
# (CA bundles and proxies in managed networks), caches, locale and temp dirs. Never anything else. Under
# the engine, the certificates, proxies, locale and PATH are the user's shell's as `coffer` commands
# recorded them, else the first session's that has them (coffer.vault.shellenv, coffer.engine.daemon).
INHERITED_ENV = (
    *("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR"),
    *("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"),
    *shellenv.CERTIFICATES,
    *shellenv.PROXIES,
)


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """A minimal environment: the basics above from ours, plus exactly what the registry declares."""
    env = {k: v for k in INHERITED_ENV if (v := os.environ.get(k)) is not None and not v.startswith("()")}
    env.update(extra)
    return env
