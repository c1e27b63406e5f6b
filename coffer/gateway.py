"""The gateway: one MCP server (the SDK's lowlevel `Server`) over every enabled upstream.

It merges tools and prompts as `<server>__<name>` (names from `catalogue.build_tools`), passes
resources and templates through with their owner recorded for routing, and routes tools/call
(prompts/get, resources/read and completion/complete in `coffer.routes`; what upstreams ask of the
host, sampling, elicitation, roots and logs, in `coffer.relay`). The first tools/list comes from the
catalogue snapshot, so a host with a 10 s start budget never waits for slow upstreams; every live
listing replaces the snapshot's entry, is written back to it, and is announced to the host with
list_changed. Hosts keep the list they got at start, so curation is decided again at call time by
`refusal()`. Every tools/call, built-ins included, passes through `_record()`, which times it and
writes the invocation log.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from coffer import __version__, builtins, catalogue, paths, registry, routes
from coffer.builtins import ASK, BUILTIN, SEARCH, CallFailure, text_result
from coffer.catalogue import KINDS, CatalogueTool, build_tools
from coffer.errors import CofferError, RegistryError
from coffer.merge import Merged, merge
from coffer.pool import START_SLOTS, Pool
from coffer.redact import scrub
from coffer.relay import Relay
from coffer.routes import for_era
from coffer.upstream import Upstream, UpstreamUnavailable

if TYPE_CHECKING:
    from coffer.log import CallLog
    from coffer.pinning import Pins

log = logging.getLogger("coffer.gateway")

DISCOVERY_BUDGET_S = 5.0  # how long a first tools/list may wait for servers the snapshot has never seen
INSTRUCTIONS = (
    "Coffer serves the tools of several MCP servers as <server>__<tool>. When you are not sure which "
    "tool fits, call coffer__search_tools with the action you want; coffer__ask searches the user's notes "
    "and the servers' documents."
)


LEGACY_CHANGED = NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True)
RELAYED_CAPS = ("sampling", "elicitation", "roots")  # host capabilities an upstream's listing may depend on


class _GatewayServer(Server[Any]):
    """The SDK's server, with capabilities decided when each host initializes: list_changed on,
    `logging` always (Coffer filters and forwards levels), `resources.subscribe` only when an enabled
    upstream can subscribe."""

    can_subscribe: Callable[[], bool] = staticmethod(lambda: False)

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        return super().create_initialization_options(notification_options or LEGACY_CHANGED, *args, **kwargs)

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        caps = super().get_capabilities(*args, **kwargs)
        if caps.resources is not None and caps.resources.subscribe:
            caps.resources.subscribe = self.can_subscribe()
        return caps


def host_caps(ctx: Any) -> frozenset[str]:
    """Which of the relayable capabilities (sampling, elicitation, roots) the requesting host declared."""
    caps = getattr(ctx.session, "client_capabilities", None)
    return frozenset(c for c in RELAYED_CAPS if caps is not None and getattr(caps, c, None) is not None)


@dataclass
class _Call:
    server: str
    tool: str


class Gateway:
    """State behind `coffer serve`: the registry (re-read when it changes), the listings, the pool."""

    def __init__(
        self,
        *,
        calllog: CallLog | None = None,
        start_limit: int = START_SLOTS,
        discovery_budget: float = DISCOVERY_BUDGET_S,
        host_wait: float | None = None,
    ) -> None:
        """`host_wait`: how long upstream handshakes wait for the host's capabilities (None: many hosts)."""
        self.calllog = calllog
        self.discovery_budget = discovery_budget
        self.relay = Relay(host_wait)  # upstream sampling/elicitation/roots/logs to the host (coffer.relay)
        self.pool = Pool(limit=start_limit, on_listing=self._on_listing, relay=self.relay)
        self.registry_path = paths.registry_path()  # resolved once: it is stat'ed on every request
        self.registry = registry.Registry(path=self.registry_path)
        self._reg_stamp: tuple[int, int, int] | None = None
        self._lists: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self._live: set[str] = set()
        self._told: dict[str, frozenset[str]] = {}  # snapshot entries: host capabilities they were listed under
        self._server_caps: dict[str, dict[str, Any]] = {}  # what each upstream declared (live, else snapshot)
        self._version = 0
        self._merged: tuple[int, Merged] | None = None
        self._refusals: tuple[int, dict[tuple[str, str | None, str | None], str | None]] = (-1, {})
        self._snapshot_lock = anyio.Lock()
        self._started_at = 0.0
        self._builtins = builtins.tool_definitions()
        self.pins: Pins | None = None  # trust (coffer.pinning): unapproved launch configs, held tools
        self._pins_stamp = -1
        self.server = self._build_server()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Load the snapshot, start the upstreams in the background; stop them all on exit."""
        from coffer.pinning import Pins

        async with self.pool:
            with Pins.open(new_tools="allow") as self.pins:  # the registry's setting is applied in _sync()
                self._started_at = anyio.current_time()
                self._load_snapshot()
                self.current_registry()
                yield self

    def _load_snapshot(self) -> None:
        try:
            snap = catalogue.load_snapshot()
        except RegistryError as exc:
            log.warning("%s", exc)
            return
        for name, entry in (snap.servers if snap else {}).items():
            self._lists[name] = {kind: list(getattr(entry, kind)) for kind in KINDS}
            self._told[name] = frozenset(entry.told)
            self._server_caps[name] = dict(entry.capabilities)
            if self.pins is not None:  # a snapshot written elsewhere (refresh) may hold a changed tool
                self.pins.observe(name, build_tools(name, entry.tools, self._prefix(name)))
        self._version += 1

    def current_registry(self) -> registry.Registry:
        """The registry, re-read only when the file changed; a broken file keeps the last good one."""
        path = self.registry_path
        try:
            st = path.stat()
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp != self._reg_stamp:
            self._reg_stamp = stamp
            try:
                self.registry = registry.load(path)
            except RegistryError as exc:
                log.error("keeping the last good registry: %s", exc)
                return self.registry
            self._version += 1
            self._sync()
        elif self.pins is not None and self.pins.stamp() != self._pins_stamp:  # e.g. `coffer approve`
            self._version += 1
            self._sync()
        return self.registry

    def _prefix(self, server: str) -> str | None:
        cfg = self.registry.servers.get(server)
        return None if cfg is None else cfg.exposed_prefix

    def _sync(self) -> None:
        """Run the enabled servers whose launch config is approved (coffer.pinning); stop the others."""
        servers = self.registry.enabled_servers()
        if self.pins is not None:
            servers, self._pins_stamp = self.pins.startable(self.registry), self.pins.stamp()
        self.pool.sync(servers)

    def refusal(self, server: str, tool: str | None = None, exposed: str | None = None) -> str | None:
        """Why `server` (or one of its tools) may not be listed or called now; None when it may.

        Decides tools/list, coffer__search_tools and every call, by `catalogue.refusal`: the same rule
        `coffer search` and `coffer doctor` apply to the snapshot. Remembered until the registry or the
        trust state changes (`_version`), since each check hashes the server's launch config.
        """
        if self._refusals[0] != self._version:
            self._refusals = (self._version, {})
        key = (server, tool, exposed)
        known = self._refusals[1]
        if key not in known:
            known[key] = catalogue.refusal(self.registry, self.pins, server, tool, exposed)
        return known[key]

    # ------------------------------------------------------------------ merged view

    def merged(self) -> Merged:
        """The merged view, rebuilt only when a listing, the registry or the trust state changed."""
        if self._merged is None or self._merged[0] != self._version:
            prefixes = catalogue.prefixes(self.registry)
            self._merged = (self._version, merge(self._lists, self.refusal, self._builtins, prefixes))
        return self._merged[1]

    async def _await_discovery(self, unfit: Collection[str] = ()) -> None:
        """Before answering tools/list, give never-catalogued servers (and `unfit` snapshot entries) a
        short, bounded chance to list."""
        deadline = self._started_at + self.discovery_budget
        for name, up in list(self.pool.upstreams.items()):
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                return
            if name not in self._lists or (name in unfit and name not in self._live):
                await up.wait_settled(remaining)

    # ------------------------------------------------------------------ upstream listings

    def _on_listing(self, up: Upstream, kinds: frozenset[str]) -> None:
        """An upstream listed (at start or after list_changed): merge now, persist and announce later."""
        if up.listing is None or self.pool.get(up.name) is not up:
            return
        lists = self._lists.setdefault(up.name, {kind: [] for kind in KINDS})
        changed = frozenset(k for k in kinds if lists.get(k) != getattr(up.listing, k))
        for kind in kinds:
            lists[kind] = list(getattr(up.listing, kind))
        if "tools" in kinds and self.pins is not None:
            self.pins.observe(up.name, build_tools(up.name, lists["tools"], self._prefix(up.name)))  # holds rug pulls
        first = up.name not in self._live
        self._live.add(up.name)
        if up.capabilities:
            self._server_caps[up.name] = up.capabilities
        if changed:
            self._version += 1
        if kinds == frozenset(KINDS):  # a new session: it knows nothing of levels or subscriptions yet
            self.pool.spawn(self._restore_session_state, up)
        if changed or first:
            self.pool.spawn(self._after_listing, up, changed, first)

    async def _after_listing(self, up: Upstream, changed: frozenset[str], first: bool) -> None:
        lists = dict(self._lists.get(up.name, {}))
        meta = {"told": sorted(up.told), "capabilities": self._server_caps.get(up.name, {})}
        async with self._snapshot_lock:
            try:
                await anyio.to_thread.run_sync(lambda: catalogue.save_server(up.name, meta=meta, **lists))
            except (CofferError, OSError) as exc:
                log.warning("could not write the catalogue snapshot for %s: %s", up.name, exc)
        await self._announce(changed)
        if "resources" in changed or first:  # the index may predate this vault's snapshot
            await self._index_resources(up)

    async def _restore_session_state(self, up: Upstream) -> None:
        """Give a (re)started upstream the host's log level and the subscriptions it owns."""
        level = self.relay.upstream_level()
        caps = self._server_caps.get(up.name, {})
        with contextlib.suppress(CofferError, MCPError):
            if level is not None and "logging" in caps:
                await up.request(types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)))
            if (caps.get("resources") or {}).get("subscribe"):
                for uri in self.relay.subscribed():
                    if routes.resource_owner(self, uri) == up.name:
                        await up.request(types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)))

    def can_subscribe(self) -> bool:
        """Whether any enabled server declared `resources.subscribe` (live, else as last catalogued)."""
        reg = self.current_registry()
        return any(
            (self._server_caps.get(cfg.name, {}).get("resources") or {}).get("subscribe")
            for cfg in reg.enabled_servers()
        )

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> dict[str, Any]:
        """Remember the host's level (messages below it are not forwarded) and pass it to every upstream
        that declared logging, so they need not produce what nobody will read."""
        level = self.relay.set_level(ctx.session, params.level)
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))  # type: ignore[arg-type]
        for name, up in list(self.pool.upstreams.items()):
            if up.session is not None and "logging" in self._server_caps.get(name, {}):
                with contextlib.suppress(CofferError, MCPError):
                    await up.request(request, timeout=min(up.cfg.timeout, 10.0))
        return for_era(ctx, {})

    async def _announce(self, changed: frozenset[str]) -> None:
        senders = []
        if "tools" in changed:
            senders.append("send_tool_list_changed")
        if "prompts" in changed:
            senders.append("send_prompt_list_changed")
        if changed & {"resources", "resource_templates"}:
            senders.append("send_resource_list_changed")
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
            items = await up.text_resources()
            from coffer.memory import index_resources

            await anyio.to_thread.run_sync(index_resources, up.name, items)
        except (CofferError, MCPError, UpstreamUnavailable, OSError) as exc:
            log.warning("could not index the resources of %s: %s", up.name, exc)

    # ------------------------------------------------------------------ the MCP server

    def _build_server(self) -> _GatewayServer:
        with warnings.catch_warnings():  # logging is deprecated at 2026-07-28; 2025 hosts still set levels
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = _GatewayServer(
                BUILTIN,
                version=__version__,
                instructions=INSTRUCTIONS,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_prompts=self._list_prompts,
                on_get_prompt=partial(routes.get_prompt, self),
                on_list_resources=self._list_resources,
                on_list_resource_templates=self._list_templates,
                on_read_resource=partial(routes.read_resource, self),
                on_completion=partial(routes.complete, self),
                on_set_logging_level=self._set_level,
                on_subscribe_resource=partial(routes.subscribe, self),
                on_unsubscribe_resource=partial(routes.unsubscribe, self),
            )
        server.can_subscribe = self.can_subscribe  # type: ignore[method-assign]
        server.add_notification_handler("notifications/initialized", types.NotificationParams, self._on_initialized)
        server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, self._on_roots)
        server.middleware = []  # the default OpenTelemetry span is a no-op without an exporter, but not free
        return server

    def initialization_options(self) -> Any:
        """None: the SDK asks `_GatewayServer` at each initialize, so capabilities follow the upstreams."""
        return None

    async def _on_initialized(self, ctx: Any, params: Any) -> None:
        if ctx.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.relay.add_host(ctx.session)  # kept for list_changed and relaying, valid for the whole connection

    async def _on_roots(self, ctx: Any, params: Any) -> None:
        await self.relay.roots_changed(up.session for up in list(self.pool.upstreams.values()) if up.session)

    async def _listing(self, ctx: Any) -> Merged:
        """The merged view a list request answers from: current curation, new servers given their chance.

        A snapshot entry listed while its upstream was told of capabilities this host lacks (a roots
        tool after a host with roots) is not shown: that server is waited for like a new one.
        """
        self.current_registry()
        have = host_caps(ctx)
        unfit = {s for s, told in self._told.items() if s not in self._live and not told <= have}
        await self._await_discovery(unfit)
        unfit = {s for s in unfit if s not in self._live}
        if not unfit:
            return self.merged()
        lists = {s: v for s, v in self._lists.items() if s not in unfit}
        return merge(lists, self.refusal, self._builtins, catalogue.prefixes(self.registry))

    async def _list_tools(self, ctx: Any, params: Any) -> dict[str, Any]:
        self.relay.note_host(ctx.session)  # a 2026-07-28 host sends no notifications/initialized
        return for_era(ctx, {"tools": (await self._listing(ctx)).tools_result}, cacheable=True)

    async def _list_prompts(self, ctx: Any, params: Any) -> dict[str, Any]:
        return for_era(ctx, {"prompts": (await self._listing(ctx)).prompts_result}, cacheable=True)

    async def _list_resources(self, ctx: Any, params: Any) -> dict[str, Any]:
        return for_era(ctx, {"resources": (await self._listing(ctx)).resources_result}, cacheable=True)

    async def _list_templates(self, ctx: Any, params: Any) -> dict[str, Any]:
        return for_era(ctx, {"resourceTemplates": (await self._listing(ctx)).templates_result}, cacheable=True)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
        call = _Call(server="?", tool=params.name)
        return for_era(ctx, await self._record(ctx, call, lambda: self._route_tool(ctx, params, call)))

    async def _record(self, ctx: Any, call: _Call, run: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run one tools/call, turn failures into isError results, and log who/what/how long/outcome."""
        started, t0 = time.time(), time.perf_counter()
        outcome, error_class = "ok", None
        try:
            result = await run()
            if result.get("isError"):
                outcome, error_class = "error", "tool_error"
            return result
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
            if self.calllog is not None:
                self._log_call(ctx, call, started, (time.perf_counter() - t0) * 1000.0, outcome, error_class)

    def _log_call(self, ctx: Any, call: _Call, ts: float, ms: float, outcome: str, error_class: str | None) -> None:
        from coffer.log import CallRecord

        client = getattr(getattr(ctx.session, "client_params", None), "client_info", None)
        assert self.calllog is not None
        self.calllog.record(
            CallRecord(
                ts=ts,
                client_name=getattr(client, "name", None),
                client_version=getattr(client, "version", None),
                server=call.server,
                tool=call.tool,
                duration_ms=ms,
                outcome=outcome,
                error_class=error_class,
            )
        )

    async def _route_tool(self, ctx: Any, params: types.CallToolRequestParams, call: _Call) -> dict[str, Any]:
        self.current_registry()
        args = params.arguments or {}
        if params.name in (SEARCH, ASK):
            call.server, call.tool = BUILTIN, params.name.removeprefix(f"{BUILTIN}__")
            if params.name == SEARCH:
                m = self.merged()
                return await builtins.search_tools(m.visible_tools, m.key, args)
            return await builtins.ask(ctx, args, catalogue.visible_servers(self.registry, self.pins))
        entry = await self._resolve(params.name, call)
        call.server, call.tool = entry.server, entry.tool
        reason = self.refusal(entry.server, entry.tool, entry.name)
        if reason is not None:
            raise CallFailure("refused", "curation", f"coffer refused {params.name}: {reason}")
        up = self.pool.get(entry.server)
        if up is None:
            raise CallFailure(
                "refused", "curation", f"coffer refused {params.name}: server '{entry.server}' is not running"
            )
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=entry.tool, arguments=params.arguments))
        try:
            with self.relay.origin(entry.server, ctx):  # what the upstream asks meanwhile goes to this host
                return await up.request(request, progress=self._progress(ctx))
        except UpstreamUnavailable as exc:
            raise CallFailure("error", "unavailable", str(exc)) from exc
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                msg = f"{params.name} timed out after {up.cfg.timeout:g}s; the call was cancelled upstream"
                raise CallFailure("timeout", "timeout", msg) from exc
            raise CallFailure("error", "upstream_error", f"{entry.server}: {exc.message}") from exc

    async def _resolve(self, name: str, call: _Call) -> CatalogueTool:
        entry = self.merged().tools.get(name)
        if entry is not None:
            return entry
        head, _, _ = name.partition(registry.SEP)
        server = next((c.name for c in self.registry.servers.values() if c.exposed_prefix == head), head)
        call.server = server if server in self.registry.servers else "?"
        up = self.pool.get(server)
        if up is not None and server not in self._live:
            try:  # never listed (no snapshot yet): a call waits for the server up to its timeout
                await up.ready_session(up.cfg.timeout)
            except UpstreamUnavailable as exc:
                raise CallFailure("error", "unavailable", str(exc)) from exc
            entry = self.merged().tools.get(name)
            if entry is not None:
                return entry
        reason = self.refusal(server) if server in self.registry.servers else None
        if reason is not None:
            raise CallFailure("refused", "curation", f"coffer refused {name}: {reason}")
        raise CallFailure("error", "unknown_tool", f"unknown tool '{name}' (find tools with {SEARCH})")

    @staticmethod
    def _progress(ctx: Any) -> Callable[[float, float | None, str | None], Awaitable[None]] | None:
        """Ask the upstream for progress only when the host asked us for it; relay it under the host's token."""
        if (ctx.meta or {}).get("progress_token") is None:
            return None

        async def forward(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        return forward
