"""The gateway's list requests: the merged view each host is answered from, new servers given a bounded
chance to list first, the session's profile applied to tools/list, and paging.

`Listings` is a collaborator the gateway holds (as it holds its `Router`): it reads the gateway's view,
pool and relay, and its handlers are the server's list handlers.
"""

from __future__ import annotations

from typing import Any

import anyio

from coffer.codemode import policy
from coffer.gateway import advertise, builtins, paging, sessions
from coffer.gateway.merge import Merged
from coffer.gateway.pool import Pool
from coffer.gateway.relay import Relay
from coffer.gateway.routes import for_era
from coffer.gateway.view import View
from coffer.trust.team import speaking_for
from coffer.upstreams.upstream import State
from coffer.vault import catalogue
from coffer.vault.registry import Profile, ServerConfig

# How long a first tools/list may wait for servers the snapshot has never seen, from the gateway's start:
# Codex gives a server 10 s from spawn, and process start and imports take about 1-1.5 s of that.
DISCOVERY_BUDGET_S = 7.0

# host capabilities an upstream's listing may depend on
RELAYED_CAPS = ("sampling", "elicitation", "roots", "extensions")
# where a tools/list answer says which servers it answered from the snapshot, and for what they had listed
SNAPSHOT_META = "coffer/snapshot"


def host_caps(ctx: Any) -> frozenset[str]:
    """Which of the relayable capabilities (sampling, elicitation, roots) the requesting host declared."""
    caps = getattr(ctx.session, "client_capabilities", None)
    return frozenset(c for c in RELAYED_CAPS if caps is not None and getattr(caps, c, None) is not None)


def snapshot_note(declared: frozenset[str], pending: list[str], other: dict[str, list[str]]) -> dict[str, Any]:
    """What a list answered before some servers listed live says of itself (its `_meta`): which servers
    it answered from the snapshot (`pending`: their live lists follow with list_changed where they
    differ) and, of those, which had listed only for clients of other capabilities (`other`)."""
    note: dict[str, Any] = {"pending": pending, "declared": sorted(declared)}
    if other:
        note["listedForOtherCapabilities"] = other
    return {"_meta": {SNAPSHOT_META: note}}


