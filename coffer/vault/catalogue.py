"""The catalogue: what each upstream last served, the names Coffer exposes, and the curated view.

The snapshot (catalogue.json in the data dir) lets `serve` answer the first tools/list at once and
lets `coffer search` rank offline. Exposed names are `<server>__<tool>` when that is a valid, short
name; otherwise a deterministic short form with a hash suffix, so names are stable across restarts
and never clash or vanish. The curated view (`refusal`, `visible_tools`) is the one rule for what an
agent sees. Pure functions apart from the snapshot's load/save and the trust store that rule reads.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from coffer.errors import RegistryError
from coffer.vault import paths, upgrade
from coffer.vault.fsutil import LOCK_TIMEOUT_S, atomic_write, locked
from coffer.vault.registry import SEP, Registry
from coffer.vault.schema import prune_unused_defs

SNAPSHOT_VERSION = upgrade.JSON_VERSIONS["catalogue.json"]
# 64 is the client limit; Claude Code prepends `mcp__coffer__` (13 chars).
MAX_NAME = 51
VALID_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
KINDS = ("tools", "prompts", "resources", "resource_templates")


@dataclass(frozen=True)
class CatalogueTool:
    """One upstream tool under its exposed name, with its real upstream schema."""

    name: str
    server: str
    tool: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None
    annotations: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def wire(self) -> dict[str, Any]:
        """The item tools/list (or prompts/list) gives hosts: raw under the exposed name, its input schema
        without unreachable definitions (coffer.vault.schema). Made on first use: most callers of
        `build_tools` (search, curation, pinning, doctor) never list to a host."""
        wire = {**self.raw, "name": self.name}
        if isinstance(self.raw.get("inputSchema"), dict):
            wire["inputSchema"] = prune_unused_defs(self.raw["inputSchema"])
        return wire


@dataclass
class Listing:
    """What one upstream serves, as wire-format (camelCase) dicts."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    resource_templates: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[dict[str, Any]]]:
        return {kind: list(getattr(self, kind)) for kind in KINDS}


@dataclass
class ServerEntry(Listing):
    """A server's listing as the snapshot keeps it.

    `told`: the host capabilities (sampling, elicitation, roots) the server was told of when it
    listed, since a server may list tools only for clients that can take them; `listed_for`: the tool
    names it listed for each set of capabilities it was told of (the key: `told_key`), and
    `other_tools` the definitions of those that `tools` lacks, so that a first tools/list can answer a
    client of any capabilities with what the server listed for them (`tools_for`); `capabilities`:
    what the server declared (the gateway declares `resources.subscribe` only when some server can).
    """

    updated_at: float = 0.0
    told: list[str] = field(default_factory=list)
    capabilities: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # set when the server has never listed: why its last start failed
    seen: list[str] = field(default_factory=list)  # behaviours observed (coffer.gateway.sessions.SEEN_ROOTS)
    listed_for: dict[str, list[str]] = field(default_factory=dict)
    other_tools: list[dict[str, Any]] = field(default_factory=list)

    def tools_for(self, told: Collection[str]) -> list[dict[str, Any]] | None:
        """The tools this server listed when told `told`; None when it never listed for that."""
        key = told_key(told)
        if key == told_key(self.told):
            return self.tools
        names = self.listed_for.get(key)
        if names is None:
            return None
        known = {t["name"]: t for t in [*self.other_tools, *self.tools]}  # the latest definition wins
        return [known[n] for n in names if n in known]

    def note_listing(self, told: Collection[str] | None, tools: list[dict[str, Any]]) -> None:
        """`tools` replace the entry's, listed when the server was told `told` (None: not known). What
        it listed for other capabilities is kept while it lists the same for the same capabilities; a
        server that lists otherwise has changed, and those are dropped as stale."""
        before = [*self.other_tools, *self.tools]
        if self.updated_at and self.error is None:  # a snapshot from before `listed_for`: its one listing
            self.listed_for.setdefault(told_key(self.told), _names(self.tools))
        self.tools = tools
        if told is None:  # listed for what is not known: only this listing is kept
            self.listed_for, self.other_tools = {}, []
            return
        key, names = told_key(told), _names(tools)
        if self.listed_for.get(key, names) != names:
            self.listed_for = {}
        self.listed_for[key] = names
        known = {t["name"]: t for t in before if isinstance(t.get("name"), str)}
        have = {*names, *known}
        self.listed_for = {k: v for k, v in self.listed_for.items() if set(v) <= have}
        wanted = {n for listed in self.listed_for.values() for n in listed} - set(names)
        self.other_tools = [known[n] for n in sorted(wanted)]


def told_key(told: Collection[str]) -> str:
    """How a set of host capabilities is written as a `listed_for` key."""
    return ",".join(sorted(told))


def _names(tools: Iterable[dict[str, Any]]) -> list[str]:
    return [t["name"] for t in tools if isinstance(t.get("name"), str)]


