"""The vault as `coffer serve` sees it: the registry (re-read when the file changes), each server's
listing (from the snapshot until it lists live), the merged catalogue, and the curation rule.

Everything a request needs to decide what is visible and who owns a name, and nothing that talks to
an upstream: the server and the router hold a View and ask it. `version` moves whenever the registry,
a listing or the trust state changes; the merged view and remembered refusals follow it. Live
listings go back to the snapshot through a `SnapshotWriter`, off every request's path.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import mcp_types as types

from coffer.errors import CofferError, ConflictError, RegistryError
from coffer.gateway.merge import Merged, merge
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, paths, registry
from coffer.vault.catalogue import KINDS, Listing, build_tools

SNAPSHOT_LOCK_S = 0.5  # how long one snapshot write waits for another process's before trying later
SETTLE_S = 0.3  # a registry file younger than this may still be being written
# an emptied file (rewritten in place, not yet written again) is read only once it stayed empty this
# long: a writer held up between truncating and writing leaves one that looks old enough to read
EMPTY_SETTLE_S = 2.0

log = logging.getLogger("coffer.gateway")

Sync = Callable[[list[registry.ServerConfig]], None]


class View:
    """Registry, listings, merged catalogue and refusals for one gateway."""

    def __init__(self, builtins: list[dict[str, Any]], on_sync: Sync) -> None:
        """`on_sync` is given the servers to run (enabled, launch approved) whenever that may have changed."""
        self.builtins = builtins
        self.on_sync = on_sync
        self.registry_path = paths.registry_path()  # resolved once: it is stat'ed on every request
        self.registry = registry.Registry(path=self.registry_path)
        self.registry_loaded = False  # a good registry was read: a broken file later keeps serving it
        self.registry_error: str | None = None  # why the file on disk is not the one served (it does not parse)
        self.pins: Pins | None = None  # trust: unapproved launch configs, held tools (set while running)
        self.lists: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self.live: set[str] = set()  # servers listed live by this gateway (the rest come from the snapshot)
        self.entries: dict[str, catalogue.ServerEntry] = {}  # the snapshot as loaded: what each listed for whom
        self.server_caps: dict[str, dict[str, Any]] = {}  # what each server declared (live, else snapshot)
        self.seen: dict[str, set[str]] = {}  # what each server was seen doing (coffer.gateway.sessions)
        self.errors: dict[str, str] = {}  # servers that never listed, and why (snapshot, or this start)
        self.version = 0
        self._reg_stamp: tuple[int, int, int] | None = None
        self._empty_since: tuple[tuple[int, int, int], float] | None = None  # an emptied file: when first seen
        self._pins_stamp = -1
        self._merged: tuple[int, Merged] | None = None
        self._refusals: tuple[int, dict[tuple[str, str | None, str | None], str | None]] = (-1, {})

    # ------------------------------------------------------------------ loading

    def load_snapshot(self) -> None:
        try:
            snap = catalogue.load_snapshot()
        except RegistryError as exc:
            log.warning("%s", exc)
            return
        for name, entry in (snap.servers if snap else {}).items():
            self.lists[name] = {kind: list(getattr(entry, kind)) for kind in KINDS}
            self.entries[name] = entry
            self.server_caps[name] = dict(entry.capabilities)
            self.seen[name] = set(entry.seen)
            if entry.error:
                self.errors[name] = entry.error
            if self.pins is not None:  # a snapshot written elsewhere (refresh) may hold a changed tool
                self.pins.observe(name, build_tools(name, entry.tools, self.prefix(name)))
        self.version += 1

    def current_registry(self) -> registry.Registry:
        """The registry, re-read only when the file changed; a broken file keeps the last good one.

        A file rewritten in place (same inode) in the last SETTLE_S, or found empty, is left for a later
        look (`_settling`; the vault watcher's come every half second): an editor that saves by
        truncating and rewriting would otherwise be read half written, an empty vault served and then
        kept as the last good one. A file replaced whole (Coffer's own edits, most editors) is read at
        once."""
        path = self.registry_path
        try:
            st = path.stat()
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        in_place = stamp is not None and self._reg_stamp is not None and stamp[2] == self._reg_stamp[2]
        if (
            stamp is not None
            and in_place
            and stamp != self._reg_stamp
            and self.registry_loaded
            and self._settling(stamp, st.st_mtime)
        ):
            return self.registry
        if stamp != self._reg_stamp:
            try:
                self.registry = registry.load(path)
            except RegistryError as exc:
                self._reg_stamp = stamp  # one error per broken edit, not one per look
                self.registry_error = str(exc)
                if not self.registry_loaded:  # no last good one: never serve an empty vault as the real one
                    raise
                log.error("keeping the last good registry: %s", exc)
                return self.registry
            self.registry_loaded, self.registry_error = True, None
            self.version += 1
            self._sync()  # may fail (a locked coffer.db): the stamp is kept only after it ran, so the next look retries
            self._reg_stamp = stamp
        elif self.pins is not None and self.pins.stamp() != self._pins_stamp:  # e.g. `coffer approve`
            self.version += 1
            self._sync()
        return self.registry

    def _settling(self, stamp: tuple[int, int, int], mtime: float) -> bool:
        """Whether a file rewritten in place may still be being written: younger than SETTLE_S, or
        empty for less than EMPTY_SETTLE_S of this gateway's looks (whatever its age says)."""
        if stamp[1] == 0:
            if self._empty_since is None or self._empty_since[0] != stamp:
                self._empty_since = (stamp, time.monotonic())
            return time.monotonic() - self._empty_since[1] < EMPTY_SETTLE_S
        return time.time() - mtime < SETTLE_S

    def _sync(self) -> None:
        """Run the enabled servers whose launch config is approved (coffer.trust.pinning); stop the others."""
        servers = self.registry.enabled_servers()
        if self.pins is not None:
            servers, self._pins_stamp = self.pins.startable(self.registry), self.pins.stamp()
        # servers known to list start first; those that failed before, or were never seen, after them
        servers = sorted(servers, key=lambda c: (c.name in self.errors, c.name not in self.lists))
        self.on_sync(servers)

    def prefix(self, server: str) -> str | None:
        cfg = self.registry.servers.get(server)
        return None if cfg is None else cfg.exposed_prefix

    # ------------------------------------------------------------------ listings

    def record(self, server: str, listing: Listing, kinds: frozenset[str], caps: dict[str, Any]) -> tuple[bool, bool]:
        """A live listing of `kinds`: returns (changed kinds, first live listing of this server)."""
        lists = self.lists.setdefault(server, {kind: [] for kind in KINDS})
        changed = frozenset(k for k in kinds if lists.get(k) != getattr(listing, k))
        for kind in kinds:
            lists[kind] = list(getattr(listing, kind))
        if "tools" in kinds and self.pins is not None:
            self.pins.observe(server, build_tools(server, lists["tools"], self.prefix(server)))  # holds rug pulls
        first = server not in self.live
        entry = self.entries.get(server)
        if first and "tools" in kinds and entry is not None and len(entry.listed_for) > 1:
            changed |= {"tools"}  # hosts may have been given its listing for other capabilities (`fitted`)
        self.live.add(server)
        self.errors.pop(server, None)
        if caps:
            self.server_caps[server] = caps
        if changed:
            self.version += 1
        return changed, first  # type: ignore[return-value]

    def missing(self, server: str, error: str) -> None:
        """A server that has not listed within the first list's budget: list it as empty, with why."""
        self.lists.setdefault(server, {kind: [] for kind in KINDS})
        self.errors[server] = error

    def fitted(
        self, told_for: Callable[[str], frozenset[str]]
    ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[str]]]:
        """For servers answered from the snapshot (not listed live yet) whose last listing was for other
        capabilities than their upstream is told of here (`told_for`): (the tools each listed when told
        that, where the snapshot has them; for the others, what their last listing was for)."""
        tools_of: dict[str, list[dict[str, Any]]] = {}
        other: dict[str, list[str]] = {}
        for name, entry in self.entries.items():
            told = frozenset(entry.told)  # the capabilities its last listing was for
            if name in self.live or name in self.errors or told == (wanted := told_for(name)):
                continue
            found = entry.tools_for(wanted)
            if found is None:
                other[name] = sorted(told)
            elif found != self.lists.get(name, {}).get("tools"):
                tools_of[name] = found
        return tools_of, other

    def can_subscribe(self) -> bool:
        """Whether any enabled server declared `resources.subscribe` (live, else as last catalogued)."""
        reg = self.current_registry()
        return any(
            (self.server_caps.get(cfg.name, {}).get("resources") or {}).get("subscribe")
            for cfg in reg.enabled_servers()
        )

    def declared(self, key: str) -> dict[str, Any]:
        """The union of what enabled servers declared under `experimental` or `extensions` (the first
        server in registry order wins a name two declare), for the gateway to advertise them too."""
        out: dict[str, Any] = {}
        for cfg in self.current_registry().enabled_servers():
            found = self.server_caps.get(cfg.name, {}).get(key)
            for name, settings in found.items() if isinstance(found, dict) else ():
                out.setdefault(name, settings)
        return out

    def adjust_capabilities(self, caps: types.ServerCapabilities) -> types.ServerCapabilities:
        """The gateway's capabilities as its upstreams make them: `resources.subscribe` only when one can,
        and their experimental features and extensions."""
        if caps.resources is not None and caps.resources.subscribe:
            caps.resources.subscribe = self.can_subscribe()
        caps.experimental = {**self.declared("experimental"), **(caps.experimental or {})} or None
        caps.extensions = {**self.declared("extensions"), **(caps.extensions or {})} or None
        return caps

    # ------------------------------------------------------------------ curation and the merged view

    def refusal(self, server: str, tool: str | None = None, exposed: str | None = None) -> str | None:
        """Why `server` (or one of its tools) may not be listed or called now; None when it may.

        Decides tools/list, coffer__search_tools and every call, by `curation.refusal`: the same rule
        `coffer search` and `coffer doctor` apply to the snapshot. Remembered until the registry or the
        trust state changes (`version`), since each check hashes the server's launch config.
        """
        if self._refusals[0] != self.version:
            self._refusals = (self.version, {})
        key = (server, tool, exposed)
        known = self._refusals[1]
        if key not in known:
            known[key] = curation.refusal(self.registry, self.pins, server, tool, exposed)
        return known[key]

    def merged(self, tools_of: Mapping[str, list[dict[str, Any]]] | None = None) -> Merged:
        """The merged view, rebuilt only when a listing, the registry or the trust state changed;
        `tools_of`: servers' tools other than their listings' (`fitted`; not cached)."""
        if tools_of:
            lists = {s: {**v, "tools": tools_of[s]} if s in tools_of else v for s, v in self.lists.items()}
            return merge(lists, self.refusal, self.builtins, catalogue.prefixes(self.registry))
        if self._merged is None or self._merged[0] != self.version:  # (a registry change bumps the version)
            merged = merge(self.lists, self.refusal, self.builtins, catalogue.prefixes(self.registry))
            self._merged = (self.version, merged)
        return self._merged[1]

    def server_of(self, name: str) -> str:
        """The server an exposed name's prefix points to (for names not listed yet)."""
        head, _, _ = name.partition(registry.SEP)
        return next((c.name for c in self.registry.servers.values() if c.exposed_prefix == head), head)

    def resource_owner(self, uri: str) -> str | None:
        """The enabled server that lists `uri`, or whose template is `uri` or matches it."""
        m = self.merged()
        server = m.uri_owner.get(uri)
        if server is None:
            server = next((s for s, tpl in m.templates if tpl.template == uri), None)
        if server is None:
            server = next((s for s, tpl in m.templates if tpl.match(uri) is not None), None)
        return server


class SnapshotWriter:
    """Live listings written back to the catalogue snapshot, off every listing's and call's path:
    listings that arrive meanwhile go in the same write, and a lock held by another coffer process is
    waited for briefly and then tried again later, never queued behind (five gateways starting at once)."""

    def __init__(self, spawn: Callable[..., None]) -> None:
        self._spawn = spawn  # the gateway's task group (its pool's)
        self.unsaved: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # listings the snapshot lacks yet

    def put(self, server: str, lists: dict[str, Any], meta: dict[str, Any]) -> None:
        self.unsaved[server] = (lists, meta)
        if len(self.unsaved) == 1:  # the first one since the last write starts the writer
            self._spawn(self._write)

    def note_seen(self, server: str, what: str) -> None:
        """A note on what `server` was seen doing goes with its listing when that is not written yet."""
        unsaved = self.unsaved.get(server)
        if unsaved is not None:
            lists, meta = unsaved
            self.unsaved[server] = (lists, {**meta, "seen": sorted({*meta.get("seen", ()), what})})

    async def _write(self) -> None:
        delay = 0.05
        while self.unsaved:
            await anyio.sleep(delay)  # let the servers listing about now share this write
            batch = dict(self.unsaved)
            write = functools.partial(catalogue.save_servers, batch, timeout=SNAPSHOT_LOCK_S)
            try:
                await anyio.to_thread.run_sync(write)
            except ConflictError:
                delay = min(delay * 2 + 0.2, 5.0)
                continue
            except (CofferError, OSError) as exc:
                log.warning("could not write the catalogue snapshot for %s: %s", ", ".join(batch), exc)
            for name, listed in batch.items():
                if self.unsaved.get(name) is listed:
                    del self.unsaved[name]
            delay = 0.05

    async def flush(self) -> None:
        """At the gateway's end: what is not written yet, in one last write (shielded, 2 s for the lock)."""
        if not self.unsaved:
            return
        with anyio.CancelScope(shield=True), contextlib.suppress(CofferError, OSError):
            batch = dict(self.unsaved)
            await anyio.to_thread.run_sync(lambda: catalogue.save_servers(batch, timeout=2.0))
