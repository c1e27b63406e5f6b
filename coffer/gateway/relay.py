"""Server-to-client traffic from upstreams, relayed to the host whose call caused it.

Upstreams may ask their client for `sampling/createMessage`, `elicitation/create` and `roots/list`,
and send `notifications/message` logs. Nothing in such a message names the request it belongs to
(JSON-RPC ids run per direction, and stdio has no stream to tie them), so the relay keeps, per
upstream, the host requests Coffer has in flight on it. A request from the upstream goes to the host
of those calls, scoped to the oldest one (on streamable HTTP it rides that call's response stream)
and cancelled when that call ends; with no call in flight it goes on the channel outside any request of the
one connected host. A 2026-07-28 host takes no requests: during its tools/call the request goes back
to it as a multi-round-trip result (coffer.gateway.rounds). Refused, with a reason the upstream can
report: a host that did not declare the capability, a 2026-07-28 host outside a tools/call, and a
request that could belong to calls of two different hosts, which is never guessed. URL elicitations
are remembered, so their `notifications/elicitation/complete` reaches the host that got them.

Upstreams are told only what the host declared (their capabilities are fixed at their handshake),
so a server that falls back when its client cannot sample keeps doing so. `host_wait` bounds how
long an upstream's handshake waits for the first host (stdio: the one host). When no host is known
by then, or `host_wait` is None (HTTP serving, where hosts come and go), every relayable capability
is declared and each request is decided on its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.connection import allowed_log_levels
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from coffer.gateway import sdk, sessions
from coffer.gateway.rounds import Round
from coffer.trust.redact import scrub, scrub_obj

log = logging.getLogger("coffer.relay")

LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
# Until a host sends logging/setLevel it hears upstream messages at "info" and above: servers such as
# desktop-commander send debug lines on every call, which no host asked for.
DEFAULT_LOG_LEVEL: types.LoggingLevel = "info"
# What an upstream is told of extensions when the host is not known (HTTP): MCP Apps, whose UI a host
# that cannot show it ignores (the tools work the same).
TOLD_CAPS = ("sampling", "elicitation", "roots", "extensions")  # what an upstream may be told of (its `told`)
MCP_APPS: dict[str, dict[str, Any]] = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
MAX_ELICITATIONS = 256
AMBIGUOUS = "calls from more than one client are in flight on it"
TURN_WAIT_S = 60.0  # how long an ask made amid two clients' calls waits for one client's to end
MODERN_REFUSAL = (
    "the client speaks 2026-07-28, where a server can ask it for input only as the answer to a tools/call "
    "(a multi-round-trip result), and this request was not made while one was waiting"
)  # URL elicitations remembered for their completion notification (oldest forgotten)


@dataclass(eq=False)
class _Origin:
    """One host request in flight on an upstream, and the relayed requests waiting on its host."""

    ctx: Any
    pending: set[anyio.CancelScope] = field(default_factory=set)
    round: Round | None = None  # a 2026-07-28 host's call: what the upstream asks goes back as input_required
    scope: Any = None  # the engine session's own pool the call was made in (None in-process)


_connection = sdk.host_connection  # one per stdio host or HTTP session (a 2026-07-28 host: one per request)


class Host(Protocol):
    """An engine session's own pool (coffer.gateway.pool): `host` is its host session, None until its
    handshake (or when several HTTP hosts share it); calls made in that session name it as their scope."""

    host: Any


def _client(origin: _Origin) -> Any:
    """Who made a call: its host connection; for a 2026-07-28 host, whose every request comes on a
    connection of its own, the engine session it came through (in-process: the one host)."""
    if getattr(origin.ctx.session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return ("modern", origin.scope)
    return _connection(origin.ctx.session)


@dataclass(eq=False)
class _Turn:
    """Whose calls an upstream known to ask its client is serving now; other clients' calls wait."""

    client: Any = None
    calls: int = 0
    freed: anyio.Event = field(default_factory=anyio.Event)