class Listings:
    """List handlers over the gateway's view, pool and relay. `profile_name`: the profile in force when
    the host session names none (`coffer serve --profile`); `started_at`: when the gateway started, from
    which the discovery budget counts."""

    def __init__(self, view: View, pool: Pool, relay: Relay, discovery_budget: float, profile_name: str | None) -> None:
        self.view, self.pool, self.relay = view, pool, relay
        self.discovery_budget = discovery_budget
        self.profile_name = profile_name
        self.started_at = 0.0
        self._profiles: dict[str, Profile] = {}
        self._shown: dict[str, advertise.Advertised] = {}  # chosen once per profile: clients keep their first list

    def start(self) -> None:
        """The gateway started serving: the discovery budget counts from now; the registry is read (its
        servers start) and `--profile` checked."""
        self.started_at = anyio.current_time()
        reg = self.view.current_registry()
        if self.profile_name is not None:
            self._profiles[self.profile_name] = reg.profile(self.profile_name)

    async def _await_discovery(self) -> None:
        """Before answering tools/list, give servers the snapshot has never seen a bounded chance to list
        (every other one is answered from the snapshot at once). Those that failed, or are still starting
        when the budget is spent, are remembered in the snapshot, so the next start does not wait for them
        again."""
        deadline = self.started_at + self.discovery_budget
        if speaking_for() is not None:  # a member's own process of a server never listed: this is its first
            # need, and it gets the same bounded chance to list, counted from now (members come and go)
            mine = [self.pool.get(c.name) for c in self.view.registry.enabled_servers() if self._first_of_member(c)]
            with anyio.move_on_after(self.discovery_budget):
                for up in mine:
                    if up is not None:
                        await up.wait_settled(self.discovery_budget)
        for up in self.pool.running():  # a session's own server waits for its first need: this is one
            if up.state is State.IDLE and up.name not in self.view.lists:
                up.start()
        for up in self.pool.running():
            name = up.name
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                break
            if name not in self.view.lists:
                await up.wait_settled(remaining)
        for up in self.pool.running():
            name = up.name
            if name in self.view.lists or (up.state is State.STARTING and anyio.current_time() < deadline):
                continue
            reason = up.last_error if up.state is not State.STARTING else None
            error = reason or f"did not list within {self.discovery_budget:g}s of `coffer serve` starting"
            self.view.missing(name, error)
            self.pool.spawn(anyio.to_thread.run_sync, lambda n=name, e=error: catalogue.save_failure(n, e))

    def _first_of_member(self, cfg: ServerConfig) -> bool:
        """A per-member server no process has listed yet (the owner's may lack the member's secrets or
        grant; an earlier member may have lacked its own): each member's list gives its process a chance."""
        return cfg.share == "member" and (cfg.name not in self.view.lists or cfg.name in self.view.errors)

    async def settled(self) -> Merged:
        """The merged view once new servers had their chance to list, for an answer that is no MCP
        request (the members' console)."""
        self.view.current_registry()
        await self._await_discovery()
        return self.view.merged(tools_of=self.view.fitted(self._told_for)[0])

    async def _listing(self, ctx: Any) -> tuple[Merged, dict[str, Any]]:
        """The merged view a list request answers from, with what the answer says of itself (`_meta`):
        current curation, servers the snapshot never saw given their chance, the others at once.

        A server not listed live yet is answered with the tools it listed when told what it will be told
        for this host (every capability for a shared one in the engine, the host's own elsewhere: `Relay.told_for`),
        else with its last listing, and the answer says so (`snapshot_note`): its live list follows.
        """
        self.view.current_registry()
        await self._await_discovery()
        tools_of, other = self.view.fitted(self._told_for)
        view = self.view
        served = {c.name for c in view.registry.enabled_servers()} & set(view.lists)
        pending = sorted(s for s in served if s not in view.live and s not in view.errors)
        note = snapshot_note(host_caps(ctx), pending, other) if pending else {}
        return self.view.merged(tools_of=tools_of), note

    def _told_for(self, server: str) -> frozenset[str]:
        """What `server`'s upstream is (or would be) told of for the session being served."""
        host = sessions.current()
        own = host.pool if host is not None and isinstance(host.pool, Pool) and server in host.pool.own else None
        return self.relay.told_for(own)

    @property
    def profile(self) -> Profile | None:
        """The profile of the session being served: a team member's bound, its own (an engine
        session's), else `--profile`."""
        bound = self.bound()
        if bound is not None:
            return bound
        host = sessions.current()
        name = (host.profile if host is not None else None) or self.profile_name
        if name is None:
            return None
        if name not in self._profiles:
            self._profiles[name] = self.view.current_registry().profile(name)
        return self._profiles[name]

    def bound(self) -> Profile | None:
        """The profile that walls in the team member being served (coffer.gateway.advertise), read from the
        vault as it is now (an owner's edit holds at once); None for everyone else. Raises WallGone (a
        JSON-RPC error) when the owner has removed it."""
        member = speaking_for()
        if member is None or member.profile is None:
            return None
        bound = self.view.current_registry().profiles.get(member.profile)
        if bound is None:  # the owner removed it while in use: nothing is served (fail closed)
            raise advertise.WallGone(member.profile)
        return bound

    def _shown_key(self, profile: Profile) -> str:
        """What a profile's advertised list is kept under: a member's walled one apart from a client's."""
        return f"member:{profile.name}" if self.bound() is not None else profile.name

    def reachable(self, tools: list[catalogue.CatalogueTool]) -> list[catalogue.CatalogueTool]:
        """`tools` less what the member being served may not reach."""
        bound = self.bound()
        return tools if bound is None else [t for t in tools if advertise.reaches(bound, t)]

    async def reach_of(self, member: Any) -> Any:
        """What the members' console shows `member` (current: coffer.trust.team.speaking) of what it reaches."""
        from coffer.gateway.memberconsole import Reach

        tools = self.reachable((await self.settled()).visible_tools)
        return Reach(member.profile, sorted(t.name for t in tools), self.grantable())

    def grantable(self) -> dict[str, str]:
        """The per-member servers that authorise with OAuth which the member being served reaches, by
        name, with their URLs: what it connects in the members' console (read from the vault as it is)."""
        reached = self.servers_reached()
        return {
            name: cfg.url
            for name, cfg in self.view.current_registry().servers.items()
            if cfg.url and cfg.oauth and cfg.share == "member" and cfg.enabled and (reached is None or name in reached)
        }

    def servers_reached(self) -> set[str] | None:
        """The servers whose prompts, resources and knowledge the request may reach (None: all)."""
        return advertise.servers_reached(self.bound(), self.view.merged().visible_tools)

    async def list_tools(self, ctx: Any, params: Any) -> dict[str, Any]:
        self.relay.note_host(ctx.session)  # a 2026-07-28 host sends no notifications/initialized
        self.pool.host_known(ctx.session)
        merged, note = await self._listing(ctx)
        profile = self.profile
        run = policy.enabled(self.view.registry.settings, profile)  # coffer__run only where code mode is on
        if profile is None:
            listed = [t for t in merged.tools_result if run or t.get("name") != builtins.RUN]
            return for_era(ctx, self._page("tools", listed, params) | note, cacheable=True)
        own = [t for t in merged.builtins if run or t.get("name") != builtins.RUN]
        visible = self.reachable(merged.visible_tools)
        key = self._shown_key(profile)
        shown = self._shown.get(key)
        if shown is None:  # decided once, at the first list: stable while the log changes
            usage = await anyio.to_thread.run_sync(_usage)
            order = list(self.view.registry.servers)
            shown = advertise.select(profile, visible, len(own), usage, order)
            self._shown[key] = shown
        listed = advertise.tools_result(own, builtins.call_tool_definition(), visible, shown, profile.max_tools)
        return for_era(ctx, self._page("tools", listed, params) | note, cacheable=True)

    def hidden(self) -> frozenset[str]:
        """Visible tools this client's profile does not advertise (reachable through coffer__call_tool)."""
        profile = self.profile
        shown = self._shown.get(self._shown_key(profile)) if profile is not None else None
        if shown is None:
            return frozenset()
        return frozenset(t.name for t in self.reachable(self.view.merged().visible_tools)) - set(shown.names)

    async def list_prompts(self, ctx: Any, params: Any) -> dict[str, Any]:
        merged, _ = await self._listing(ctx)
        reached = self.servers_reached()
        listed = merged.prompts_result
        if reached is not None:
            listed = [p for p in listed if (e := merged.prompts.get(str(p.get("name")))) and e.server in reached]
        return for_era(ctx, self._page("prompts", listed, params), cacheable=True)

    async def list_resources(self, ctx: Any, params: Any) -> dict[str, Any]:
        merged, _ = await self._listing(ctx)
        reached = self.servers_reached()
        listed = merged.resources_result
        if reached is not None:
            listed = [r for r in listed if merged.uri_owner.get(str(r.get("uri"))) in reached]
        return for_era(ctx, self._page("resources", listed, params), cacheable=True)

    async def list_templates(self, ctx: Any, params: Any) -> dict[str, Any]:
        merged, _ = await self._listing(ctx)
        reached = self.servers_reached()
        listed = merged.templates_result
        if reached is not None:
            listed = [t for (server, _), t in zip(merged.templates, listed, strict=True) if server in reached]
        return for_era(ctx, self._page("resourceTemplates", listed, params), cacheable=True)

    def _page(self, key: str, items: list[Any], params: Any) -> dict[str, Any]:
        """One page of a merged list (coffer.gateway.paging: one page unless `[settings] page_size`)."""
        return paging.paged(key, items, params, paging.page_size(self.view.registry.settings))


def _usage() -> dict[tuple[str, str], int]:
    """Calls per (server, tool) from the invocation log, for a profile's cap; empty when unreadable."""
    from coffer.log.query import call_counts

    try:
        return call_counts()
    except Exception:  # a log that cannot be read must not stop the gateway
        return {}
