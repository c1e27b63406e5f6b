"""Starting upstreams once: list what they serve, time it, say why not; nothing is written here.

Used by `coffer doctor` (report), `coffer refresh`, `coffer add` and `coffer import` (record, in
`coffer.manage.refresh`). All go through `coffer.gateway.pool`, the one way Coffer starts upstreams:
bounded concurrency, drained stderr, process-group stop.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from coffer.vault.registry import ServerConfig

STDERR_LINES = 12
Progress = Callable[[str, bool, str], None]  # (server, ok, one-line summary) as each server finishes


@dataclass
class Probe:
    """One start of one upstream: did it list, how long it took, and why not."""

    name: str
    ok: bool
    init_seconds: float | None = None
    listing: dict[str, list[dict[str, Any]]] | None = None
    error: str | None = None
    error_class: str | None = None
    stderr_tail: list[str] = field(default_factory=list)
    garbage_lines: int = 0
    server_info: dict[str, Any] | None = None
    protocol_version: str | None = None
    resources: list[tuple[str, str, str]] | None = None  # (uri, name, text), when asked for and read
    capabilities: dict[str, Any] = field(default_factory=dict)  # what the server declared
    problems: list[str] = field(default_factory=list)  # tools its listing dropped or repaired
    told: frozenset[str] = frozenset()  # the client capabilities it was told of (as the engine tells them)

    @property
    def tool_count(self) -> int | None:
        return None if self.listing is None else len(self.listing.get("tools") or [])


def _probe_of(up: Any) -> Probe:
    from coffer.upstreams.upstream import State

    status = up.status()
    tail = [line for line in str(status.get("stderr_tail") or "").splitlines() if line.strip()][-STDERR_LINES:]
    ok = up.state is State.READY and up.listing is not None
    error = status.get("last_error")
    if not ok and error is None:
        error = f"still starting after {up.cfg.timeout:g}s"
    return Probe(
        name=up.name,
        ok=ok,
        init_seconds=round(status["init_seconds"], 3) if ok and status.get("init_seconds") is not None else None,
        listing=up.listing.as_dict() if ok else None,
        error=None if ok else error,
        error_class=None if ok else (status.get("error_class") or "start_timeout"),
        stderr_tail=[] if ok else tail,
        garbage_lines=int(status.get("garbage_lines") or 0),
        server_info=status.get("server_info"),
        protocol_version=status.get("protocol_version"),
        capabilities=dict(status.get("capabilities") or {}),
        problems=list(status.get("problems") or []),
        told=up.told,
    )


async def _probe_all(
    configs: list[ServerConfig], limit: int, on_done: Callable[[Probe], None] | None, read_resources: bool
) -> list[Probe]:
    from coffer.gateway.pool import SLOT_HOLD_S, Pool
    from coffer.gateway.relay import Relay
    from coffer.upstreams import resources
    from coffer.upstreams.upstream import START_SLACK_S, State

    done: dict[str, Probe] = {}
    waves = math.ceil(len(configs) / max(1, limit))  # a queued start waits at most this many slot holds

    async def wait(up: Any) -> None:
        await up.wait_settled(up.cfg.timeout + START_SLACK_S + waves * SLOT_HOLD_S)
        probe = done[up.name] = _probe_of(up)
        if read_resources and probe.ok:
            items = await resources.text_resources(up)  # the gateway's reader: unreadable or binary ones skipped
            probe.resources = items if up.state is State.READY else None  # died meanwhile: keep the old index
        if on_done is not None:
            on_done(probe)

    # Told what the engine tells a server, so it lists what a session will see (server-everything shows its
    # elicitation, sampling and roots tools only then); what it asks meanwhile is refused: nobody is there.
    async with Pool(limit=limit, relay=Relay(None)) as pool:
        pool.sync(configs)
        async with anyio.create_task_group() as tg:
            for up in list(pool.upstreams.values()):
                tg.start_soon(wait, up)
    return [done[cfg.name] for cfg in configs]


def probe_servers(
    configs: Iterable[ServerConfig],
    limit: int | None = None,
    on_done: Callable[[Probe], None] | None = None,
    *,
    read_resources: bool = False,
) -> list[Probe]:
    """Start every config at once (at most `limit` starting at a time), list, stop; one Probe each, in order.

    `read_resources` also reads each listed server's text resources (Probe.resources) before stopping it.
    """
    from coffer.gateway.pool import START_SLOTS

    configs = list(configs)
    if not configs:
        return []
    return anyio.run(_probe_all, configs, limit or START_SLOTS, on_done, read_resources)


def summary(probe: Probe) -> str:
    if probe.ok:
        return f"{probe.tool_count} tools in {probe.init_seconds or 0:.2f}s"
    return probe.error or "failed"


PROBE_TIMEOUT_S = 15.0  # `coffer add` and `coffer import` wait this long at most for a new server to list


def probe_configs(configs: list[ServerConfig]) -> list[ServerConfig]:
    """The configs with their start timeout capped for a first probe, so one hanging server cannot hold
    `add` or `import` for its full timeout (a call through `coffer serve` still gets all of it). A
    timeout the entry sets itself (`coffer add --timeout 90`: a cold `npx` or `uvx` download) is kept."""
    from coffer.vault.servers import DEFAULT_TIMEOUT_S

    return [
        c if c.timeout != DEFAULT_TIMEOUT_S else dataclasses.replace(c, timeout=min(c.timeout, PROBE_TIMEOUT_S))
        for c in configs
    ]
