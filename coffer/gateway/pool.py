"""The pool of upstreams behind one `coffer serve` (or one probe): bounded starts and a clean stop.

Starting Python upstreams is CPU-bound (imports), and on a small machine starting them all at once
makes every one of them late. The gate lets a few start at a time; an upstream a call is waiting
for jumps the queue, and a start that hangs gives its slot back after `SLOT_HOLD_S`.

Under the engine (`share` given) a server that keeps per-client state runs once per session
(coffer.gateway.sessions): each session has a child pool (`session()`), which shares the gate and the
process list, starts each of those servers the first time its session needs it (a call to it, or a
listing the catalogue cannot answer for), and stops them when the session ends.
`get()` answers from the child of the session being served (its `HostSession.pool`).

Behind a team gateway (coffer.trust.team) a server with `share = "member"` runs once per member: a
member's pool (`members`, made on the member's first need, in this pool's task group) runs it with the
member's own secrets (`${member:NAME}`, coffer.trust.member_secrets) and a home of the member's own, so
one member's process, credentials and files are never another's. A request with no member (one user,
the gateway's own listing) is served by the shared process, run with the vault's secrets.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from coffer.errors import UpstreamError
from coffer.gateway import sessions
from coffer.gateway.relay import Relay
from coffer.gateway.sessions import Share
from coffer.trust.exchange import Exchanger
from coffer.trust.team import speaking_for
from coffer.upstreams.gate import StartGate
from coffer.upstreams.upstream import State, Upstream
from coffer.vault.registry import ServerConfig

# Measured on the 2-core dev box, 16 SDK upstreams (python bench/bench_gateway.py --starts --start-servers 16):
#   1 at a time: first ready 0.67 s, all 10.6 s   2 at a time: first 0.64 s, all 5.1 s
#   4 at a time: first 1.28 s, all 5.4 s           all at once: first 6.0 s, all 6.2 s
# Two per core is no better than one per core, so the bound is the core count (at least 2).
START_SLOTS = max(2, os.cpu_count() or 2)
# A start that has not finished after this long gives its slot back (it goes on starting): a server that
# hangs at initialize must not hold up the healthy ones behind it. Most SDK servers start in 0.6 s here.
SLOT_HOLD_S = 1.5
# A member's own processes stop after this long without a request of the member's (a team of a hundred
# does not keep a hundred of each per-member server running); the next request starts them again.
MEMBER_IDLE_S = 900.0


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
        share: Callable[[ServerConfig], Share] | None = None,
        spill_results: bool = False,
    ) -> None:
        """`share`: how each server is run (an engine's gateway); None runs every server once.
        `spill_results`: long strings of tools/call results are decoded into files (coffer.results.spill),
        for a gateway, which claims them (coffer.gateway.bigresults); off elsewhere (`coffer call`)."""
        self.spill_results = spill_results
        self.gate = StartGate(limit)
        self.slot_hold = slot_hold
        self.upstreams: dict[str, Upstream] = {}
        self.pids: set[int] = set()
        self.on_listing = on_listing
        self.relay = relay
        self.on_session = on_session
        self.share = share
        self.per_session: dict[str, ServerConfig] = {}  # servers each new session runs for itself
        self.children: list[Pool] = []  # one per session being served (`session()`)
        self.host: Any = None  # a session's pool: its host session, once that is known
        self._configs: dict[str, ServerConfig] = {}  # the enabled servers, as last synced
        self.own: set[str] = set()  # a session's pool: the servers it runs itself
        self._parent: Pool | None = None
        self._one_host = True
        self.started = False  # a session's pool: its host finished the handshake, its servers may start
        self.member: str | None = None  # a member's pool: the team member (`sub`) its servers run for
        self.members: dict[str, Pool] = {}  # each member's pool, for the `share = "member"` servers
        self.used = 0.0  # a member's pool: when its member last needed it (anyio clock)
        self.exchanger: Exchanger | None = None  # a team gateway's: members' tokens for `exchange` servers
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
        """Session callbacks that relay an upstream's requests to the host; none outside a gateway. A
        session's own upstream is told what its host declared, and asks that host only."""
        if self.relay is None:
            return {}
        if self._parent is not None:
            return await self.relay.client_options(name, host=self)
        return await self.relay.client_options(name)

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
        """The upstream serving `name` for the session being served: its own for a server it runs per
        session, or per member for the member being served, else the shared one (started here when a
        session that predates a share change needs it)."""
        cfg = self._configs.get(name)
        member = speaking_for() if cfg is not None and cfg.share == "member" else None
        if member is not None and self._parent is None:
            pool = self._member_pool(member.sub)
            pool.used = anyio.current_time()
            return pool._up(name, cfg)
        child = self._current() if any(name in c.own for c in self.children) else None
        if child is not None and name in child.own:
            return child._up(name, self._configs.get(name))
        if name in self.upstreams or name not in self.per_session:
            return self.upstreams.get(name)
        return self._up(name, self._configs.get(name))

    def _up(self, name: str, cfg: ServerConfig | None) -> Upstream | None:
        if cfg is None:
            return None
        if name not in self.upstreams:
            self.upstreams[name] = Upstream(cfg, self)
        up = self.upstreams[name]
        up.start()
        return up

    def _member_pool(self, sub: str) -> Pool:
        """The pool of the member `sub`: its per-member servers' processes, in this pool's task group."""
        pool = self.members.get(sub)
        if pool is None:
            pool = Pool(
                on_listing=self.on_listing, slot_hold=self.slot_hold, relay=self.relay, on_session=self.on_session
            )
            pool.gate, pool.pids, pool._parent, pool._tg = self.gate, self.pids, self, self._tg
            pool.spill_results, pool._one_host, pool.member = self.spill_results, False, sub
            pool.exchanger = self.exchanger
            if not self.members:
                self.spawn(self._reap_members)
            self.members[sub] = pool
        return pool

    async def _reap_members(self) -> None:
        while True:
            await anyio.sleep(MEMBER_IDLE_S / 4)
            self.reap_members(anyio.current_time())

    def reap_members(self, now: float) -> list[str]:
        """Stop the processes of members idle for MEMBER_IDLE_S (longer than any of their calls may
        run); returns whose."""
        gone = []
        for sub, pool in list(self.members.items()):
            longest = max((up.cfg.timeout for up in pool.upstreams.values()), default=0.0)
            if pool.upstreams and now - pool.used > max(MEMBER_IDLE_S, longest + 60.0):
                self.forget_member(sub)
                gone.append(sub)
        return gone

    def forget_member(self, sub: str) -> None:
        """Stop the member's own processes (its secrets changed): each starts again, with the new ones,
        when the member next needs it."""
        pool = self.members.get(sub)
        if pool is not None:
            for name in list(pool.upstreams):
                self.spawn(pool.upstreams.pop(name).stop)

    def _current(self) -> Pool | None:
        """The pool of the session being served, when it is one of this pool's sessions."""
        if not self.children:  # in-process, or an engine with no session of its own servers yet
            return None
        host = sessions.current()
        child = host.pool if host is not None else None
        return child if isinstance(child, Pool) and child in self.children else None

    def live(self, upstream: Upstream) -> bool:
        """Whether `upstream` is current here or in a session's pool (not one replaced or stopped)."""
        pools = [self, *self.children, *self.members.values()]
        return any(p.upstreams.get(upstream.name) is upstream for p in pools)

    def running(self) -> list[Upstream]:
        """The upstreams the session being served can reach: the shared ones and its own."""
        child = self._current()
        own = list(child.upstreams.values()) if child is not None else []
        member = speaking_for()
        mine = self.members.get(member.sub) if member is not None else None
        return [*self.upstreams.values(), *own, *(mine.upstreams.values() if mine is not None else ())]

    def every(self) -> list[tuple[Pool, Upstream]]:
        """Every upstream with the pool that runs it (the shared pool's first)."""
        pools = (self, *self.children, *self.members.values())
        return [(p, up) for p in pools for up in list(p.upstreams.values())]

    @asynccontextmanager
    async def session(self, one_host: bool = True) -> AsyncIterator[Pool]:
        """A session's own pool for the per-session servers (its `HostSession.pool`, which the caller sets).
        Which servers it runs itself is decided now, once: a server found to need it later is run per
        session for the sessions that start after that. `one_host` False: the HTTP hosts of one
        `serve --http` share it, and it asks whichever host's call is in flight."""
        child = Pool(on_listing=self.on_listing, slot_hold=self.slot_hold, relay=self.relay, on_session=self.on_session)
        child.gate, child.pids, child._parent = self.gate, self.pids, self
        child.spill_results = self.spill_results
        child._one_host = one_host
        child.own = set(self.per_session)
        async with child:
            self.children.append(child)
            try:
                yield child
            finally:
                self.children.remove(child)
                self._drop_unneeded()

    def host_known(self, host: Any) -> None:
        """The session being served finished its handshake: its own servers may now start, told what it
        declared. They start when it first needs them (a call, or a listing the catalogue cannot give:
        `coffer.gateway.listings`), not now: an agent that never opens the browser runs no browser."""
        child = self._current()
        if child is not None and not child.started:
            child.started = True
            child.host = host if child._one_host else None
            child.sync((self._configs[n] for n in child.own if n in self._configs), start=False)

    def retry_down(self) -> None:
        """Start again, now, every upstream that is down or failed (the engine gained what a start may have
        lacked: a certificate, a proxy, a runtime on PATH), here and in every session's pool."""
        for _, up in self.every():
            up.retry()  # a no-op for one that is not down or failed

    def resync(self) -> None:
        """Decide the share modes again (a server was seen asking for roots outside a call)."""
        self.sync(self._configs.values())

    def sync(self, configs: Iterable[ServerConfig], start: bool = True) -> None:
        """Match the pool to these (enabled) configs: new ones added, changed ones replaced, others stopped."""
        self._configs = wanted = {cfg.name: cfg for cfg in configs}
        if self.share is not None:
            self.per_session = {name: cfg for name, cfg in wanted.items() if self.share(cfg).per_session}
            for child in self.children:
                child.sync((wanted[n] for n in child.own if n in wanted), start=False)  # on first need
        for pool in [self, *self.members.values()]:  # a member's: only its per-member servers, as configured now
            for name, old in list(pool.upstreams.items()):
                kept = name in wanted and wanted[name] == old.cfg
                if not kept or (pool is not self and wanted[name].share != "member"):
                    del pool.upstreams[name]
                    self.spawn(old.stop)
        for name, cfg in wanted.items():
            if name not in self.upstreams and name not in self.per_session:
                self.upstreams[name] = Upstream(cfg, self)
                if start:
                    self.upstreams[name].start()
        self._drop_unneeded()

    def _drop_unneeded(self) -> None:
        """Stop the shared process of a per-session server once no running session still uses it."""
        for name in [n for n in self.upstreams if n in self.per_session]:
            if all(name in child.own for child in self.children):
                self.spawn(self.upstreams.pop(name).stop)

    async def aclose(self) -> None:
        """Stop every upstream at once; each stop is bounded, so this ends within a few seconds."""
        ups = [*self.upstreams.values(), *(up for p in self.members.values() for up in p.upstreams.values())]
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
