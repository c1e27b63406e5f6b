"""`coffer auth` and `coffer call`: authorising an OAuth server, and calling one tool from the shell.

Both go through the same upstream machinery as `coffer serve` (pool, upstream, curation), so what
works here works for agents. `coffer auth` lets this process run the authorization flow
(`coffer.upstreams.oauth`) and then lists the server into the catalogue, as `coffer refresh` does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import mcp_types as types

from coffer.errors import CofferError, NotFoundError, UpstreamError, UsageError
from coffer.gateway.pool import Pool
from coffer.manage import refresh
from coffer.trust import curation, oauth_store
from coffer.trust.pinning import Pins
from coffer.upstreams import oauth
from coffer.upstreams.upstream import UpstreamUnavailable
from coffer.vault import catalogue, registry


def authorise(name: str, headless: bool = False) -> refresh.Refreshed:
    """Run the authorization flow for `name` (marking it as an OAuth server), then list it.

    Raises UsageError for a command server, UpstreamError when the flow or the listing fails.
    """
    cfg = registry.load().get(name)
    if not cfg.url:
        raise UsageError(f"'{name}' is started by a command; only URL servers authorise with OAuth")
    if not cfg.oauth:
        registry.set_oauth(name, True)
        cfg = dataclasses.replace(cfg, oauth=True)
    waited = dataclasses.replace(cfg, timeout=max(cfg.timeout, oauth.PERSON_WAIT_S if not headless else 60.0))
    with oauth.person(headless):
        (result,) = refresh.refresh([waited])
    if result.status != "ok":
        error = str(result.error)
        raise UpstreamError(error if "authorisation failed" in error else f"{name}: authorisation failed: {error}")
    return result


def logout(name: str) -> bool:
    """Forget the server's tokens and its client registration (a pre-registered client must be given again)."""
    registry.load().get(name)
    return oauth_store.forget(name, client_too=True)


def call(exposed: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call one tool by its exposed name through an upstream session, as an agent's call would go:
    refused when curation or trust refuses it. Returns the raw result."""
    return anyio.run(_call, exposed, arguments)


async def _call(exposed: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reg = registry.load()
    snapshot = catalogue.load_snapshot()
    with Pins.open(new_tools="allow") as pins:
        tool = next((t for t in curation.visible_tools(reg, snapshot, pins) if t.name == exposed), None)
        if tool is None:
            reason = _why_not(reg, snapshot, pins, exposed)
            raise NotFoundError(reason)
        cfg = reg.servers[tool.server]
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool.tool, arguments=arguments))
    failure: CofferError | None = None
    result: dict[str, Any] = {}
    async with Pool(limit=1) as pool:  # errors leave the pool's task group as they are, not as a group
        pool.sync([cfg])
        try:
            result = await pool.upstreams[cfg.name].request(request)
        except UpstreamUnavailable as exc:
            failure = UpstreamError(str(exc))
        except CofferError as exc:
            failure = exc
        except Exception as exc:  # an upstream JSON-RPC error: shown as one line
            message = getattr(getattr(exc, "error", None), "message", None) or str(exc)
            failure = UpstreamError(f"{cfg.name}: {message}")
    if failure is not None:
        raise failure
    return result


def _why_not(reg: registry.Registry, snapshot: catalogue.Snapshot | None, pins: Pins, exposed: str) -> str:
    for cfg in reg.servers.values():
        for t in catalogue.server_tools(snapshot, cfg.name, cfg.exposed_prefix):
            if t.name == exposed:
                reason = curation.refusal(reg, pins, cfg.name, t.tool, t.name)
                return f"coffer refused {exposed}: {reason}"
    return f"unknown tool '{exposed}' (see `coffer list`, or `coffer refresh` if the server is new)"