@dataclass
class Snapshot:
    path: Path
    servers: dict[str, ServerEntry] = field(default_factory=dict)


def _hash(server: str, name: str, length: int) -> str:
    return hashlib.sha256(f"{server}\0{name}".encode()).hexdigest()[:length]


def exposed_name(server: str, name: str, hash_len: int = 6, prefix: str | None = None) -> str:
    """`prefix__name` (the prefix is the server's name unless the registry sets one; "" means bare) when
    valid and short enough, else a deterministic short form with a hash suffix."""
    prefix = server if prefix is None else prefix
    head = f"{prefix}{SEP}" if prefix else ""
    plain = f"{head}{name}"
    if VALID_NAME.match(plain) and len(plain) <= MAX_NAME and hash_len == 6:
        return plain
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name) or "_"
    suffix = "-" + _hash(server, name, hash_len)
    base = f"{head}{cleaned}"[: MAX_NAME - len(suffix)]
    return base + suffix


def build_tools(server: str, raw_tools: Iterable[dict[str, Any]], prefix: str | None = None) -> list[CatalogueTool]:
    """Name one server's tools (or prompts); clashes after shortening get a longer hash, deterministically.

    Items without a string name are skipped: they cannot be called, and must not break the others.
    """
    out: list[CatalogueTool] = []
    taken: set[str] = set()
    head = f"{server if prefix is None else prefix}{SEP}" if prefix != "" else ""

    # Valid names claim theirs first, so a real `a_b` keeps its name next to a rewritten `a.b`.
    def rewritten(raw: dict[str, Any]) -> bool:
        return exposed_name(server, raw["name"], prefix=prefix) != f"{head}{raw['name']}"

    named = [t for t in raw_tools if isinstance(t.get("name"), str) and t["name"]]
    ordered = sorted(named, key=lambda t: (rewritten(t), t["name"]))
    for raw in ordered:
        name = str(raw["name"])
        exposed = exposed_name(server, name, prefix=prefix)
        hash_len = 6
        while exposed in taken:
            hash_len += 4
            exposed = exposed_name(server, name, hash_len, prefix)
        taken.add(exposed)
        schema = raw.get("inputSchema") or {"type": "object"}
        out.append(
            CatalogueTool(
                name=exposed,
                server=server,
                tool=name,
                description=str(raw.get("description") or ""),
                input_schema=schema if isinstance(schema, dict) else {"type": "object"},
                title=raw.get("title"),
                annotations=raw.get("annotations"),
                raw=raw,
            )
        )
    out.sort(key=lambda t: t.name)
    return out


def prefixes(registry: Registry) -> dict[str, str]:
    """Each registered server's exposed-name prefix (`ServerConfig.exposed_prefix`)."""
    return {name: cfg.exposed_prefix for name, cfg in registry.servers.items()}


# ---------------------------------------------------------------- snapshot file


def load_snapshot(path: Path | None = None) -> Snapshot | None:
    """The last saved catalogue, or None when nothing was ever listed. A damaged file is an error."""
    path = path or paths.snapshot_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RegistryError(f"{path}: unreadable catalogue snapshot ({exc}); run `coffer refresh`") from exc
    upgrade.check_json(data, path, "catalogue.json")
    snap = Snapshot(path=path)
    for name, entry in (data.get("servers") or {}).items():
        told, caps = entry.get("told"), entry.get("capabilities")
        snap.servers[name] = ServerEntry(
            updated_at=float(entry.get("updated_at", 0.0)),
            told=[str(c) for c in told] if isinstance(told, list) else [],
            capabilities=caps if isinstance(caps, dict) else {},
            error=str(entry["error"]) if entry.get("error") else None,
            seen=[str(x) for x in entry.get("seen") or [] if isinstance(x, str)],
            listed_for=_listed_for(entry.get("listed_for")),
            other_tools=[t for t in entry.get("other_tools") or [] if isinstance(t, dict)],
            **{kind: list(entry.get(kind) or []) for kind in KINDS},
        )
    return snap


def _listed_for(raw: object) -> dict[str, list[str]]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): [n for n in v if isinstance(n, str)] for k, v in raw.items() if isinstance(v, list)}


def _for_update(path: Path) -> Snapshot:
    """The snapshot to change (under its lock): a damaged one is derived data, rebuilt from nothing."""
    try:
        return load_snapshot(path) or Snapshot(path=path)
    except upgrade.NewerVaultError:  # not damage: a newer Coffer's, left as it is
        raise
    except RegistryError:
        return Snapshot(path=path)


def save_server(
    server: str,
    listing: Mapping[str, list[dict[str, Any]]] | None = None,
    *,
    path: Path | None = None,
    meta: dict[str, Any] | None = None,
    **lists: list[dict[str, Any]],
) -> None:
    """Record what `server` just served (any of tools/prompts/resources/resource_templates, in `listing`
    or as keywords); `meta` may carry `told`, `capabilities` and `seen` (see `ServerEntry`)."""
    save_servers({server: ({**(listing or {}), **lists}, meta)}, path=path)