def _sampling_gap(caps: types.ClientCapabilities, params: types.CreateMessageRequestParams) -> str | None:
    if caps.sampling is None:
        return "the client did not declare sampling"
    if params.tools and caps.sampling.tools is None:
        return "the client did not declare tool use in sampling"
    if params.include_context not in (None, "none") and caps.sampling.context is None:
        return "the client did not declare sampling context"
    return None


def _elicitation_gap(caps: types.ClientCapabilities, params: types.ElicitRequestParams) -> str | None:
    have = caps.elicitation
    if have is None:
        return "the client did not declare elicitation"
    if params.mode == "url" and have.url is None:
        return "the client did not declare URL elicitation"
    if params.mode == "form" and have.form is None and have.url is not None:  # `{}` means form
        return "the client did not declare form elicitation"
    return None


class Relay:
    """Routes one gateway's upstream-to-host requests and logs; the pool asks it for session callbacks."""

    def __init__(self, host_wait: float | None = None) -> None:
        self.host_wait = host_wait
        self.hosts: list[Any] = []  # legacy host sessions, kept from notifications/initialized
        self._calls: dict[str, list[_Origin]] = {}
        self._known = anyio.Event()
        self._deadline: float | None = None
        self._caps: types.ClientCapabilities | None = None  # what the first host can take
        self._levels: dict[int, types.LoggingLevel] = {}  # host connection -> the level it set with logging/setLevel
        self._subscribers: dict[str, list[Any]] = {}  # resource URI -> host sessions subscribed to it
        # (server, elicitation id) -> the host session that got that URL elicitation, for its completion
        self._elicitations: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self.on_notice: Callable[[str, Any], Awaitable[None]] | None = None  # the rest (tasks: coffer.gateway.tasks)
        self.on_roots_outside_call: Callable[[str], None] | None = None  # coffer.gateway.sessions.SEEN_ROOTS
        # the roots a host declared to a server (and the session's own pool, for a per-session server)
        self.on_roots: Callable[[str, list[str], Host | None], None] | None = None
        # servers seen asking their client during a call: their calls from different clients take turns
        self.askers: set[str] = set()
        self.on_ask_in_call: Callable[[str], None] | None = None  # remembered across starts (SEEN_ASKS)
        self._turns: dict[int, _Turn] = {}  # id(upstream) -> its turn, while it has calls
        self._ended: dict[str, anyio.Event] = {}  # server -> set when one of its calls ends (or an ask waits)
        self._waiting: dict[str, list[object]] = {}  # server -> its asks waiting amid several clients' calls

    # ------------------------------------------------------------------ hosts and calls

    def add_host(self, session: Any) -> None:
        """A legacy host finished its handshake: its channel outside any request can carry requests."""
        self.hosts.append(session)
        self.note_host(session)

    def note_host(self, session: Any) -> None:
        """The first host seen decides what upstreams are told. A 2026-07-28 host takes no requests, but
        is asked through multi-round-trip results during a tools/call (coffer.gateway.rounds), so what
        it declares is what upstreams are told too."""
        if self._known.is_set():
            return
        self._caps = session.client_capabilities or types.ClientCapabilities()
        self._known.set()

    def drop_host(self, session: Any) -> None:
        with contextlib.suppress(ValueError):
            self.hosts.remove(session)
        conn = id(_connection(session))
        self._levels.pop(conn, None)
        for uri in list(self._subscribers):
            self.unsubscribe(uri, session)

    def _host_channel(self, session: Any) -> Any:
        """The session kept from this host's handshake (it outlives any one request), else `session`."""
        conn = _connection(session)
        return next((h for h in self.hosts if _connection(h) is conn), session)

    # ------------------------------------------------------------------ log levels and subscriptions

    def set_level(self, session: Any, level: types.LoggingLevel) -> types.LoggingLevel:
        """Record a host's logging/setLevel; returns the level upstreams should use (the most verbose asked)."""
        self._levels[id(_connection(session))] = level
        return self.upstream_level() or level

    def upstream_level(self) -> types.LoggingLevel | None:
        """What upstreams are told: the lowest level any host set; None before any host set one."""
        if not self._levels:
            return None
        return min(self._levels.values(), key=LEVELS.index)

    def _hears(self, session: Any, level: str) -> bool:
        wanted = self._levels.get(id(_connection(session)), DEFAULT_LOG_LEVEL)
        return LEVELS.index(level) >= LEVELS.index(wanted) if level in LEVELS else True

    def subscribe(self, uri: str, session: Any) -> bool:
        """Note a host's subscription; True when it is the first for `uri` (the upstream must be asked)."""
        subs = self._subscribers.setdefault(uri, [])
        conn = _connection(session)
        if not any(_connection(s) is conn for s in subs):
            subs.append(self._host_channel(session))
        return len(subs) == 1

    def unsubscribe(self, uri: str, session: Any) -> bool:
        """Forget a host's subscription; True when nobody is subscribed to `uri` any more."""
        conn = _connection(session)
        subs = [s for s in self._subscribers.get(uri, []) if _connection(s) is not conn]
        if subs:
            self._subscribers[uri] = subs
            return False
        self._subscribers.pop(uri, None)
        return True

    def subscribed(self) -> list[str]:
        return list(self._subscribers)

    async def resource_updated(self, server: str, params: types.ResourceUpdatedNotificationParams) -> None:
        """An upstream's `notifications/resources/updated`, to the hosts subscribed to that URI only."""
        note = types.ResourceUpdatedNotification(params=params)
        for session in list(self._subscribers.get(str(params.uri), [])):
            try:
                await session.send_notification(note)
            except Exception:  # a host that went away must not break the upstream or the others
                self.drop_host(session)

    @contextlib.asynccontextmanager
    async def origin(
        self, server: str, ctx: Any, round_: Round | None = None, upstream: object = None
    ) -> AsyncIterator[None]:
        """Mark a host request as in flight on `server` while it runs (`round_`: for a 2026-07-28 host,
        the round its asks go to: coffer.gateway.rounds). On an `upstream` that asks its client during
        calls, it first waits until no other client's call is in flight there, so what the upstream asks
        has one client to go to (docs/serving.md's promise: it goes to the session that made the call)."""
        origin = _Origin(ctx, round=round_, scope=getattr(sessions.current(), "pool", None))
        turn, client = None, _client(origin)
        if upstream is not None and server in self.askers:
            turn = self._turns.setdefault(id(upstream), _Turn())
            while turn.calls and turn.client != client:
                await turn.freed.wait()
            turn.client, turn.calls = client, turn.calls + 1
        calls = self._calls.setdefault(server, [])
        calls.append(origin)
        try:
            yield
        finally:
            calls.remove(origin)
            ended = self._ended.pop(server, None)
            if ended is not None:
                ended.set()
            if turn is not None:
                turn.calls -= 1
                if not turn.calls:
                    turn.client = None
                    turn.freed.set()
                    turn.freed = anyio.Event()
                    if self._turns.get(id(upstream)) is turn:
                        del self._turns[id(upstream)]
            sibling = next((o for o in calls if _client(o) == client), None)
            if sibling is not None:  # an ask is tied to the client's first call on the server, and may be
                sibling.pending |= origin.pending  # another of its calls': it stays while one is in flight
            else:
                for scope in origin.pending:  # its host may never answer for a call that has ended
                    scope.cancel()

    # ------------------------------------------------------------------ what upstreams are told

    async def client_options(self, server: str, host: Host | None = None) -> dict[str, Any]:
        """`ClientSession` keyword arguments for `server`: callbacks for what the host can take. `host`:
        an engine session's own upstream, told what that session's host declared and asking it only."""
        if self.host_wait is not None and not self._known.is_set():
            now = anyio.current_time()
            self._deadline = now + self.host_wait if self._deadline is None else self._deadline
            with anyio.move_on_after(self._deadline - now):
                await self._known.wait()
        opts: dict[str, Any] = {"logging_callback": lambda params: self._log(server, params, host)}
        everything, caps = self._telling(host)
        if everything or (caps is not None and caps.sampling is not None):
            opts["sampling_callback"] = lambda ctx, params: self._sample(server, params, host)
            if caps is not None:
                opts["sampling_capabilities"] = caps.sampling
        if everything or (caps is not None and caps.elicitation is not None):
            opts["elicitation_callback"] = lambda ctx, params: self._elicit(server, params, host)
        if everything or (caps is not None and caps.roots is not None):
            opts["list_roots_callback"] = lambda ctx: self._roots(server, host)
        extensions = MCP_APPS if everything else (caps.extensions if caps is not None else None)
        if extensions:  # servers that check for MCP Apps support show their UI only when it is declared
            opts["extensions"] = dict(extensions)
        return opts

    def _telling(self, host: Host | None) -> tuple[bool, types.ClientCapabilities | None]:
        """(every capability, else the capabilities of the host) an upstream starting now is told of."""
        owner = host.host if host is not None else None
        everything = owner is None and (self.host_wait is None or not self._known.is_set())
        caps = None if everything else (owner.client_capabilities if owner is not None else self._caps)
        return everything, caps if everything or caps is not None else types.ClientCapabilities()

    def told_for(self, host: Host | None = None) -> frozenset[str]:
        """What an upstream starting now would be told of (as `Upstream.told` records it): every
        capability for one that serves many hosts, else what its host declared (`host`: an engine
        session's own pool). A first tools/list answers from what the server listed when told that."""
        everything, caps = self._telling(host)
        if everything or caps is None:
            return frozenset(TOLD_CAPS)
        declared = {c for c in ("sampling", "elicitation", "roots") if getattr(caps, c, None) is not None}
        return frozenset(declared | ({"extensions"} if caps.extensions else set()))

    # ------------------------------------------------------------------ relaying

    def _target(self, server: str, host: Host | None = None) -> tuple[Any, Any, _Origin | None] | str:
        """(host session, related request id or None, origin) for a message from `server`, or why none.
        A session's own upstream (`host`) reaches that session only."""
        calls = self._calls.get(server) or []
        owner = host.host if host is not None else None
        if owner is not None:  # its own session's calls: by the session (a 2026-07-28 host's requests each
            # come on a connection of their own), else by the connection
            calls = [o for o in calls if o.scope is host or _connection(o.ctx.session) is _connection(owner)]
            if not calls:
                return self._host_channel(owner), None, None
        if calls:
            if len({_client(o) for o in calls}) > 1:
                return AMBIGUOUS
            first = calls[0]
            return first.ctx.session, first.ctx.request_id, first
        if len(self.hosts) == 1:
            return self.hosts[0], None, None
        return "no call of a client is in flight on it" if self.hosts else "no client is connected"

    async def _resolve(self, server: str, host: Host | None) -> tuple[Any, Any, _Origin | None] | str:
        """`_target`, for a request: asked while calls of two clients are in flight on a shared upstream,
        it waits (bounded) for the other client's calls to end, and the server's calls take turns from
        now on (`origin`), here and, through `on_ask_in_call`, in later starts."""
        target = self._target(server, host)
        if target != AMBIGUOUS:
            if not isinstance(target, str) and target[2] is not None and host is None:
                self._note_asker(server)
            return target
        self._note_asker(server)
        waiting = self._waiting.setdefault(server, [])
        me = object()
        waiting.append(me)
        self._wake(server)  # the others re-check: all of the calls may be waiting on asks now
        try:
            with anyio.move_on_after(TURN_WAIT_S):
                while target == AMBIGUOUS:
                    calls = self._calls.get(server) or []
                    if len(waiting) >= len(calls):  # every call asks and none can end: a deadlock to break
                        return self._in_order(server, waiting.index(me), calls)
                    ended = self._ended.setdefault(server, anyio.Event())
                    await ended.wait()
                    target = self._target(server, host)
        finally:
            waiting.remove(me)
        return target

    def _in_order(self, server: str, at: int, calls: list[_Origin]) -> tuple[Any, Any, _Origin | None]:
        """Asks that came while every call in flight on `server` waited on one (the first time it is seen
        asking, before its calls take turns): the n-th ask goes to the n-th call, in the order the calls
        were sent to it, as a server that handles requests in order asks for them."""
        origin = calls[min(at, len(calls) - 1)]
        log.info("server '%s' asked while calls of several clients waited on it: matched in call order", server)
        return origin.ctx.session, origin.ctx.request_id, origin

    def _wake(self, server: str) -> None:
        ended = self._ended.pop(server, None)
        if ended is not None:
            ended.set()

    def _note_asker(self, server: str) -> None:
        if server not in self.askers:
            self.askers.add(server)
            if self.on_ask_in_call is not None:
                self.on_ask_in_call(server)

    async def _ask(
        self,
        server: str,
        what: str,
        request: Any,
        result_type: Any,
        gap: Any,
        host: Host | None,
        target: tuple[Any, Any, _Origin | None] | str | None = None,
    ) -> Any:
        target = await self._resolve(server, host) if target is None else target
        if isinstance(target, str):
            return _refused(what, server, target)
        session, related, origin = target
        caps = session.client_capabilities
        # what the host did not declare is refused here, never put to it: a 2026-07-28 host that cannot
        # answer an ask in its call's round fails the whole call (a roots request that came during it)
        reason = gap(caps or types.ClientCapabilities()) if caps is not None or not _modern(session) else None
        if reason is not None:
            return _refused(what, server, reason)
        if _modern(session):
            if origin is not None and origin.round is not None:  # asked back as a multi-round-trip result
                return await origin.round.ask(request, result_type)
            return _refused(what, server, MODERN_REFUSAL)
        metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
        with anyio.CancelScope() as scope:
            if origin is not None:
                origin.pending.add(scope)
            try:
                return await session.send_request(request, result_type, metadata=metadata)
            except NoBackChannelError:
                return _refused(what, server, "the client's connection cannot carry requests from the server")
            except MCPError as exc:  # the host's own answer, e.g. the user declined
                return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
            except (ValidationError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                log.warning("could not relay %s from %s: %s", what, server, type(exc).__name__)
                return types.ErrorData(code=types.INTERNAL_ERROR, message=f"coffer could not relay {what}")
            finally:
                if origin is not None:
                    origin.pending.discard(scope)
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the call that asked for {what} has ended")

    async def _sample(self, server: str, params: types.CreateMessageRequestParams, host: Host | None) -> Any:
        result = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        request = types.CreateMessageRequest(params=params)
        return await self._ask(server, "sampling", request, result, lambda caps: _sampling_gap(caps, params), host)

    async def _elicit(self, server: str, params: types.ElicitRequestParams, host: Host | None) -> Any:
        target = await self._resolve(server, host)
        if isinstance(params, types.ElicitRequestURLParams) and params.elicitation_id and not isinstance(target, str):
            self._remember_elicitation(server, params.elicitation_id, target[0])
        request = types.ElicitRequest(params=params)
        gap = lambda caps: _elicitation_gap(caps, params)  # noqa: E731
        return await self._ask(server, "elicitation", request, types.ElicitResult, gap, host, target)

    async def _roots(self, server: str, host: Host | None) -> Any:
        def gap(caps: types.ClientCapabilities) -> str | None:
            return None if caps.roots is not None else "the client did not declare roots"

        if host is None and not self._calls.get(server) and self.on_roots_outside_call is not None:
            self.on_roots_outside_call(server)  # it scopes itself to a client: an engine runs it per session
        result = await self._ask(server, "roots", types.ListRootsRequest(), types.ListRootsResult, gap, host)
        if isinstance(result, types.ListRootsResult) and self.on_roots is not None:
            self.on_roots(server, [str(root.uri) for root in result.roots], host)  # a confined server may need them
        return result

    async def _log(self, server: str, params: types.LoggingMessageNotificationParams, host: Host | None) -> None:
        """Pass an upstream's log line on, named after its server, to the host it concerns."""
        logger = f"{server}/{params.logger}" if params.logger else server
        note = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(
                level=params.level, logger=scrub(logger), data=scrub_obj(params.data)
            )
        )
        owner = host.host if host is not None else None
        target = self._target(server, host) if self._calls.get(server) else None
        if target is None or (not isinstance(target, str) and target[2] is None):  # no call of a host caused it:
            for session in list(self.hosts) if owner is None else [self._host_channel(owner)]:  # every legacy host
                if self._hears(session, params.level):  # that wants the level hears it (its own host, if any)
                    with contextlib.suppress(Exception):  # a host that went away must not break the upstream
                        await session.send_notification(note)
            return
        if isinstance(target, str):
            return  # it could belong to either of two hosts: dropped, never guessed
        session, related, origin = target
        assert origin is not None
        modern = session.protocol_version in MODERN_PROTOCOL_VERSIONS  # 2026-07-28 sets the level per request
        wanted = params.level in allowed_log_levels(session.protocol_version, origin.ctx.meta)
        if wanted and (modern or self._hears(session, params.level)):
            with contextlib.suppress(Exception):
                await session.send_notification(note, related_request_id=related)

    # ------------------------------------------------------------------ URL elicitation

    def note_elicitations(self, server: str, data: Any, session: Any) -> None:
        """A URL-elicitation-required error from `server` went to this host: its completions go there too."""
        items = data.get("elicitations") if isinstance(data, dict) else None
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("elicitationId"), str):
                self._remember_elicitation(server, item["elicitationId"], session)

    def _remember_elicitation(self, server: str, elicitation_id: str, session: Any) -> None:
        self._elicitations[(server, elicitation_id)] = session
        while len(self._elicitations) > MAX_ELICITATIONS:
            self._elicitations.popitem(last=False)

    async def upstream_notice(self, server: str, notification: Any) -> None:
        """A notification an upstream sent for one host (`Pool.notice`)."""
        if isinstance(notification, types.ElicitCompleteNotification):
            await self.elicitation_complete(server, notification.params)
        elif self.on_notice is not None:
            await self.on_notice(server, notification)

    async def elicitation_complete(self, server: str, params: types.ElicitCompleteNotificationParams) -> None:
        """`notifications/elicitation/complete` from `server`, to the host that got that elicitation (the
        one connected host when it is not known, say after a restart); dropped when that is a guess."""
        session = self._elicitations.pop((server, params.elicitation_id), None)
        if session is None and len(self.hosts) == 1:
            session = self.hosts[0]
        if session is None:
            log.info(
                "dropped the completion of elicitation %s from %s: no host to give it to", params.elicitation_id, server
            )
            return
        with contextlib.suppress(Exception):  # a host that went away must not break the upstream
            await self._host_channel(session).send_notification(types.ElicitCompleteNotification(params=params))

    async def roots_changed(self, sessions: Iterable[Any]) -> None:
        """The host's roots changed: tell every live upstream, so it asks again."""
        for session in sessions:
            with contextlib.suppress(Exception):
                await session.send_notification(types.RootsListChangedNotification())


def _modern(session: Any) -> bool:
    return session.protocol_version in MODERN_PROTOCOL_VERSIONS


def _refused(what: str, server: str, reason: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"coffer did not relay {what} from '{server}': {reason}")
