"""Upstreams: one long-lived MCP session per registered server (the pool in `coffer.gateway.pool` runs them).

The only module that talks to upstream servers. Each upstream runs in a supervisor task: spawn (or
connect over streamable HTTP), the legacy `initialize` handshake (list_changed notifications and
server-to-client requests do not flow on 2026-07-28 connections), a full listing, then it waits
until the process exits or the pool stops it. A crash, hang or exit marks only that upstream down;
the next call restarts it, with capped exponential backoff so a crash loop cannot spawn hundreds of
times an hour, and never automatically for failures a retry cannot fix (missing program, permission,
unset secret, HTTP 401/403).
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from enum import StrEnum
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.client.extension import NotificationBinding
from pydantic import TypeAdapter

from coffer import __version__
from coffer.errors import UpstreamError
from coffer.telemetry import otlp
from coffer.trust import oauth_store
from coffer.trust.exchange import Exchanger
from coffer.trust.expand import resolved_env, resolved_headers
from coffer.upstreams import denials, egress, oauth, outbound, sandbox
from coffer.upstreams.direct import Lane
from coffer.upstreams.discover import list_kinds
from coffer.upstreams.faults import BACKOFF_CAP_S as BACKOFF_CAP_S  # re-exported for callers and tests
from coffer.upstreams.faults import Exited, describe, http_status, leaf
from coffer.upstreams.faults import backoff as backoff
from coffer.upstreams.gate import StartGate
from coffer.upstreams.transport import StreamStats, child_env, http_pipe, stdio_pipe
from coffer.vault.catalogue import KINDS, Listing
from coffer.vault.registry import ServerConfig


class Supervisor(Protocol):
    """What an upstream needs from the pool that runs it (`coffer.gateway.pool.Pool`)."""

    gate: StartGate
    slot_hold: float
    pids: set[int]
    spill_results: bool  # long tools/call result strings go to files (its owner claims them: bigresults)
    member: str | None  # the team member it runs for (its secrets and home: coffer.trust.member_secrets)
    exchanger: Exchanger | None  # a team gateway's: members' tokens traded for `exchange` servers' (RFC 8693)

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None: ...

    async def client_options(self, name: str) -> dict[str, Any]: ...

    def listed(self, upstream: Upstream, kinds: frozenset[str]) -> None: ...

    def resource_updated(self, upstream: Upstream, params: Any) -> None: ...

    def notice(self, upstream: Upstream, notification: Any) -> None: ...

    async def prepare(self, upstream: Upstream, session: ClientSession) -> None: ...


HEALTHY_RESET_S = 30.0  # a session that served this long forgets earlier failures (it works, between crashes)
START_SLACK_S = 2.0  # spawn and listing time on top of an initialize that may take the whole timeout
CLIENT_INFO = types.Implementation(name="coffer", version=__version__)
_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
_TOLD = (
    ("sampling", "sampling_callback"),
    ("elicitation", "elicitation_callback"),
    ("roots", "list_roots_callback"),
    ("extensions", "extensions"),
)
_CHANGED: dict[type[Any], str] = {
    types.ToolListChangedNotification: "tools",
    types.PromptListChangedNotification: "prompts",
    types.ResourceListChangedNotification: "resources",
}


class _Mirror(set[int]):
    """The pids of one upstream's processes, kept in the pool's set too (its stop and `coffer status`)."""

    def __init__(self, *others: set[int]) -> None:
        super().__init__()
        self._others = others

    def add(self, pid: int) -> None:
        for other in self._others:
            other.add(pid)

    def discard(self, pid: object) -> None:
        for other in self._others:
            other.discard(pid)


class State(StrEnum):
    IDLE = "idle"
    STARTING = "starting"
    READY = "ready"
    DOWN = "down"  # failed or exited; restarts on the next call once its backoff has passed
    FAILED = "failed"  # a failure a retry cannot fix; waits for the registry entry to change


class UpstreamUnavailable(UpstreamError):
    """The server is down, failed to start, or did not become ready in time."""


class Upstream:
    """One upstream server: its state, its live session, its listing and its stderr tail."""

    def __init__(self, cfg: ServerConfig, pool: Supervisor) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.pool = pool
        self.state = State.IDLE
        self.stats = StreamStats()
        self.session: ClientSession | None = None
        self.lane: Lane | None = None  # the live stdio pipe's (coffer.upstreams.direct); None: the SDK's path
        self.listing: Listing | None = None
        self.last_error: str | None = None
        self.policy: sandbox.Policy | None = None  # a stdio server's confinement, once started confined
        self.confinement: sandbox.Start | None = None  # what its last confined start may read, write, reach
        self.confined: bool | None = None  # whether its last start ran confined (None: none got that far)
        self.roots: tuple[str, ...] = ()  # the declared roots its sandbox grants (a server that works on roots)
        self._restart_now = False  # ended on purpose to start with a new confinement: no backoff
        self.denied_hosts: list[str] = []  # hosts its filtering proxy refused (coffer.upstreams.egress)
        self.error_class: str | None = None
        self.server_info: dict[str, Any] | None = None
        self.capabilities: dict[str, Any] = {}  # what the server declared at its handshake (wire form)
        self.protocol_version: str | None = None
        self.init_seconds: float | None = None
        self.ready_since: float | None = None  # wall clock when the running process finished its handshake
        self.spawns = 0
        self.failures = 0
        self.retry_at = 0.0
        self._settled = anyio.Event()
        self._done = anyio.Event()
        self._done.set()
        self._scope: anyio.CancelScope | None = None
        self._exited = anyio.Event()
        self._urgent = False
        self._stopping = False
        self._transport_error: BaseException | None = None
        self._dirty: set[str] = set()
        self._relisting = False
        self._auth: Any = None  # the OAuth provider of the current HTTP connection, if any
        self._grant: float | None = None  # the OAuth grant its last connection went with (grant_mark)
        self.problems: list[str] = []  # what its listing had to drop or repair (coffer doctor)
        self.told: frozenset[str] = frozenset()  # host capabilities this session was told of (coffer.gateway.relay)
        self.pids: set[int] = set()  # its processes now (the supervisor, on Linux), for `coffer status`

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start in the background (bounded by the pool's gate) unless running or backing off."""
        if self._stopping or self.state in (State.STARTING, State.READY, State.FAILED):
            return
        if self.state is State.DOWN and anyio.current_time() < self.retry_at:
            return
        self.state = State.STARTING
        self._settled = anyio.Event()
        self._done = anyio.Event()
        self.pool.spawn(self._run)

    def retry(self) -> None:
        """A failure, for good or backing off, may not be any more (what it lacked is there): start
        afresh, its backoff forgotten."""
        if self.state in (State.DOWN, State.FAILED) and not self._stopping:
            self.state, self.failures, self.retry_at = State.IDLE, 0, 0.0
            self.start()

    async def wait_settled(self, timeout: float) -> None:
        """Wait until a start in progress is ready or has failed, at most `timeout` seconds."""
        settled = self._settled
        if self.state is State.STARTING:
            with anyio.move_on_after(timeout):
                await settled.wait()

    async def ready_session(self, wait: float) -> ClientSession:
        """The live session, starting the server if needed and waiting up to `wait` seconds for it.

        Raises UpstreamUnavailable with the reason (and the stderr tail's last line) otherwise.
        """
        if self.state is State.READY and self.session is not None:
            if not self._exited.is_set():
                return self.session
            await self._done.wait()  # the process just died: let the supervisor record why (bounded)
        if self.state is State.FAILED and await self._granted_since():
            self.retry()  # the user did what its error said (`coffer auth`, the console's Connect)
        if self.state is State.FAILED:
            raise UpstreamUnavailable(f"server '{self.name}' cannot start: {self.last_error}")
        now = anyio.current_time()
        if self.state is State.DOWN and now < self.retry_at:
            raise UpstreamUnavailable(
                f"server '{self.name}' is down ({self.last_error}); next restart in {math.ceil(self.retry_at - now)}s"
            )
        self._urgent = True
        self.pool.gate.poke()
        self.start()
        await self.wait_settled(wait + START_SLACK_S)  # its own initialize timeout decides first, with a reason
        if self.state is State.READY and self.session is not None:
            return self.session
        if self.state is State.STARTING:
            raise UpstreamUnavailable(f"server '{self.name}' is still starting after {wait:g}s")
        raise UpstreamUnavailable(f"server '{self.name}' could not start: {self.last_error}")

    async def _granted_since(self) -> bool:
        """It failed for want of an OAuth grant, and the token store holds another one now (one read of
        it, only for a call to such a failed server): a running gateway need not be restarted."""
        if not self.cfg.oauth or self.error_class not in ("auth_needed", "auth_failed"):
            return False
        mark = await anyio.to_thread.run_sync(oauth_store.grant_mark, self.name, self.pool.member, self.cfg.url)
        return mark != self._grant

    async def stop(self) -> None:
        """Stop the session and kill the server's process group (bounded, a few seconds at worst)."""
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()
        await self._done.wait()

    def restart_soon(self) -> None:
        """Start afresh with a new confinement (a host declared roots): the session ends now, and the
        next request starts it again at once, not after a failure's backoff."""
        self._restart_now = True
        self._restartable()

    def _restartable(self) -> None:
        """Drop a broken session now; the next call restarts it (subject to backoff)."""
        if self._scope is not None:
            self._scope.cancel()

    async def _run(self) -> None:
        self.spawns += 1
        self._transport_error = None
        self._auth = None
        self.problems = []
        self.stats = StreamStats(secrets=self.stats.secrets)
        slot = self.pool.gate.slot()
        exited = self._exited = anyio.Event()
        ready_at: float | None = None
        error: BaseException | None = None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                try:
                    await slot.acquire(lambda: self._urgent)
                    self._urgent = False
                    self.pool.spawn(slot.release_after, self.pool.slot_hold)
                    async with AsyncExitStack() as stack:
                        read, write = await stack.enter_async_context(self._open(exited))
                        opts = await self.pool.client_options(self.name)  # what the host lets us relay
                        self.told = frozenset(cap for cap, key in _TOLD if key in opts)
                        opts |= {
                            "message_handler": self._on_message,
                            "client_info": CLIENT_INFO,
                            "notification_bindings": [self._task_status_binding()],
                        }
                        session = await stack.enter_async_context(ClientSession(read, write, self.cfg.timeout, **opts))
                        began = anyio.current_time()
                        init = await session.initialize()
                        listing = await list_kinds(session, KINDS, self.listing, self.cfg.timeout, self.note_problem)
                        slot.release()
                        ready_at = anyio.current_time()
                        self.init_seconds = ready_at - began
                        self.server_info = init.server_info.model_dump(exclude_none=True)
                        self.capabilities = init.capabilities.model_dump(by_alias=True, exclude_none=True)
                        self.protocol_version = init.protocol_version
                        self.listing = listing
                        await self.pool.prepare(self, session)  # state the host set, before any call is routed
                        self.session, self.state = session, State.READY
                        self.ready_since = time.time()
                        self.last_error = self.error_class = None
                        self._settled.set()
                        self.pool.listed(self, frozenset(KINDS))
                        await exited.wait()
                        raise Exited()
                except Exception as exc:  # classified below; one upstream's failure stays its own
                    error = exc
            if error is None and scope.cancelled_caught:
                error = Exited()  # dropped by _restartable(): a lost connection, not a stop
        finally:
            slot.release()
            self.session = self.lane = None
            self._scope = None
            self._settle(error, ready_at)
            self._settled.set()
            self._done.set()

    def _settle(self, error: BaseException | None, ready_at: float | None) -> None:
        if self._stopping or error is None or self._restart_now:
            self._restart_now = False
            self.state = State.IDLE  # the next request starts it again at once
            return
        now = anyio.current_time()
        if ready_at is not None and now - ready_at >= HEALTHY_RESET_S:
            self.failures = 0
        self.failures += 1
        cause = leaf(error)
        if isinstance(cause, MCPError) and self._transport_error is not None:
            cause = self._transport_error  # e.g. the HTTP 401 behind an initialize that never got an answer
        if getattr(self._auth, "failure", None) is not None:
            cause = self._auth.failure  # the OAuth flow's own reason beats the 401 that started it
        self.last_error, self.error_class, permanent = describe(cause, self.cfg, self.stats)
        hint = (
            denials.hint(self.confinement, self.cfg.name, self.last_error, self.denied_hosts)
            if self.policy is not None
            else None
        )
        if hint is not None:
            self.last_error = f"{self.last_error} ({hint})"
        self.state = State.FAILED if permanent else State.DOWN
        self.retry_at = math.inf if permanent else now + backoff(self.failures)

    @asynccontextmanager
    async def _open(self, exited: anyio.Event) -> AsyncIterator[tuple[Any, Any]]:
        cfg = self.cfg
        if cfg.url:
            headers = resolved_headers(cfg, member=self.pool.member)
            self.stats.secrets = tuple(headers.values())
            if cfg.oauth:
                held = (cfg.name, self.pool.member, cfg.url)
                self._grant = await anyio.to_thread.run_sync(oauth_store.grant_mark, *held)
            async with (
                oauth.connection_auth(cfg, self.pool.member, self.pool.exchanger) as auth,
                http_pipe(cfg.url, headers, self.stats, auth) as streams,
            ):
                self._auth = auth
                yield streams
            return
        extra = resolved_env(cfg, member=self.pool.member)
        self.stats.secrets = tuple(extra.values())
        env = child_env(extra)
        argv = [self._program(env), *cfg.args]
        lane = None if otlp.wanted() else Lane()  # with telemetry on, every request gets the SDK's client span
        pids = _Mirror(self.pool.pids, self.pids)
        spill = self.pool.spill_results
        self.policy = policy = await anyio.to_thread.run_sync(sandbox.in_force, cfg)
        self.confined = policy is not None
        start = None
        if policy is not None:
            start = await anyio.to_thread.run_sync(
                sandbox.prepare, cfg, policy, argv[0], env, self.roots, self.pool.member
            )
            env = start.env
        elif self.pool.member is not None:  # unconfined, a member's process still keeps its files apart
            env["HOME"] = str(await anyio.to_thread.run_sync(sandbox.home_of, cfg.name, self.pool.member))
        self.confinement = start
        try:
            async with AsyncExitStack() as stack:
                if start is not None and start.mechanism == "bubblewrap" and isinstance(start.policy.network, tuple):
                    env.update(sandbox.proxy_env())
                    hosts = start.policy.network
                    proxy = egress.filtering_proxy(sandbox.proxy_socket(start.tmp), hosts, self.denied_hosts.append)
                    await stack.enter_async_context(proxy)
                cwd = start.cwd if start is not None else cfg.cwd
                confine = start.confine if start is not None else None
                pipe = stdio_pipe(argv, env, cwd, self.stats, exited.set, pids, spill, lane, confine)
                streams = await stack.enter_async_context(pipe)
                self.lane = lane
                yield streams
        finally:
            if start is not None:
                sandbox.cleanup(start)

    def _program(self, env: dict[str, str]) -> str:
        """Resolve the command like a shell would, against the server's own PATH and cwd."""
        command = self.cfg.command or ""
        if os.sep in command:
            return os.path.join(self.cfg.cwd or os.getcwd(), command) if not os.path.isabs(command) else command
        found = shutil.which(command, path=env.get("PATH"))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, "command not found", command)
        return found

    # ------------------------------------------------------------------ listing

    def note_problem(self, problem: str) -> None:
        """A listing problem for `coffer doctor` (a tool dropped or repaired), kept per session."""
        if problem not in self.problems:
            self.problems.append(problem)

    def _task_status_binding(self) -> NotificationBinding[types.TaskStatusNotificationParams]:
        """`notifications/tasks/status` is outside the SDK's notification union: observed by a binding."""

        async def status(params: types.TaskStatusNotificationParams) -> None:
            self.pool.notice(self, types.TaskStatusNotification(params=params))

        return NotificationBinding(
            method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=status
        )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self._transport_error = message
            if http_status(message) in (401, 403) or isinstance(message, oauth.AuthorizationNeeded):
                self._restartable()
            return
        if isinstance(message, types.ResourceUpdatedNotification):
            self.pool.resource_updated(self, message.params)
            return
        if isinstance(message, types.ElicitCompleteNotification):
            self.pool.notice(self, message)
            return
        kind = _CHANGED.get(type(message))
        if kind is None:
            return
        self._dirty.add(kind)
        if kind == "resources":
            self._dirty.add("resource_templates")
        if not self._relisting:
            self._relisting = True
            self.pool.spawn(self._relist)

    async def _relist(self) -> None:
        """Re-list what changed (coalescing bursts), then tell the pool's listener."""
        try:
            while self._dirty and self.session is not None:
                kinds = frozenset(self._dirty)
                self._dirty.clear()
                try:
                    self.listing = await list_kinds(
                        self.session, kinds, self.listing, self.cfg.timeout, self.note_problem
                    )
                except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                self.pool.listed(self, kinds)
        finally:
            self._relisting = False

    # ------------------------------------------------------------------ requests

    async def request(
        self, request: Any, *, timeout: float | None = None, progress: Callable[..., Awaitable[None]] | None = None
    ) -> dict[str, Any]:
        """Send one request and return the upstream's raw (wire-format) result.

        Raises UpstreamUnavailable when the server cannot be reached, MCPError for the upstream's own
        JSON-RPC errors (REQUEST_TIMEOUT after `timeout` seconds). Giving up on the request, by timeout or
        cancellation, sends `notifications/cancelled` upstream before this returns (`coffer.upstreams.outbound`).
        """
        timeout = self.cfg.timeout if timeout is None else timeout
        session = await self.ready_session(timeout)
        try:
            return await outbound.send(session, request, timeout=timeout, progress=progress, lane=self.lane)
        except MCPError as exc:
            # -32000 is also the generic "server error" many servers answer with; only the SDK's own
            # "Connection closed" means the session is gone (an upstream error passes through, session kept)
            if exc.code != types.CONNECTION_CLOSED or exc.message != "Connection closed" or exc.data is not None:
                raise
            self._restartable()
            if self.cfg.oauth:  # an OAuth server whose authorisation ended: let the supervisor say so
                with anyio.move_on_after(2.0):
                    await self._done.wait()
                if self.error_class == "auth_needed" and self.last_error:
                    raise UpstreamUnavailable(self.last_error) from exc
            if self.stats.broken:  # e.g. an oversized frame: say that, not just that the connection closed
                raise UpstreamUnavailable(
                    f"server '{self.name}' failed during the request: {self.stats.broken}"
                ) from exc
            tail = self.stats.last_stderr_line()
            raise UpstreamUnavailable(
                f"server '{self.name}' closed the connection during the request{f'; stderr: {tail}' if tail else ''}"
            ) from exc

    def status(self) -> dict[str, Any]:
        """A JSON-able summary for `coffer doctor` and tests."""
        return {
            "name": self.name,
            "state": self.state.value,
            "spawns": self.spawns,
            "failures": self.failures,
            "last_error": self.last_error,
            "error_class": self.error_class,
            "init_seconds": self.init_seconds,
            "protocol_version": self.protocol_version,
            "server_info": self.server_info,
            "capabilities": self.capabilities,
            "stderr_tail": self.stats.stderr_tail(),
            "garbage_lines": self.stats.garbage_lines,
            "problems": list(self.problems),
        }
