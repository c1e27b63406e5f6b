"""`coffer call`: one tool from the shell, the way an agent's call goes.

Through the vault's engine where one runs (a session of its own on the engine's socket, as a `coffer
serve` front opens: coffer.engine.dial), else through a gateway in this process that starts only the
called tool's server. Either way the call is the gateway's (coffer.gateway): curation and trust decided
at call time, the server's confinement, a denial's hint in a failed result, a big result kept, and one
row in the invocation log under the client name `coffer-call` (never arguments or results), which
`coffer log` and `coffer log --tail` show.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types

from coffer import __version__
from coffer.errors import NotFoundError, UpstreamError, did_you_mean
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, registry

CLIENT = "coffer-call"  # the client name its log rows carry


@dataclass
class Called:
    """A call's result as the gateway answered it; `via` "engine" or "in-process"; `note` a line to say
    first (the engine's environment differs from this shell's); `unreachable` the reason when the call
    failed because its server could not be started or reached, not in the tool."""

    result: dict[str, Any]
    via: str
    note: str | None = None
    unreachable: str | None = None


def call(exposed: str, arguments: dict[str, Any]) -> Called:
    """Call one tool by the name agents see. Raises NotFoundError for a name no server serves (with the
    name probably meant) or one curation or trust refuses, before anything starts; UpstreamError for a
    JSON-RPC error the gateway answers with."""
    from coffer.engine import control, hosting

    server = _server_of(exposed)
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=exposed, arguments=arguments))
    if not hosting.in_process() and control.running():
        note = _hand_env()
        result, down = anyio.run(_through_engine, server, request)
        called = Called(result, "engine", note)
    else:
        result, down = anyio.run(_in_process, server, request)
        called = Called(result, "in-process")
    if result.get("isError") and down:
        called.unreachable = text_of(result)
    return called


def text_of(result: dict[str, Any]) -> str:
    """A result's text content, one part a line (other content named by its type)."""
    import json

    parts = []
    for item in result.get("content") or []:
        if item.get("type") == "text":
            parts.append(str(item.get("text", "")))
        else:
            parts.append(f"[{item.get('type')} content]")
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], indent=2))
    return "\n".join(parts)


def _server_of(exposed: str) -> str:
    """The server that serves `exposed`: a tool of its catalogue an agent may call, or any name under the
    prefix of a server that never listed (the gateway waits for its first listing, as for an agent).
    NotFoundError otherwise, saying why."""
    reg, snap = registry.load(), catalogue.load_snapshot()
    with Pins.open(new_tools="allow") as pins:
        for tool in curation.visible_tools(reg, snap, pins):
            if tool.name == exposed:
                return tool.server
        for cfg in reg.servers.values():
            for tool in catalogue.server_tools(snap, cfg.name, cfg.exposed_prefix):
                if tool.name == exposed:
                    reason = curation.refusal(reg, pins, cfg.name, tool.tool, tool.name)
                    raise NotFoundError(f"coffer refused {exposed}: {reason}")
        head, sep, _ = exposed.partition(registry.SEP)
        named = next((c for c in reg.servers.values() if sep and c.exposed_prefix == head), None)
        if named is None:
            prefixes = [c.exposed_prefix for c in reg.servers.values() if c.exposed_prefix]
            names = [t.name for t in curation.visible_tools(reg, snap, pins)]
            near = did_you_mean(exposed, names) or (did_you_mean(head, prefixes) if sep else "")
            what = f"no server is called '{head}'" if sep else "it names no server (SERVER__TOOL)"
            raise NotFoundError(f"unknown tool '{exposed}': {what}{near} (see `coffer list`)")
        cfg = named
        reason = curation.refusal(reg, pins, cfg.name)
        if reason is not None:
            raise NotFoundError(f"coffer refused {exposed}: {reason}")
    entry = snap.servers.get(cfg.name) if snap is not None else None
    if entry is None or entry.error:
        return cfg.name  # never listed: started now, and the name checked against what it lists
    names = [t.name for t in catalogue.server_tools(snap, cfg.name, cfg.exposed_prefix)]
    raise NotFoundError(
        f"unknown tool '{exposed}' on server '{cfg.name}'{did_you_mean(exposed, names)} "
        f"(see `coffer show {cfg.name}`; `coffer refresh {cfg.name}` if it has new tools)"
    )


def _hand_env() -> str | None:
    """Hand the engine this shell's values of the vault's variables (it adopts those it lacks, as from
    a session); the line to say when it holds other values, whose servers this call then uses."""
    from coffer.engine import control

    try:
        names = control.hand_env(control.handed_env())
    except OSError:
        return None
    if not names:
        return None
    return (
        f"note: the engine behind `coffer serve` has other values for {', '.join(names)} than this shell; this call "
        "went through it, so its servers used the engine's (`coffer status --stop`, then call again, to use this "
        "shell's)"
    )


async def _ask(read: Any, write: Any, request: types.CallToolRequest) -> dict[str, Any]:
    """One MCP session on (read, write): initialize, the call, its raw result."""
    from mcp import ClientSession, MCPError

    from coffer.upstreams import outbound

    me = types.Implementation(name=CLIENT, version=__version__)
    async with ClientSession(read, write, client_info=me) as session:
        await session.initialize()
        try:
            return await outbound.send(session, request, timeout=None)  # raw: nothing of the result dropped
        except MCPError as exc:  # the gateway's JSON-RPC error (a refused round, an elicitation it needs)
            raise UpstreamError(f"{request.params.name}: {exc.message}") from None


async def _through_engine(server: str, request: types.CallToolRequest) -> tuple[dict[str, Any], bool]:
    """The call as one session of the running engine; whether the server's process was down after it
    (asked while the session lasts: a server run per session is this session's own)."""
    from coffer.engine.dial import engine_session

    async with engine_session() as (read, write):
        result = await _ask(read, write, request)
        if not result.get("isError"):
            return result, False
        return result, await anyio.to_thread.run_sync(_down_in_engine, server)


def _down_in_engine(server: str) -> bool:
    from coffer.manage.states import engine_status

    ups = [
        u
        for u in (engine_status() or {}).get("upstreams") or []
        if u.get("name") == server and (u.get("share") == "shared" or u.get("session") == os.getpid())
    ]
    return bool(ups) and all(u.get("state") in ("down", "failed") for u in ups)


async def _in_process(server: str, request: types.CallToolRequest) -> tuple[dict[str, Any], bool]:
    """The call through a gateway in this process that runs `server` alone (an agent's `coffer serve`
    starts them all), its row written to the log before this returns."""
    from mcp.shared.memory import create_client_server_memory_streams

    from coffer.engine.hosting import HOST_WAIT_S
    from coffer.gateway.server import Gateway
    from coffer.log.calls import CallLog
    from coffer.upstreams.upstream import State

    calllog = CallLog.open()
    try:
        gateway = Gateway(calllog=calllog, host_wait=HOST_WAIT_S)
        pool = gateway.pool
        gateway.view.on_sync = lambda configs: pool.sync([c for c in configs if c.name == server])
        async with gateway.running():
            async with create_client_server_memory_streams() as (client, served), anyio.create_task_group() as tg:
                tg.start_soon(gateway.serve, *served)
                result = await _ask(*client, request)
                tg.cancel_scope.cancel()
            up = pool.get(server)
            down = up is not None and up.state in (State.DOWN, State.FAILED)
    finally:
        await anyio.to_thread.run_sync(calllog.close)
    return result, down
