"""Host requests other than tools/call, routed to the upstream that owns them.

prompts/get goes by the prompt's exposed name, resources/read by the resource's URI (or the first
template that matches it), and completion/complete by its reference: a prompt under its exposed
name, or a resource template (or resource) URI. These requests have no isError result, so failures
are JSON-RPC errors; their text passes through `coffer.redact` since it may quote an upstream. Each
forwarded request is marked in flight on its upstream (`coffer.relay`), so a sampling or elicitation
request the upstream sends meanwhile reaches the host that asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from coffer.redact import scrub
from coffer.upstream import UpstreamUnavailable

if TYPE_CHECKING:
    from coffer.gateway import Gateway

NO_COMPLETION: dict[str, Any] = {"completion": {"values": [], "hasMore": False}}


def for_era(ctx: Any, result: dict[str, Any], cacheable: bool = False) -> dict[str, Any]:
    """Add the envelope 2026-07-28 results require (typed results get it from their defaults, dicts don't)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return result
    envelope: dict[str, Any] = {"resultType": "complete"}
    if cacheable:  # never cached: upstreams come and go and curation changes under the host
        envelope |= {"ttlMs": 0, "cacheScope": "private"}
    return envelope | result


async def get_prompt(gw: Gateway, ctx: Any, params: types.GetPromptRequestParams) -> dict[str, Any]:
    gw.current_registry()
    entry = gw.merged().prompts.get(params.name)
    if entry is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt '{params.name}'")
    reason = gw.refusal(entry.server)
    if reason is not None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"coffer refused prompt {params.name}: {reason}")
    request = types.GetPromptRequest(params=types.GetPromptRequestParams(name=entry.tool, arguments=params.arguments))
    return for_era(ctx, await forward(gw, ctx, entry.server, request))


def resource_owner(gw: Gateway, uri: str) -> str | None:
    """The enabled server that lists `uri`, or whose template is `uri` or matches it."""
    m = gw.merged()
    server = m.uri_owner.get(uri)
    if server is None:
        server = next((s for s, tpl in m.templates if tpl.template == uri), None)
    if server is None:
        server = next((s for s, tpl in m.templates if tpl.match(uri) is not None), None)
    return server


async def read_resource(gw: Gateway, ctx: Any, params: types.ReadResourceRequestParams) -> dict[str, Any]:
    gw.current_registry()
    uri = str(params.uri)
    server = resource_owner(gw, uri)
    if server is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"no enabled server serves resource {uri}")
    request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
    return for_era(ctx, await forward(gw, ctx, server, request), cacheable=True)


async def subscribe(gw: Gateway, ctx: Any, params: types.SubscribeRequestParams) -> dict[str, Any]:
    """Subscribe the host to a resource: the owning upstream is asked once, however many hosts subscribe."""
    gw.current_registry()
    uri = str(params.uri)
    server = _subscribable_owner(gw, uri)
    if gw.relay.subscribe(uri, ctx.session):
        try:
            request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            await forward(gw, ctx, server, request)
        except MCPError:
            gw.relay.unsubscribe(uri, ctx.session)
            raise
    return for_era(ctx, {})


async def unsubscribe(gw: Gateway, ctx: Any, params: types.UnsubscribeRequestParams) -> dict[str, Any]:
    """Drop the host's subscription; the upstream is told once no host is subscribed."""
    gw.current_registry()
    uri = str(params.uri)
    if gw.relay.unsubscribe(uri, ctx.session):
        server = resource_owner(gw, uri)
        if server is not None:
            request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
            await forward(gw, ctx, server, request)
    return for_era(ctx, {})


def _subscribable_owner(gw: Gateway, uri: str) -> str:
    server = resource_owner(gw, uri)
    if server is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"no enabled server serves resource {uri}")
    up = gw.pool.get(server)
    caps = up.session.server_capabilities if up is not None and up.session is not None else None
    if caps is not None and (caps.resources is None or not caps.resources.subscribe):
        raise MCPError(code=types.METHOD_NOT_FOUND, message=f"server '{server}' does not support subscriptions")
    return server


async def complete(gw: Gateway, ctx: Any, params: types.CompleteRequestParams) -> dict[str, Any]:
    """Argument suggestions from the owning upstream; none (not an error) when it offers no completions."""
    gw.current_registry()
    ref = params.ref
    if isinstance(ref, types.PromptReference):
        entry = gw.merged().prompts.get(ref.name)
        if entry is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt '{ref.name}'")
        server, ref = entry.server, types.PromptReference(name=entry.tool)
    else:
        owner = resource_owner(gw, ref.uri)
        if owner is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no enabled server serves resource {ref.uri}")
        server = owner
    up = gw.pool.get(server)
    caps = up.session.server_capabilities if up is not None and up.session is not None else None
    if caps is not None and caps.completions is None:
        return for_era(ctx, NO_COMPLETION)
    request = types.CompleteRequest(
        params=types.CompleteRequestParams(ref=ref, argument=params.argument, context=params.context)
    )
    try:
        return for_era(ctx, await forward(gw, ctx, server, request))
    except MCPError as exc:
        if exc.code == types.METHOD_NOT_FOUND:
            return for_era(ctx, NO_COMPLETION)
        raise


async def forward(gw: Gateway, ctx: Any, server: str, request: Any) -> dict[str, Any]:
    """Send `request` to `server` as the host's request; errors become JSON-RPC errors for the host."""
    up = gw.pool.get(server)
    reason = gw.refusal(server)
    if up is None or reason is not None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"coffer refused: {reason or 'server not running'}")
    try:
        with gw.relay.origin(server, ctx):
            return await up.request(request)
    except UpstreamUnavailable as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=scrub(str(exc))) from exc
    except MCPError as exc:
        raise MCPError(code=exc.code, message=scrub(f"{server}: {exc.message}"), data=exc.data) from exc
