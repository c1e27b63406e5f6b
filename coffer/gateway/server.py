"""The gateway: one MCP server (the SDK's lowlevel `Server`) over every enabled upstream.

It answers list requests from the merged view (`coffer.gateway.view`), hands every request that
belongs to one upstream to the router (`coffer.gateway.routes`), and answers the built-ins itself.
The first tools/list comes from the catalogue snapshot, so a host with a 10 s start budget never
waits for slow upstreams; every live listing replaces the snapshot's entry, is written back to it,
and is announced to the host with list_changed. Hosts keep the list they got at start, so curation
is decided again at call time. Every tools/call, built-ins included, passes through `_record()`,
which times it and writes the invocation log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from coffer import __version__
from coffer.errors import CofferError
from coffer.gateway import bigresults, builtins, paging, rounds, sessions
from coffer.gateway.advertise import WallGone, walled
from coffer.gateway.builtins import ASK, BUILTIN, CALL, READ, RUN, SEARCH, CallFailure, HostError, text_result
from coffer.gateway.listings import DISCOVERY_BUDGET_S, Listings
from coffer.gateway.merge import Merged
from coffer.gateway.pool import START_SLOTS, Pool
from coffer.gateway.relay import Relay
from coffer.gateway.routes import Call, Router, for_era
from coffer.gateway.sdk import GatewayServer, host_client, host_connection, http_member, member_middleware
from coffer.gateway.sessions import Share
from coffer.gateway.tasks import TaskEntry, TaskRelay, is_task_call, merged_capability
from coffer.gateway.view import SnapshotWriter, View
from coffer.log.calls import CallLog, CallRecord
from coffer.memory.knowledge import index_resources
from coffer.telemetry import otlp
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.trust.redact import scrub
from coffer.upstreams import denials, outbound, resources
from coffer.upstreams.upstream import State, Upstream, UpstreamUnavailable
from coffer.vault import catalogue
from coffer.vault.registry import Registry, ServerConfig

log = logging.getLogger("coffer.gateway")
VAULT_POLL_S = 0.5  # how often an idle gateway looks for vault edits (a stat and one SQLite pragma)

INSTRUCTIONS = (
    "Coffer serves the tools of several MCP servers as <server>__<tool>. When you are not sure which "
    "tool fits, call coffer__search_tools with the action you want; coffer__ask searches the user's notes "
    "and the servers' documents."
)


# what changed -> the 2026-07-28 listen-stream event and the legacy host's notification that announce it
ANNOUNCED = (
    (frozenset({"tools"}), ToolsListChanged(), "send_tool_list_changed"),
    (frozenset({"prompts"}), PromptsListChanged(), "send_prompt_list_changed"),
    (frozenset({"resources", "resource_templates"}), ResourcesListChanged(), "send_resource_list_changed"),
)


class Gateway:
    """State behind `coffer serve`: the registry (re-read when it changes), the listings, the pool."""

    def __init__(
        self,
        *,
        calllog: CallLog | None = None,
        start_limit: int = START_SLOTS,
        discovery_budget: float = DISCOVERY_BUDGET_S,
        host_wait: float | None = None,
        profile: str | None = None,
        sessions: bool = False,
    ) -> None:
        """`host_wait`: how long upstream handshakes wait for the host's capabilities (None: many hosts);
        `profile`: the `[advertise.NAME]` whose tools are advertised (coffer.gateway.advertise); `sessions`:
        many sessions are served (the engine), so servers with per-client state run once per session."""
        self.calllog = calllog
        self.relay = Relay(host_wait)  # upstream sampling/elicitation/roots/logs to the host (coffer.gateway.relay)
        self.pool = Pool(
            limit=start_limit,
            on_listing=self._on_listing,
            relay=self.relay,
            on_session=self._restore_session_state,
            share=self.share_of if sessions else None,
            spill_results=True,
        )
        self.relay.on_roots_outside_call = self._roots_outside_call
        self.relay.on_roots = self._roots_declared
        self.relay.on_ask_in_call = self._ask_in_call
        self.view = View(builtins.tool_definitions(), on_sync=self.pool.sync)
        self.tasks = TaskRelay(self.pool.get, self.pool.spawn, self._log_task)  # tasks (coffer.gateway.tasks)
        self.bus = InMemorySubscriptionBus()  # list changes for 2026-07-28 hosts' subscriptions/listen streams
        self.relay.on_notice = self._on_notice
        self.router = Router(self.view, self.pool, self.relay, self.tasks)
        # list requests; the profile is the default: an engine's host session names its own (coffer.gateway.sessions)
        self.listings = Listings(self.view, self.pool, self.relay, discovery_budget, profile)
        self.router.bound, self.router.servers_reached = self.listings.bound, self.listings.servers_reached
        self.snapshots = SnapshotWriter(self.pool.spawn)  # live listings back to the snapshot (coffer.gateway.view)
        self.telemetry: otlp.Telemetry | None = None  # OTLP export when the standard variables ask (running())
        self.server = self._build_server()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Load the snapshot, start the upstreams in the background; stop them all on exit."""
        async with self.pool:
            with Pins.open(new_tools="allow") as self.view.pins:  # the registry's setting applies in View._sync()
                self.view.load_snapshot()
                self.relay.askers = {name for name, seen in self.view.seen.items() if sessions.SEEN_ASKS in seen}
                self.listings.start()
                watcher = anyio.CancelScope()  # stopped before the trust store closes under it
                self.pool.spawn(self._watch_vault, watcher)
                from coffer.discovery import upkeep

                freshener = anyio.CancelScope()
                self.pool.spawn(upkeep.keep_fresh, lambda: self.view.registry, freshener)
                if otlp.wanted():
                    self.telemetry = otlp.start()
                    if self.telemetry is not None:
                        self.server.trace_requests()
                try:
                    yield self
                finally:  # before the upstreams stop: a task nobody can collect is cancelled where it runs
                    watcher.cancel()
                    freshener.cancel()
                    await self.tasks.close()
                    await self.snapshots.flush()  # what listed in the last moments reaches the next start
                    if self.telemetry is not None:
                        with anyio.CancelScope(shield=True):
                            await anyio.to_thread.run_sync(self.telemetry.shutdown)

    async def _watch_vault(self, scope: anyio.CancelScope) -> None:
        """A vault edit (remove, disable, a hand edit, an approval) reaches the running upstreams at once,
        not at the next request: the registry file and the trust tables are looked at twice a second."""
        with scope:
            while True:
                await anyio.sleep(VAULT_POLL_S)
                try:
                    self.view.current_registry()
                except Exception as exc:  # the watcher must outlive any one bad read
                    log.warning("could not re-read the vault: %s", exc)

    @property
    def registry(self) -> Registry:
        return self.view.registry

    def current_registry(self) -> Registry:
        """The registry as served now (re-read when the file changed; see `View.current_registry`)."""
        return self.view.current_registry()

    def refusal(self, server: str, tool: str | None = None, exposed: str | None = None) -> str | None:
        return self.view.refusal(server, tool, exposed)

    def merged(self) -> Merged:
        return self.view.merged()

    # ------------------------------------------------------------------ upstream listings

    def _on_listing(self, up: Upstream, kinds: frozenset[str]) -> None:
        """An upstream listed (at start or after list_changed): merge now, persist and announce later."""
        if up.listing is None or not self.pool.live(up):
            return
        listing = up.listing
        if up.pool.member is not None:  # a member's own process: its tools and prompts name the server's
            # surface, but what it holds (resources) is that member's: never shown to others, never indexed
            listing = catalogue.Listing(tools=listing.tools, prompts=listing.prompts)
            kinds = kinds - {"resources", "resource_templates"}
        changed, first = self.view.record(up.name, listing, kinds, up.capabilities)
        if changed or first:
            self.pool.spawn(self._after_listing, up, changed, first)

    async def _after_listing(self, up: Upstream, changed: frozenset[str], first: bool) -> None:
        lists = dict(self.view.lists.get(up.name, {}))
        meta = {
            "told": sorted(up.told),
            "capabilities": self.view.server_caps.get(up.name, {}),
            "seen": sorted(self.view.seen.get(up.name, ())),
        }
        self.snapshots.put(up.name, lists, meta)
        await self._announce(changed)
        if ("resources" in changed or first) and up.pool.member is None:  # the index may predate the snapshot
            await self._index_resources(up)

    async def _restore_session_state(self, up: Upstream, session: ClientSession) -> None:
        """Give a new upstream session the level the hosts set and the subscriptions it owns, before the
        pool marks it ready (so no call reaches it first). A level set meanwhile is applied too."""
        logging_ok = "logging" in up.capabilities
        subscribe_ok = bool((up.capabilities.get("resources") or {}).get("subscribe"))
        applied: types.LoggingLevel | None = None
        with contextlib.suppress(CofferError, MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            for uri in self.relay.subscribed() if subscribe_ok else []:
                if self.view.resource_owner(uri) == up.name:
                    subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
                    await outbound.send(session, subscribe, timeout=min(up.cfg.timeout, 10.0))
            while logging_ok and (level := self.relay.upstream_level()) not in (None, applied):  # last: nothing
                request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))  # awaits after it
                await outbound.send(session, request, timeout=min(up.cfg.timeout, 10.0))
                applied = level

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> dict[str, Any]:
        """Remember the host's level (messages below it are not forwarded) and pass it to every upstream
        that declared logging, so they need not produce what nobody will read."""
        level = self.relay.set_level(ctx.session, params.level)
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
        for _, up in self.pool.every():
            if up.session is not None and "logging" in self.view.server_caps.get(up.name, {}):
                with contextlib.suppress(CofferError, MCPError):
                    await up.request(request, timeout=min(up.cfg.timeout, 10.0))
        return for_era(ctx, {})

    async def _announce(self, changed: frozenset[str]) -> None:
        """list_changed to every legacy host, and onto the `subscriptions/listen` streams of 2026-07-28 hosts."""
        senders = []
        for kinds, event, sender in ANNOUNCED:
            if changed & kinds:
                await self.bus.publish(event)
                senders.append(sender)
        for session in list(self.relay.hosts):
            for sender in senders:
                try:
                    await getattr(session, sender)()
                except Exception:  # a host that went away must not break the others
                    self.relay.drop_host(session)
                    break

    async def _index_resources(self, up: Upstream) -> None:
        """Feed an upstream's text resources to coffer__ask's index, off every request's path."""
        try:
            items = await resources.text_resources(up)
            await anyio.to_thread.run_sync(index_resources, up.name, items)
        except (CofferError, MCPError, UpstreamUnavailable, OSError) as exc:
            log.warning("could not index the resources of %s: %s", up.name, exc)

    # ------------------------------------------------------------------ the MCP server

    def _build_server(self) -> GatewayServer:
        with warnings.catch_warnings():  # logging is deprecated at 2026-07-28; 2025 hosts still set levels
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = GatewayServer(
                BUILTIN,
                version=__version__,
                instructions=INSTRUCTIONS,
                on_list_tools=self.listings.list_tools,
                on_call_tool=self._call_tool,
                on_list_prompts=self.listings.list_prompts,
                on_get_prompt=self.router.get_prompt,
                on_list_resources=self.listings.list_resources,
                on_list_resource_templates=self.listings.list_templates,
                on_read_resource=self.router.read_resource,
                on_completion=self.router.complete,
                on_set_logging_level=self._set_level,
                on_subscribe_resource=self.router.subscribe,
                on_unsubscribe_resource=self.router.unsubscribe,
                on_subscriptions_listen=ListenHandler(self.bus),
                adjust=self._capabilities,
            )
        server.middleware.insert(0, member_middleware)  # a team member is current in all that follows
        server.middleware.append(self._task_calls)
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.tasks.get_task)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self._task_result)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.tasks.cancel_task)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self._list_tasks)
        server.add_notification_handler("notifications/initialized", types.NotificationParams, self._on_initialized)
        server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, self._on_roots)
        return server

    def _capabilities(self, caps: types.ServerCapabilities) -> types.ServerCapabilities:
        """What the upstreams make of the gateway's capabilities: subscribe, experimental, extensions
        (`View.adjust_capabilities`), and `tasks` when an enabled upstream declares them."""
        caps = self.view.adjust_capabilities(caps)
        enabled = [self.view.server_caps.get(c.name, {}) for c in self.view.current_registry().enabled_servers()]
        caps.tasks = merged_capability(enabled)
        return caps

    # ------------------------------------------------------------------ tasks (coffer.gateway.tasks)

    async def _task_calls(self, ctx: Any, call_next: Any) -> Any:
        """A task-augmented tools/call: answered here, since the SDK's result sieve refuses a task. The
        call is routed as any other; its log row is written when the task ends (`_log_task`)."""
        if not is_task_call(ctx):
            return await call_next(ctx)
        params = types.CallToolRequestParams.model_validate(ctx.params, by_name=False)
        if params.name.startswith(f"{BUILTIN}__"):  # built-ins answer at once, whatever was asked
            return await call_next(ctx)
        call = Call(server="?", tool=params.name)
        result = await self._record(ctx, call, lambda: self._route_tool(ctx, params, call), deferred=_is_task)
        return self.tasks.adopt(ctx, call.server, call.tool, result) if _is_task(result) else result

    async def _task_result(self, ctx: Any, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
        return await self.tasks.task_result(ctx, params, self.relay)

    async def _list_tasks(self, ctx: Any, params: types.PaginatedRequestParams) -> dict[str, Any]:
        return await self.tasks.list_tasks(ctx, params, paging.page_size(self.view.registry.settings))

    async def _on_notice(self, server: str, notification: Any) -> None:
        if isinstance(notification, types.TaskStatusNotification):
            await self.tasks.on_status(server, notification)

    def _log_task(self, entry: TaskEntry, outcome: str, error_class: str | None) -> None:
        """The one log row of a task, when it ends: from the call that created it, its real duration."""
        if self.calllog is not None:
            ms = (time.perf_counter() - entry.t0) * 1000.0
            call = Call(server=entry.server, tool=entry.tool)
            self._write_row(entry.client, call, entry.started, ms, outcome, error_class)

    def initialization_options(self) -> Any:
        """None: the SDK asks `GatewayServer` at each initialize, so capabilities follow the upstreams."""
        return None

    async def serve(self, read: Any, write: Any) -> None:
        """Serve one host over a transport's (read, write) streams (coffer.gateway.stdio) until it goes."""
        await self.server.run(read, write, self.initialization_options())

    async def _on_initialized(self, ctx: Any, params: Any) -> None:
        if ctx.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.relay.add_host(ctx.session)  # kept for list_changed and relaying, valid for the whole connection
        self.pool.host_known(ctx.session)  # an engine session's own servers start, told what it declared

    async def _on_roots(self, ctx: Any, params: Any) -> None:
        await self.relay.roots_changed(up.session for up in self.pool.running() if up.session)

    def share_of(self, cfg: ServerConfig) -> Share:
        """How the engine runs `cfg` (coffer.gateway.sessions), from its entry and what it was seen doing."""
        return sessions.decide(cfg, self.view.seen.get(cfg.name, ()))

    def _roots_declared(self, server: str, uris: list[str], host: Any) -> None:
        """A confined server that works on roots (server-filesystem) gets the roots its host declared:
        granted read-write, by a restart when its sandbox did not hold them (the session's own process
        under the engine, where such a server runs per session)."""
        from urllib.parse import unquote, urlsplit

        from coffer.upstreams.policy import works_on_roots

        pool = host if isinstance(host, Pool) else self.pool  # the asking session's own, or the shared one
        up = pool.upstreams.get(server)
        if up is None or up.confinement is None or not works_on_roots(up.cfg):
            return
        found = [unquote(urlsplit(u).path) for u in uris if u.startswith("file://")]
        roots = tuple(p for p in found if os.path.isdir(p))
        if roots and not all(up.confinement.writable(p) for p in roots) and set(roots) - set(up.roots):
            log.info("server '%s': its host declared roots outside its sandbox; restarting with them", server)
            up.roots = tuple(dict.fromkeys((*up.roots, *roots)))
            up.restart_soon()

    def _roots_outside_call(self, server: str) -> None:
        """A server asked for roots with no call in flight: remembered, and under the engine it runs once
        per session from now on (each asks its own host), unless its entry says how to share it."""
        if self._note_seen(server, sessions.SEEN_ROOTS) and self.pool.share is not None:
            self.pool.resync()

    def _ask_in_call(self, server: str) -> None:
        """A shared server asked its client during a call: remembered, so its calls from different
        clients take turns from the next start on too (coffer.gateway.relay)."""
        self._note_seen(server, sessions.SEEN_ASKS)

    def _note_seen(self, server: str, what: str) -> bool:
        """Remember what `server` was seen doing, here and in the catalogue; False when already known."""
        seen = self.view.seen.setdefault(server, set())
        if what in seen:
            return False
        seen.add(what)
        self.snapshots.note_seen(server, what)  # listed a moment ago and not written yet: that write carries it
        self.pool.spawn(anyio.to_thread.run_sync, catalogue.note_seen, server, what)
        return True

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
        call = Call(server="?", tool=params.name)
        context = [json.dumps(params.arguments)] if params.arguments else []  # for a denial's hint, never logged
        route = lambda: self._route_tool(ctx, params, call)  # noqa: E731
        result = await self._record(ctx, call, route, deferred=rounds.interim, context=context)
        return for_era(ctx, result)

    async def _record(
        self,
        ctx: Any,
        call: Call,
        run: Callable[[], Awaitable[dict[str, Any]]],
        deferred: Callable[[dict[str, Any]], bool] | None = None,
        context: list[str] | None = None,
    ) -> dict[str, Any]:
        """Run one tools/call, turn failures into isError results, and log who/what/how long/outcome;
        a result `deferred` says is not the end (a task) is logged when it ends, not here. `context`: the
        call's arguments as text, read (with what the server wrote to stderr meanwhile) for a denial's hint."""
        started, t0 = time.time(), time.perf_counter()
        marks = {name: up.stats.fed for name, up in self.pool.upstreams.items()}
        outcome: str | None = "ok"
        error_class = None
        try:
            result = await run()
            if deferred is not None and deferred(result):
                outcome = None
            elif result.get("isError"):
                outcome, error_class = call.failed_as or ("error", "tool_error")
                result = self._with_denial(call.server, result, context or [], marks)
            return result
        except HostError as exc:  # the upstream's JSON-RPC error, as it is (URL elicitation required)
            outcome, error_class = exc.outcome, exc.error_class
            raise exc.error from None
        except WallGone:  # the member's profile was removed: refused as a JSON-RPC error, not a bug
            outcome, error_class = "refused", "profile_gone"
            raise
        except CallFailure as exc:
            outcome, error_class = exc.outcome, exc.error_class
            return text_result(scrub(str(exc)), error=True)  # may quote an upstream's message or stderr
        except anyio.get_cancelled_exc_class():
            outcome = "cancelled"
            raise
        except Exception as exc:  # a gateway bug must still answer the host, not drop the call
            log.exception("tools/call %s failed inside coffer", call.tool)
            outcome, error_class = "error", type(exc).__name__
            return text_result(f"coffer: internal error while calling {call.tool}: {type(exc).__name__}", True)
        finally:
            call.outcome = outcome
            if outcome is not None and (self.calllog is not None or self.telemetry is not None):
                ms = (time.perf_counter() - t0) * 1000.0
                client = host_client(ctx.session)
                member = http_member(ctx)
                if self.calllog is not None:
                    self._write_row(client, call, started, ms, outcome, error_class, member)
                if self.telemetry is not None:  # attributes on the SDK's span of this request, and metrics
                    session = format(id(host_connection(ctx.session)), "x")
                    self.telemetry.record(call.server, call.tool, outcome, ms, client[0], session, member)

    def _unreachable(self) -> dict[str, str]:
        """Servers a call cannot reach now (down, or failed for good), with why: search marks their tools."""
        out: dict[str, str] = {}
        for name, up in self.pool.upstreams.items():
            if up.state in (State.DOWN, State.FAILED):
                out[name] = f"server '{name}' is {up.state.value}: {up.last_error or 'it did not start'}"
        return out

    def _with_denial(
        self, server: str, result: dict[str, Any], context: list[str], marks: dict[str, int]
    ) -> dict[str, Any]:
        """A failed call that its server's sandbox caused says so, with the command that grants it (or,
        behind a wall, why Coffer hides it)."""
        up = self.pool.get(server) if server != "?" else None
        if up is None or up.confinement is None:
            return result
        content = result.get("content") or []
        text = "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        stderr = up.stats.stderr_since(marks.get(server, up.stats.fed))
        hint = denials.hint(up.confinement, server, text, context=context, stderr=stderr)
        if hint is None:
            return result
        return {**result, "content": [*content, {"type": "text", "text": f"coffer: {hint}"}]}

    def _write_row(
        self,
        client: tuple[str | None, str | None],
        call: Call,
        ts: float,
        ms: float,
        outcome: str,
        error: str | None,
        member: str | None = None,
    ) -> None:
        assert self.calllog is not None
        self.calllog.record(
            CallRecord(
                ts=ts,
                client_name=client[0],
                client_version=client[1],
                server=call.server,
                tool=call.tool,
                duration_ms=ms,
                outcome=outcome,
                error_class=error,
                kept=call.kept,
                result_bytes=call.result_bytes,
                run=call.run,
                parent=call.parent,
                member=member,
            )
        )

    async def _route_tool(self, ctx: Any, params: types.CallToolRequestParams, call: Call) -> dict[str, Any]:
        """Built-ins are answered here; every other name goes down the router's one path."""
        self.view.current_registry()
        args = params.arguments or {}
        if params.name == CALL:  # a tool the profile hides, through the same path as a direct call
            target = args.get("name")
            if not isinstance(target, str) or not target or target.startswith(f"{BUILTIN}__"):
                raise CallFailure("error", "bad_arguments", f"{CALL} needs the name of an upstream tool")
            inner = args.get("arguments") or {}
            if not isinstance(inner, dict):
                raise CallFailure("error", "bad_arguments", f"{CALL}: 'arguments' must be an object")
            call.tool = target
            forwarded = types.CallToolRequestParams(name=target, arguments=inner, _meta=params.meta)
            return await self.router.call_tool(ctx, forwarded, call)
        if params.name not in (SEARCH, ASK, READ, RUN):
            return await self.router.call_tool(ctx, params, call)
        call.server, call.tool = BUILTIN, params.name.removeprefix(f"{BUILTIN}__")
        if params.name == RUN:  # code mode: each call of the script through `_record` and the router
            return await self.router.run_script(ctx, params, call, self._record, self.listings.profile)
        if params.name == READ:
            return await bigresults.read_tool(args, bigresults.cap_for(self.view.registry.settings, None, params.meta))
        if params.name == SEARCH:
            m = self.view.merged()
            reg = self.view.registry
            bound = self.listings.bound()
            visible, key = walled(bound, m.visible_tools, m.key)
            withheld = builtins.withheld(m.tools, m.visible_tools, reg) if bound is None else []  # not a member's
            return await builtins.search_tools(
                visible,
                key,
                args,
                self.listings.hidden(),
                list(reg.registries.values()),
                withheld,
                self._unreachable(),
            )
        reached = self.listings.servers_reached()
        servers = curation.visible_servers(self.view.registry, self.view.pins)
        return await builtins.ask(ctx, args, [s for s in servers if reached is None or s in reached])


def _is_task(result: dict[str, Any]) -> bool:
    return isinstance(result.get("task"), dict)