def save_servers(
    listed: Mapping[str, tuple[Mapping[str, list[dict[str, Any]]], dict[str, Any] | None]],
    *,
    path: Path | None = None,
    timeout: float = LOCK_TIMEOUT_S,
) -> None:
    """Record several servers' listings in one locked write (a gateway batches what its upstreams listed
    meanwhile); `timeout`: how long to wait for another process's write (ConflictError after it)."""
    path = path or paths.snapshot_path()
    for lists, _ in listed.values():
        unknown = set(lists) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown catalogue kinds: {sorted(unknown)}")
    with locked(path, timeout=timeout):
        snap = _for_update(path)
        for server, (lists, meta) in listed.items():
            entry = snap.servers.setdefault(server, ServerEntry())
            for kind, items in lists.items():
                if kind == "tools":
                    entry.note_listing(None if meta is None else meta.get("told") or (), list(items))
                else:
                    setattr(entry, kind, items)
            if meta is not None:
                entry.told = sorted(meta.get("told") or [])
                entry.capabilities = dict(meta.get("capabilities") or {})
                entry.seen = sorted({*entry.seen, *(meta.get("seen") or [])})
            entry.error = None
            entry.updated_at = time.time()
        _write(snap)


def save_failure(server: str, error: str, path: Path | None = None) -> None:
    """Remember that a server which has never listed failed to, so the next `coffer serve` answers its
    first tools/list without waiting for it (and `coffer doctor` can say so). A server with a listing
    keeps it: its tools were real, and it may come back."""
    path = path or paths.snapshot_path()
    with locked(path):
        snap = _for_update(path)
        entry = snap.servers.get(server)
        if entry is not None and entry.error is None:
            return
        snap.servers[server] = ServerEntry(error=error[:500], updated_at=time.time())
        _write(snap)


def note_seen(server: str, what: str, path: Path | None = None) -> bool:
    """Remember a behaviour of `server` across starts; False when it was already noted."""
    path = path or paths.snapshot_path()
    with locked(path):
        snap = _for_update(path)
        entry = snap.servers.get(server)
        if entry is None or what in entry.seen:  # not listed yet: its first listing carries the note (meta)
            return False
        entry.seen = sorted({*entry.seen, what})
        _write(snap)
        return True


def drop_server(server: str, path: Path | None = None) -> None:
    path = path or paths.snapshot_path()
    with locked(path):
        snap = load_snapshot(path)
        if snap is not None and snap.servers.pop(server, None) is not None:
            _write(snap)


def _write(snap: Snapshot) -> None:
    servers: dict[str, Any] = {}
    for name in sorted(snap.servers):
        entry = snap.servers[name]
        servers[name] = {
            "updated_at": entry.updated_at,
            "told": entry.told,
            "capabilities": entry.capabilities,
            **({"error": entry.error} if entry.error else {}),
            **({"seen": entry.seen} if entry.seen else {}),
            **({"listed_for": entry.listed_for} if len(entry.listed_for) > 1 else {}),
            **({"other_tools": entry.other_tools} if entry.other_tools else {}),
            "names": {t.name: t.tool for t in build_tools(name, entry.tools)},
            **{kind: getattr(entry, kind) for kind in KINDS},
        }
    upgrade.check_vault()
    atomic_write(snap.path, json.dumps({"version": SNAPSHOT_VERSION, "servers": servers}, indent=1))


# ---------------------------------------------------------------- lookups


def name_clashes(registry: Registry, snapshot: Snapshot | None, server: str) -> list[str]:
    """Exposed names of `server` that another server (or a built-in, `coffer__*`) would expose too.

    Only prefixes make this possible (a bare `create_issue` beside another bare one, or a bare
    `github__x` beside server github's `x`); the gateway then serves the name from the first server
    by name, so `coffer add` refuses such a server and `coffer doctor` reports it.
    """
    cfg = registry.servers.get(server)
    if cfg is None:
        return []
    mine = {t.name for t in server_tools(snapshot, server, cfg.exposed_prefix)}
    clashes = {n for n in mine if n.startswith(f"coffer{SEP}")}
    for other in registry.servers.values():
        if other.name != server:
            clashes |= mine & {t.name for t in server_tools(snapshot, other.name, other.exposed_prefix)}
    return sorted(clashes)


def server_tools(snapshot: Snapshot | None, server: str, prefix: str | None = None) -> list[CatalogueTool]:
    if snapshot is None or server not in snapshot.servers:
        return []
    return build_tools(server, snapshot.servers[server].tools, prefix)


def find_tool(snapshot: Snapshot | None, server: str, name: str, prefix: str | None = None) -> CatalogueTool | None:
    """Look a tool up by its upstream name or its exposed name."""
    for tool in server_tools(snapshot, server, prefix):
        if name in (tool.tool, tool.name, tool.name.partition(SEP)[2]):
            return tool
    return None
