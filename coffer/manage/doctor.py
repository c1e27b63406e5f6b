"""`coffer doctor`, `coffer refresh` and `coffer add`'s probe: start upstreams once, see what they serve,
then report or record it.

All go through `coffer.gateway.pool` (the one way Coffer starts upstreams: bounded concurrency, drained stderr,
process-group stop), and none starts a server whose launch config the user has not approved, the
same rule `coffer serve` follows. `doctor` writes nothing. `refresh` and `add` record each listing with
`record_listing`: the catalogue snapshot entry, `Pins.observe` (so a changed tool is held and
`coffer diff` shows it at once) and the server's text resources re-indexed for `coffer__ask`; a server
that failed keeps its last good entry and index.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from coffer.trust import curation
from coffer.vault import catalogue, registry
from coffer.vault.registry import SEP, ServerConfig

if TYPE_CHECKING:
    from coffer.trust.pinning import Pins

STDERR_LINES = 12
TOP_N = 5
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

    @property
    def tool_count(self) -> int | None:
        return None if self.listing is None else len(self.listing.get("tools") or [])


def _probe_of(up: Any) -> Probe:
    from coffer.gateway.upstream import State

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
    )


async def _probe_all(
    configs: list[ServerConfig], limit: int, on_done: Callable[[Probe], None] | None, read_resources: bool
) -> list[Probe]:
    from coffer.gateway import knowledge
    from coffer.gateway.pool import SLOT_HOLD_S, Pool
    from coffer.gateway.upstream import START_SLACK_S, State

    done: dict[str, Probe] = {}
    waves = math.ceil(len(configs) / max(1, limit))  # a queued start waits at most this many slot holds

    async def wait(up: Any) -> None:
        await up.wait_settled(up.cfg.timeout + START_SLACK_S + waves * SLOT_HOLD_S)
        probe = done[up.name] = _probe_of(up)
        if read_resources and probe.ok:
            items = await knowledge.text_resources(up)  # the gateway's reader: unreadable or binary ones skipped
            probe.resources = items if up.state is State.READY else None  # died meanwhile: keep the old index
        if on_done is not None:
            on_done(probe)

    async with Pool(limit=limit) as pool:
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


NOT_APPROVED = "launch config not approved: check it with `coffer diff {0}`, then `coffer approve {0}`"


# ---------------------------------------------------------------- refresh


@dataclass
class Refreshed:
    name: str
    status: str  # "ok", "failed" or "unapproved"
    tools: int | None = None
    init_seconds: float | None = None
    error: str | None = None
    stderr_tail: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # exposed names held by pinning after this listing
    resources_indexed: int | None = None  # text resources now in coffer__ask's index


def summary(probe: Probe) -> str:
    if probe.ok:
        return f"{probe.tool_count} tools in {probe.init_seconds or 0:.2f}s"
    return probe.error or "failed"


def targets(names: list[str] | None = None) -> list[ServerConfig]:
    """The named servers (even disabled ones: the user asked), else every enabled one. NotFoundError if unknown."""
    reg = registry.load()
    return [reg.get(n) for n in dict.fromkeys(names)] if names else reg.enabled_servers()


PROBE_TIMEOUT_S = 15.0  # `coffer add` and `coffer import` wait this long at most for a new server to list


def probe_configs(configs: list[ServerConfig]) -> list[ServerConfig]:
    """The configs with their start timeout capped for a first probe, so one hanging server cannot hold
    `add` or `import` for its full timeout (a call through `coffer serve` still gets all of it)."""
    return [dataclasses.replace(c, timeout=min(c.timeout, PROBE_TIMEOUT_S)) for c in configs]


def refresh(configs: list[ServerConfig], limit: int | None = None, on_done: Progress | None = None) -> list[Refreshed]:
    """Start these servers once; record each listing (snapshot, pins, resource index) as it arrives.

    Raises RegistryError when the registry's `new_tools` setting is invalid.
    """
    from coffer.trust.pinning import Pins

    with Pins.open() as pins:  # applies the registry's `new_tools` setting to what it observes
        return _refresh(pins, configs, limit, on_done)


def record_listing(
    pins: Pins,
    name: str,
    listing: dict[str, list[dict[str, Any]]],
    resources: list[tuple[str, str, str]] | None,
    prefix: str | None = None,
    capabilities: dict[str, Any] | None = None,
) -> tuple[set[str], int | None]:
    """Record what `name` served: snapshot entry, pins (changed tools held), knowledge index.

    Returns (exposed names held now, resources indexed or None when `resources` is None).
    """
    from coffer.memory import store as memory

    meta = None if capabilities is None else {"told": [], "capabilities": capabilities}  # probes relay nothing
    catalogue.save_server(name, meta=meta, **listing)
    held = pins.observe(name, catalogue.build_tools(name, listing.get("tools") or [], prefix))
    indexed = None if resources is None else memory.index_resources(name, resources)
    return held, indexed


def probe_and_record(cfg: ServerConfig) -> dict[str, int]:
    """`coffer add`'s check: start the new server once and record what it serves, as `refresh` does.

    Its first listing becomes the tools' pinned baseline. Returns counts per kind; raises UpstreamError
    (with the last stderr line) when it cannot be listed.
    """
    from coffer.errors import UpstreamError
    from coffer.trust.pinning import Pins

    with Pins.open() as pins:
        if pins.server_state(cfg) != "approved":
            raise UpstreamError(f"{cfg.name}: {NOT_APPROVED.format(cfg.name)}")
        (probe,) = probe_servers(probe_configs([cfg]), 1, read_resources=True)
        if not probe.ok or probe.listing is None:
            catalogue.save_failure(cfg.name, str(probe.error))  # `coffer serve` need not wait for it
            error = str(probe.error)
            raise UpstreamError(error if error.startswith(f"{cfg.name}:") else f"{cfg.name}: {error}")
        record_listing(pins, cfg.name, probe.listing, probe.resources, cfg.exposed_prefix, probe.capabilities)
    return {kind: len(items) for kind, items in probe.listing.items()}


def _refresh(pins: Pins, configs: list[ServerConfig], limit: int | None, on_done: Progress | None) -> list[Refreshed]:
    states = {cfg.name: pins.server_state(cfg) for cfg in configs}
    results: dict[str, Refreshed] = {}
    for cfg in configs:
        if states[cfg.name] != "approved":
            results[cfg.name] = Refreshed(cfg.name, "unapproved", error=NOT_APPROVED.format(cfg.name))
            if on_done is not None:
                on_done(cfg.name, False, "not approved")

    def recorded(probe: Probe) -> None:
        if probe.ok and probe.listing is not None:
            prefix = next((c.exposed_prefix for c in configs if c.name == probe.name), None)
            held, indexed = record_listing(pins, probe.name, probe.listing, probe.resources, prefix, probe.capabilities)
            item = Refreshed(probe.name, "ok", probe.tool_count, probe.init_seconds)
            item.held, item.resources_indexed = sorted(held), indexed
        else:
            item = Refreshed(probe.name, "failed", error=probe.error, stderr_tail=probe.stderr_tail)
            catalogue.save_failure(probe.name, str(probe.error))
        results[probe.name] = item
        if on_done is not None:
            on_done(probe.name, probe.ok, summary(probe))

    probe_servers([c for c in configs if c.name not in results], limit, recorded, read_resources=True)
    return [results[cfg.name] for cfg in configs]


# ---------------------------------------------------------------- doctor


@dataclass
class ServerDiagnosis:
    name: str
    status: str  # "ok", "failed", "disabled" or "unapproved"
    transport: str
    init_seconds: float | None = None
    tools: int | None = None
    advertised: int = 0
    tokens: int = 0
    tokens_from: str | None = None  # "live", "snapshot" or None when nothing is known
    auth: str | None = None  # OAuth servers: authorised, expired, expired (refreshable) or none
    missing_from_first_list: bool = False  # never listed (no snapshot entry, or only a failure): not in the first list
    name_problems: list[str] = field(default_factory=list)
    error: str | None = None
    error_class: str | None = None
    stderr_tail: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Diagnosis:
    servers: list[ServerDiagnosis]
    shared_names: dict[str, list[str]]
    builtin_tokens: int
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)  # tokens each profile advertises

    @property
    def total_tokens(self) -> int:
        return self.builtin_tokens + sum(s.tokens for s in self.servers)

    @property
    def failed(self) -> list[str]:
        return [s.name for s in self.servers if s.status in ("failed", "unapproved")]

    def costliest(self, n: int = TOP_N) -> list[ServerDiagnosis]:
        return sorted((s for s in self.servers if s.tokens), key=lambda s: (-s.tokens, s.name))[:n]

    def to_dict(self) -> dict[str, Any]:
        return {
            "servers": [asdict(s) for s in self.servers],
            "tokens": {
                "total": self.total_tokens,
                "builtins": self.builtin_tokens,
                "costliest": [{"name": s.name, "tokens": s.tokens} for s in self.costliest()],
                "profiles": self.profiles,
            },
            "shared_tool_names": self.shared_names,
            "failed": self.failed,
        }


def name_problems(server: str, tools: list[dict[str, Any]], prefix: str | None = None) -> list[str]:
    """Tools that could not keep `<prefix>__<tool>` as their exposed name, and names served twice."""
    problems: list[str] = []
    counts: dict[str, int] = {}
    for raw in tools:
        counts[str(raw.get("name"))] = counts.get(str(raw.get("name")), 0) + 1
    head = "" if prefix == "" else f"{server if prefix is None else prefix}{SEP}"
    for tool in catalogue.build_tools(server, tools, prefix):
        plain = f"{head}{tool.tool}"
        if tool.name != plain:
            why = "invalid characters" if not catalogue.VALID_NAME.match(plain) else "too long"
            problems.append(f"'{render_name(tool.tool)}' is exposed as '{tool.name}' ({why})")
    problems += [f"'{render_name(n)}' is served {c} times" for n, c in sorted(counts.items()) if c > 1]
    return problems


def render_name(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _builtin_tokens() -> int:
    """The `coffer__*` built-ins are advertised beside the upstream tools, so they count too."""
    from coffer.gateway.builtins import tool_definitions

    keys = ("name", "description", "inputSchema")
    return sum(len(json.dumps({k: d.get(k) for k in keys})) // 4 for d in tool_definitions())


def diagnose(limit: int | None = None, on_done: Progress | None = None) -> Diagnosis:
    """Start every enabled, approved server once and report on it; writes nothing."""
    from coffer.trust.pinning import Pins

    reg = registry.load()
    try:
        snapshot = catalogue.load_snapshot()
    except registry.RegistryError:
        snapshot = None
    enabled = reg.enabled_servers()
    with Pins.open(new_tools="allow") as pins:  # read only: doctor observes nothing
        report = _diagnose(reg, pins, snapshot, enabled, limit, on_done)
    from coffer.manage.profiles import preview

    for name in [None, *reg.profiles]:  # what each profile advertises, from the snapshot (no profile: all)
        row = preview(name, reg)
        report.profiles[name or "(none)"] = {"advertised": row["advertised"], "tokens": row["tokens"]}
    return report


def _diagnose(
    reg: registry.Registry,
    pins: Pins,
    snapshot: catalogue.Snapshot | None,
    enabled: list[ServerConfig],
    limit: int | None,
    on_done: Progress | None,
) -> Diagnosis:
    states = {cfg.name: pins.server_state(cfg) for cfg in enabled}
    runnable = [c for c in enabled if states[c.name] == "approved"]
    for cfg in enabled:
        if states[cfg.name] != "approved" and on_done is not None:
            on_done(cfg.name, False, "not approved")
    report = (lambda p: on_done(p.name, p.ok, summary(p))) if on_done is not None else None
    probes = {p.name: p for p in probe_servers(runnable, limit, report)}
    servers: list[ServerDiagnosis] = []
    served_by: dict[str, list[str]] = {}
    for cfg in reg.servers.values():
        diag = ServerDiagnosis(cfg.name, "disabled", cfg.transport)
        probe = probes.get(cfg.name)
        if cfg.enabled and probe is None:
            diag.status, diag.error = "unapproved", NOT_APPROVED.format(cfg.name)
        elif probe is not None:
            diag.status = "ok" if probe.ok else "failed"
            diag.init_seconds, diag.tools = probe.init_seconds, probe.tool_count
            diag.error, diag.error_class, diag.stderr_tail = probe.error, probe.error_class, probe.stderr_tail
            if probe.garbage_lines:
                diag.notes.append(f"{probe.garbage_lines} non-JSON line(s) on stdout (ignored)")
            diag.notes.extend(probe.problems)
        diag.notes += [p.split(": ", 1)[1] for p in reg.unknown_keys() if p.startswith(f"servers.{cfg.name}:")]
        if cfg.oauth:
            from coffer.trust import oauth_store

            diag.auth = oauth_store.state(cfg.name)
            if diag.auth != "authorised":
                diag.notes.append(f"OAuth: {diag.auth} (`coffer auth {cfg.name}`)")
        entry = snapshot.servers.get(cfg.name) if snapshot is not None else None
        if cfg.enabled and (entry is None or entry.error):
            why = f": {entry.error}" if entry is not None and entry.error else ""
            diag.missing_from_first_list = True
            diag.notes.append(
                f"not in the catalogue, so missing from the first tools/list of `coffer serve`{why} "
                f"(`coffer refresh {cfg.name}` once it starts)"
            )
        tools = probe.listing["tools"] if probe is not None and probe.listing else None
        diag.tokens_from = "live" if tools is not None else None
        if tools is None and entry is not None and not entry.error:
            tools, diag.tokens_from = entry.tools, "snapshot"
        if tools is not None:
            diag.name_problems = name_problems(cfg.name, tools, cfg.exposed_prefix)
            if diag.status == "ok" and not tools:
                diag.notes.append("serves no tools")
            for raw in {str(t.get("name")) for t in tools}:
                served_by.setdefault(raw, []).append(cfg.name)
            built = catalogue.build_tools(cfg.name, tools, cfg.exposed_prefix)
            visible = curation.curate(reg, pins, cfg.name, built)  # what the gateway would advertise
            held = sum(pins.is_held(cfg.name, t.tool) for t in built)
            if held and diag.status == "ok":
                diag.notes.append(f"{held} tool(s) held until approved (`coffer diff {cfg.name}`)")
            from coffer.trust.injection import scan

            for t in built:
                reasons = scan(t.raw or {}, cfg.name) if pins.is_held(cfg.name, t.tool) else []
                if reasons:
                    diag.notes.append(f"{t.name} held: its {reasons[0]}")
            diag.advertised = len(visible)
            diag.tokens = sum(catalogue.schema_tokens(t) for t in visible)
        servers.append(diag)
    shared = {name: sorted(owners) for name, owners in sorted(served_by.items()) if len(owners) > 1}
    return Diagnosis(servers, shared, _builtin_tokens())
