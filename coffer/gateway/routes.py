"""Routing: every host request that belongs to one upstream goes through a Router, down one path.

tools/call: decide curation (`View.refusal`), resolve the exposed name to its server and tool (waiting
for a server that has never listed), route to that server's upstream, and mark the call in flight on
it (`coffer.gateway.relay`) so what the upstream asks meanwhile reaches this host. prompts/get goes by
the prompt's exposed name, resources/read and subscribe by the resource's URI (or the first template
that matches it), completion/complete by its reference. tools/call failures become `CallFailure`
(an isError result, logged by the server); the others have no isError result, so their failures are
JSON-RPC errors, with text passed through `coffer.trust.redact` since it may quote an upstream.
A coffer__run script's calls (coffer.codemode) take the same tools/call path, one by one.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import anyio
import mcp_types as types
from mcp import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from coffer.codemode import policy
from coffer.errors import CofferError
from coffer.gateway import bigresults, merge
from coffer.gateway.advertise import reaches, walled
from coffer.gateway.builtins import BUILTIN, SEARCH, CallFailure, HostError, search_tools, text_arg, text_result
from coffer.gateway.pool import Pool
from coffer.gateway.relay import Relay
from coffer.gateway.rounds import Round, Rounds, UnknownRound
from coffer.gateway.tasks import TaskRelay, task_required
from coffer.gateway.view import View
from coffer.trust.redact import scrub
from coffer.upstreams.upstream import UpstreamUnavailable
from coffer.vault.catalogue import CatalogueTool
from coffer.vault.profiles import Profile

log = logging.getLogger("coffer.gateway")
# the server's `_record`: runs one tools/call, turns failures into results, writes its log row
Recorder = Callable[[Any, "Call", Callable[[], Awaitable[dict[str, Any]]]], Awaitable[dict[str, Any]]]
NO_COMPLETION: dict[str, Any] = {"completion": {"values": [], "hasMore": False}}
# Request `_meta` keys that describe the host's own connection (2026-07-28 stamps them on every request):
# the upstream connection gets its own from the SDK, so these are not passed on. The progress token is
# Coffer's own upstream (the host's is answered by the gateway).
CONNECTION_META = frozenset(
    {
        "progress_token",
        "progressToken",
        types.PROTOCOL_VERSION_META_KEY,
        types.CLIENT_INFO_META_KEY,
        types.CLIENT_CAPABILITIES_META_KEY,
        types.LOG_LEVEL_META_KEY,
    }
)


def passed_meta(meta: Mapping[str, Any] | None) -> types.RequestParamsMeta | None:
    """The host's request `_meta` as the upstream should get it: trace context (`traceparent`,
    `tracestate`, SEP-414) and every vendor key, without the host connection's own keys."""
    kept = {k: v for k, v in (meta or {}).items() if k not in CONNECTION_META}
    return cast(types.RequestParamsMeta, kept) if kept else None


