"""The pool of upstreams behind one `coffer serve` (or one probe): bounded starts and a clean stop.

Starting Python upstreams is CPU-bound (imports), and on a small machine starting them all at once
makes every one of them late. The gate lets a few start at a time; an upstream a call is waiting
for jumps the queue, and a start that hangs gives its slot back after `SLOT_HOLD_S`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any

import anyio
import anyio.abc

from coffer.errors import UpstreamError
from coffer.gateway.gate import StartGate
from coffer.gateway.relay import Relay
from coffer.gateway.upstream import State, Upstream
from coffer.vault.registry import ServerConfig

# Measured on the 2-core dev box, 16 SDK upstreams (python bench/bench_gateway.py --starts --start-servers 16):
#   1 at a time: first ready 0.67 s, all 10.6 s   2 at a time: first 0.64 s, all 5.1 s
#   4 at a time: first 1.28 s, all 5.4 s           all at once: first 6.0 s, all 6.2 s
# Two per core is no better than one per core, so the bound is the core count (at least 2).
START_SLOTS = max(2, os.cpu_count() or 2)
# A start that has not finished after this long gives its slot back (it goes on starting): a server that
# hangs at initialize must not hold up the healthy ones behind it. Most SDK servers start in 0.6 s here.
SLOT_HOLD_S = 1.5


Listener = Callable[[Upstream, frozenset[str]], None]


class Pool:
    """Every upstream of one `coffer serve` (or one probe): bounded starts, one task group, clean stop."""

    def __init__(
        self,
        *,
        limit: int = START_SLOTS,
        on_listing: Listener | None = None,
        slot_hold: float = SLOT_HOLD_S,
        relay: Relay | None = None,
        on_session: Callable[[Upstream, Any], Awaitable[None]] | None = None,
    ) -> None:
        self.gate = StartGate(limit)
        self.slot_hold = slot_hold
        self.upstreams: dict[str, Upstream] = {}
        self.pids: set[int] = set()
        self.on_listing = on_listing
        self.relay = relay
        self.on_session = on_session
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Pool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._tg is not None
        with anyio.CancelScope(shield=True):
            await self.aclose()
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(*exc_info)

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        assert self._tg is not None, "the pool is not running"
        self._tg.start_soon(fn, *args)

    async def client_options(self, name: str) -> dict[str, Any]:
        """Session callbacks that relay an upstream's requests to the host; none outside a gateway."""
        return {} if self.relay is None else await self.relay.client_options(name)

    def listed(self, upstream: Upstream, kinds: frozenset[str]) -> None:
        if self.on_listing is not None:
            self.on_listing(upstream, kinds)

    async def prepare(self, upstream: Upstream, session: Any) -> None:
        """A new session has listed and is about to take calls: give it what the hosts set (`on_session`)."""
        if self.on_session is not None:
            await self.on_session(upstream, session)

    def resource_updated(self, upstream: Upstream, params: Any) -> None:
        """An upstream's resource changed: the relay tells the hosts subscribed to it."""
        if self.relay is not None and self.upstreams.get(upstream.name) is upstream:
            self.spawn(self.relay.resource_updated, upstream.name, params)

    def notice(self, upstream: Upstream, notification: Any) -> None:
        """A notification for the host that caused it (an elicitation completed, a task's status)."""
        if self.relay is not None and self.upstreams.get(upstream.name) is upstream:
            self.spawn(self.relay.upstream_notice, upstream.name, notification)

    def get(self, name: str) -> Upstream | None:
        return self.upstreams.get(name)

    def sync(self, configs: Iterable[ServerConfig], start: bool = True) -> None:
        """Match the pool to these (enabled) configs: new ones added, changed ones replaced, others stopped."""
        wanted = {cfg.name: cfg for cfg in configs}
        for name, old in list(self.upstreams.items()):
            if name not in wanted or wanted[name] != old.cfg:
                del self.upstreams[name]
                self.spawn(old.stop)
        for name, cfg in wanted.items():
            if name not in self.upstreams:
                self.upstreams[name] = Upstream(cfg, self)
                if start:
                    self.upstreams[name].start()

    async def aclose(self) -> None:
        """Stop every upstream at once; each stop is bounded, so this ends within a few seconds."""
        ups = list(self.upstreams.values())
        async with anyio.create_task_group() as tg:
            for up in ups:
                tg.start_soon(up.stop)


async def probe(cfg: ServerConfig, timeout: float | None = None) -> dict[str, list[dict[str, Any]]]:
    """Start `cfg` once, list everything it serves, stop it. For one-off checks and tests.

    Raises UpstreamError with the reason and the server's stderr tail when it cannot be listed.
    """
    async with Pool(limit=1) as pool:
        pool.sync([cfg])
        up = pool.upstreams[cfg.name]
        await up.wait_settled(timeout if timeout is not None else cfg.timeout + 5.0)
        listing = up.listing if up.state is State.READY else None
        reason = up.last_error or f"did not start within {cfg.timeout:g}s"
    if listing is None:  # raised outside the pool, so it is not wrapped in an ExceptionGroup
        raise UpstreamError(f"{cfg.name}: {reason}")
    return listing.as_dict()