def for_era(ctx: Any, result: dict[str, Any], cacheable: bool = False) -> dict[str, Any]:
    """Add the envelope 2026-07-28 results require (typed results get it from their defaults, dicts don't)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return result
    envelope: dict[str, Any] = {"resultType": "complete"}
    if cacheable:  # never cached: upstreams come and go and curation changes under the host
        envelope |= {"ttlMs": 0, "cacheScope": "private"}
    return envelope | result


@dataclass
class Call:
    """Who a tools/call went to, filled in as it is resolved (for the invocation log: never its content)."""

    server: str
    tool: str
    kept: str | None = None  # the id of the result, when it was over the cap and kept (coffer.gateway.bigresults)
    result_bytes: int | None = None  # the kept result's size
    run: str | None = None  # a coffer__run call: its id, which its inner calls name as their parent
    parent: str | None = None  # a call a coffer__run script made: the run's id
    outcome: str | None = None  # how it ended, once it has (the invocation log's outcome)
    failed_as: tuple[str, str] | None = None  # an isError result's (outcome, error class), where not "error"


class Router:
    """Routes one gateway's host requests to the owning upstreams."""

    def __init__(self, view: View, pool: Pool, relay: Relay, tasks: TaskRelay) -> None:
        self.view = view
        self.pool = pool
        self.relay = relay
        self.tasks = tasks
        self.rounds = Rounds(pool.spawn)  # 2026-07-28 hosts: asks become input_required results
        self._worker: str | None = None  # coffer__run's worker launcher ("": unconfined here)
        # the profile walling in the team member being served (coffer.gateway.advertise; the gateway
        # sets it to `Listings.bound`), and the servers whose prompts and resources it reaches
        self.bound: Callable[[], Profile | None] = lambda: None
        self.servers_reached: Callable[[], set[str] | None] = lambda: None

    # ------------------------------------------------------------------ tools/call

    async def call_tool(
        self,
        ctx: Any,
        params: types.CallToolRequestParams,
        call: Call,
        script: Callable[[CatalogueTool], str | None] | None = None,
    ) -> dict[str, Any]:
        """Curation, resolution, routing, relay: the one path of an upstream tools/call.

        A `task` in `params` is passed on (the result is then the upstream's task, for the caller to
        adopt: coffer.gateway.tasks); a tool that requires a task, called without one, is run as a
        task upstream and answered as a plain call (the bridge). `script`: the call is a coffer__run
        script's, which says why it may not call a tool (coffer.codemode.policy); its result comes back
        whole (the script, not the agent, reads it) and never as a 2026-07-28 round.
        """
        view = self.view
        try:  # a retry's requestState is checked before anything starts
            self.rounds.check(("tools/call", params.name), params)
        except UnknownRound as exc:
            raise HostError("bad_request_state", exc) from exc
        entry = await self._resolve(params.name, call)
        if not reaches(self.bound(), entry):  # outside a member's profile: as if it were not there
            call.server, call.tool = "?", params.name
            raise CallFailure("error", "unknown_tool", f"unknown tool '{params.name}' (find tools with {SEARCH})")
        call.server, call.tool = entry.server, entry.tool
        reason = view.refusal(entry.server, entry.tool, entry.name)
        if reason is not None:
            raise CallFailure("refused", "curation", f"coffer refused {params.name}: {reason}")
        reason = script(entry) if script is not None else None
        if reason is not None:
            raise CallFailure("refused", "code_mode", f"coffer refused {params.name} in a script: {reason}")
        up = self.pool.get(entry.server)
        if up is None:
            raise CallFailure(
                "refused", "curation", f"coffer refused {params.name}: server '{entry.server}' is not running"
            )
        upstream_params = types.CallToolRequestParams(
            name=entry.tool, arguments=params.arguments, _meta=passed_meta(params.meta), task=params.task
        )
        bridged = params.task is None and task_required(entry.raw)
        progress = _progress(ctx)

        async def run(round_: Round | None = None) -> dict[str, Any]:
            async with self.relay.origin(entry.server, ctx, round_, up):  # what it asks meanwhile goes to this host
                if bridged:
                    return await self.tasks.run_as_task(up, upstream_params, up.cfg.timeout, progress)
                return await up.request(types.CallToolRequest(params=upstream_params), progress=progress)

        try:
            if script is None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # asks come back as results
                result = await self.rounds.run(ctx, ("tools/call", params.name), params, run, up.cfg.timeout)
            else:
                result = await run()
        except UpstreamUnavailable as exc:
            raise CallFailure("error", "unavailable", str(exc)) from exc
        except UnknownRound as exc:  # a JSON-RPC error, as for any bad parameter
            raise HostError("bad_request_state", exc) from exc
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                msg = f"{params.name} timed out after {up.cfg.timeout:g}s; the call was cancelled upstream"
                raise CallFailure("timeout", "timeout", msg) from exc
            if exc.code == types.URL_ELICITATION_REQUIRED:  # the host runs the flow from `data`, then retries
                self.relay.note_elicitations(entry.server, exc.data, ctx.session)
                error = MCPError(code=exc.code, message=scrub(exc.message), data=exc.data)
                raise HostError("url_elicitation_required", error) from exc
            raise CallFailure("error", "upstream_error", f"{entry.server}: {exc.message}") from exc
        renamed = view.merged().ui_renamed.get(entry.server)  # its app under the URI hosts were given
        result = merge.rewrite_meta(result, renamed) if renamed else result
        if script is not None:
            return result
        cap = bigresults.cap_for(view.registry.settings, up.cfg, params.meta)
        schema = entry.raw.get("outputSchema") is not None
        result, kept = await bigresults.shrink(result, entry.server, entry.tool, cap, view.registry.settings, schema)
        if kept is not None:
            call.kept, call.result_bytes = kept.id, kept.bytes
        return result

    async def _resolve(self, name: str, call: Call) -> CatalogueTool:
        view = self.view
        entry = view.merged().tools.get(name)
        if entry is not None:
            return entry
        server = view.server_of(name)
        call.server = server if server in view.registry.servers else "?"
        # never listed (no snapshot yet): a call waits for the server up to its timeout; a bare name
        # (prefix "") may be any unlisted bare server's
        bare = [c.name for c in view.registry.servers.values() if c.exposed_prefix == "" and c.name not in view.live]
        for candidate in [server] if server in view.registry.servers else bare:
            up = self.pool.get(candidate)
            if up is None or candidate in view.live:
                continue
            try:
                await up.ready_session(up.cfg.timeout)
            except UpstreamUnavailable as exc:
                if candidate == server:
                    raise CallFailure("error", "unavailable", str(exc)) from exc
                continue
            entry = view.merged().tools.get(name)
            if entry is not None:
                return entry
        reason = view.refusal(server) if server in view.registry.servers else None
        if reason is not None:
            raise CallFailure("refused", "curation", f"coffer refused {name}: {reason}")
        raise CallFailure("error", "unknown_tool", f"unknown tool '{name}' (find tools with {SEARCH})")

    # ------------------------------------------------------------------ coffer__run (coffer.codemode)

    async def run_script(
        self, ctx: Any, params: types.CallToolRequestParams, call: Call, record: Recorder, profile: Profile | None
    ) -> dict[str, Any]:
        """A script whose every call takes `record` (the invocation log, as its own row naming this run)
        and `call_tool`'s one path, with code mode's rule on what it may call; its outcome is kept like
        any result over the cap."""
        from coffer.codemode import sandbox, values

        settings = self.view.registry.settings
        if not policy.enabled(settings, profile):
            raise CallFailure("refused", "code_mode_off", f"coffer refused {policy.TOOL}: {policy.OFF}")
        try:
            limits = policy.limits(settings)
        except CofferError as exc:
            raise CallFailure("error", "bad_settings", str(exc)) from exc
        code = text_arg(params.arguments or {}, "code", policy.TOOL)
        call.run = secrets.token_hex(8)

        def may_call(entry: CatalogueTool) -> str | None:
            cfg = self.view.registry.servers.get(entry.server)
            return "its server is gone" if cfg is None else policy.refusal(cfg, entry.tool, entry.raw)

        async def inner(name: str, arguments: dict[str, Any]) -> Any:
            sub = Call(server="?", tool=name, parent=call.run)
            forwarded = types.CallToolRequestParams(name=name, arguments=arguments, _meta=params.meta)
            result = await record(ctx, sub, lambda: self.call_tool(ctx, forwarded, sub, may_call))
            return values.script_value(result, sub.outcome)

        async def search(query: str, k: int) -> list[dict[str, Any]]:
            m = self.view.merged()
            tools, key = walled(self.bound(), m.visible_tools, m.key)
            found = await search_tools(tools, key, {"query": query, "top_k": k})
            return [
                {key: t[key] for key in ("name", "description", "inputSchema")}
                | {"callable": t["name"] in m.tools and may_call(m.tools[t["name"]]) is None}
                for t in (found.get("structuredContent") or {}).get("tools", [])
            ]

        if self._worker is None:  # found once: the launcher that confines the script's worker process
            self._worker = await anyio.to_thread.run_sync(_script_worker)
        outcome = await sandbox.run(code, sandbox.Host(inner, search), limits, self._worker or None)
        result = text_result(outcome.payload(), error=outcome.error is not None)
        if outcome.timed_out:  # the log says timeout, as for a tool call that ran past its time
            call.failed_as = ("timeout", "script_timeout")
        cap = bigresults.cap_for(settings, None, params.meta)
        result, kept = await bigresults.shrink(result, BUILTIN, "run", cap, settings, False)
        if kept is not None:
            call.kept, call.result_bytes = kept.id, kept.bytes
        return result

    # ------------------------------------------------------------------ other requests

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> dict[str, Any]:
        self.view.current_registry()
        entry = self.view.merged().prompts.get(params.name)
        if entry is None or not self._reaches(entry.server):
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt '{params.name}'")
        reason = self.view.refusal(entry.server)
        if reason is not None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"coffer refused prompt {params.name}: {reason}")
        request = types.GetPromptRequest(
            params=types.GetPromptRequestParams(
                name=entry.tool, arguments=params.arguments, _meta=passed_meta(params.meta)
            )
        )
        return for_era(ctx, await self.forward(ctx, entry.server, request))

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> dict[str, Any]:
        self.view.current_registry()
        uri = str(params.uri)
        if bigresults.is_kept_uri(uri):  # a result kept by this gateway: read back whole
            return for_era(ctx, await bigresults.read(uri))
        server = self.view.resource_owner(uri)
        if server is None or not self._reaches(server):
            raise MCPError(code=types.INVALID_PARAMS, message=f"no enabled server serves resource {uri}")
        own = self.view.merged().ui_aliases.get(uri, (server, uri))[1]  # an app renamed for this server
        request = types.ReadResourceRequest(
            params=types.ReadResourceRequestParams(uri=own, _meta=passed_meta(params.meta))
        )
        result = merge.rewrite_contents(await self.forward(ctx, server, request), own, uri)
        return for_era(ctx, result, cacheable=True)

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> dict[str, Any]:
        """Subscribe the host to a resource: the owning upstream is asked once, however many hosts subscribe."""
        self.view.current_registry()
        uri = str(params.uri)
        server = self._subscribable_owner(uri)
        if self.relay.subscribe(uri, ctx.session):
            try:
                request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
                await self.forward(ctx, server, request)
            except MCPError:
                self.relay.unsubscribe(uri, ctx.session)
                raise
        return for_era(ctx, {})

    async def unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> dict[str, Any]:
        """Drop the host's subscription; the upstream is told once no host is subscribed."""
        self.view.current_registry()
        uri = str(params.uri)
        if self.relay.unsubscribe(uri, ctx.session):
            server = self.view.resource_owner(uri)
            if server is not None:
                request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
                await self.forward(ctx, server, request)
        return for_era(ctx, {})

    def _subscribable_owner(self, uri: str) -> str:
        server = self.view.resource_owner(uri)
        if server is None or not self._reaches(server):
            raise MCPError(code=types.INVALID_PARAMS, message=f"no enabled server serves resource {uri}")
        up = self.pool.get(server)
        caps = up.session.server_capabilities if up is not None and up.session is not None else None
        if caps is not None and (caps.resources is None or not caps.resources.subscribe):
            raise MCPError(code=types.METHOD_NOT_FOUND, message=f"server '{server}' does not support subscriptions")
        return server

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> dict[str, Any]:
        """Argument suggestions from the owning upstream; none (not an error) when it offers no completions."""
        self.view.current_registry()
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            entry = self.view.merged().prompts.get(ref.name)
            if entry is None or not self._reaches(entry.server):
                raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt '{ref.name}'")
            server, ref = entry.server, types.PromptReference(name=entry.tool)
        else:
            owner = self.view.resource_owner(ref.uri)
            if owner is None or not self._reaches(owner):
                raise MCPError(code=types.INVALID_PARAMS, message=f"no enabled server serves resource {ref.uri}")
            server = owner
        up = self.pool.get(server)
        caps = up.session.server_capabilities if up is not None and up.session is not None else None
        if caps is not None and caps.completions is None:
            return for_era(ctx, NO_COMPLETION)
        request = types.CompleteRequest(
            params=types.CompleteRequestParams(
                ref=ref, argument=params.argument, context=params.context, _meta=passed_meta(params.meta)
            )
        )
        try:
            return for_era(ctx, await self.forward(ctx, server, request))
        except MCPError as exc:
            if exc.code == types.METHOD_NOT_FOUND:
                return for_era(ctx, NO_COMPLETION)
            raise

    def _reaches(self, server: str) -> bool:
        reached = self.servers_reached()
        return reached is None or server in reached

    async def forward(self, ctx: Any, server: str, request: Any) -> dict[str, Any]:
        """Send `request` to `server` as the host's request; errors become JSON-RPC errors for the host."""
        if not self._reaches(server):  # every path checks first; this one holds should one forget
            raise MCPError(code=types.INVALID_PARAMS, message="unknown name")
        up = self.pool.get(server)
        reason = self.view.refusal(server)
        if up is None or reason is not None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"coffer refused: {reason or 'server not running'}")
        try:
            async with self.relay.origin(server, ctx, upstream=up):
                return await up.request(request)
        except UpstreamUnavailable as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=scrub(str(exc))) from exc
        except MCPError as exc:
            raise MCPError(code=exc.code, message=scrub(f"{server}: {exc.message}"), data=exc.data) from exc


def _script_worker() -> str:
    """The launcher of coffer__run's worker under bubblewrap (coffer.upstreams.sandbox.helper_command);
    "" where it runs unconfined, said once on the log."""
    from coffer.codemode.sandbox import confined_worker
    from coffer.upstreams.sandbox import helper_command, support

    try:
        worker = confined_worker(helper_command)
    except OSError as exc:
        worker, why = None, f"its launcher could not be written: {exc.strerror}"
    else:
        why = support().problem or "pydantic-monty's worker binary was not found"
    if worker is None:
        log.warning("code mode: scripts run in pydantic-monty's sandbox, its worker unconfined here: %s", why)
    return worker or ""


def _progress(ctx: Any) -> Callable[[float, float | None, str | None], Awaitable[None]] | None:
    """Ask the upstream for progress only when the host asked us for it; relay it under the host's token."""
    if (ctx.meta or {}).get("progress_token") is None:
        return None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    return forward
