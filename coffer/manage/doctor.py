"""`coffer doctor`: start every enabled, approved server once (`coffer.manage.probe`) and report what
each serves, what it costs in tokens and what is wrong with it; writes nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from coffer.errors import RegistryError
from coffer.manage.probe import Progress, probe_servers, summary
from coffer.manage.refresh import NOT_APPROVED
from coffer.results.tokens import tool_tokens
from coffer.trust import curation
from coffer.vault import catalogue, registry
from coffer.vault.registry import SEP, ServerConfig

if TYPE_CHECKING:
    from coffer.trust.pinning import Pins

TOP_N = 5


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
    sandbox: str | None = None  # a stdio server: "confined", "off" or "UNCONFINED" (coffer.upstreams.sandbox)


@dataclass
class Diagnosis:
    servers: list[ServerDiagnosis]
    shared_names: dict[str, list[str]]
    builtin_tokens: int
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)  # tokens each profile advertises
    confinement: dict[str, Any] = field(default_factory=dict)  # what this OS offers (`confinement()`)
    registry_cache: dict[str, Any] = field(default_factory=dict)  # its age (`discover.cache_report()`)

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
            "confinement": self.confinement,
            "registry_cache": self.registry_cache,
        }


def confinement() -> dict[str, Any]:
    """What this machine offers for confining servers: bubblewrap, user namespaces, Landlock."""
    from coffer.upstreams import sandbox

    found = sandbox.support()
    return {
        "available": found.available,
        "mechanism": found.mechanism,
        "describe": found.describe(),
        "bwrap": found.bwrap,
        "user_namespaces": found.user_namespaces,
        "landlock_abi": found.landlock_abi,
        "problem": found.problem,
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


def _builtin_tokens(settings: dict[str, Any]) -> int:
    """The `coffer__*` built-ins are advertised beside the upstream tools, so they count too."""
    from coffer.codemode import policy
    from coffer.gateway.builtins import tool_definitions

    return sum(tool_tokens(tool_definitions(policy.enabled(settings))))


def _sandbox(cfg: ServerConfig) -> tuple[str, str]:
    from coffer.upstreams import sandbox

    policy = sandbox.policy_for(cfg)
    if policy.off:
        return "off", 'runs unconfined (sandbox = "off")'
    found = sandbox.support()
    if not found.available:
        return "UNCONFINED", f"runs UNCONFINED: {found.unconfined_why}"
    return "confined", f"{found.describe().split(' (')[0]}: {policy.describe()}"


def diagnose(limit: int | None = None, on_done: Progress | None = None, only: list[str] | None = None) -> Diagnosis:
    """Start every enabled, approved server (or those named in `only`) once and report; writes nothing."""
    from coffer.trust.pinning import Pins

    reg = registry.load()
    try:
        snapshot = catalogue.load_snapshot()
    except RegistryError:
        snapshot = None
    enabled = [c for c in reg.enabled_servers() if not only or c.name in only]
    if only:
        reg = dataclasses.replace(reg, servers={n: c for n, c in reg.servers.items() if n in only})
    with Pins.open(new_tools="allow") as pins:  # read only: doctor observes nothing
        report = _diagnose(reg, pins, snapshot, enabled, limit, on_done)
    report.confinement = confinement()
    from coffer.manage.discover import cache_report

    report.registry_cache = cache_report()
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
        if cfg.transport == "stdio":
            diag.sandbox, note = _sandbox(cfg)
            diag.notes.append(note)
        if cfg.oauth:
            from coffer.trust import oauth_store

            diag.auth = oauth_store.state(cfg.name, url=cfg.url)
            if diag.auth != "authorised":
                diag.notes.append(f"OAuth: {diag.auth} (`coffer auth {cfg.name}`)")
        entry = snapshot.servers.get(cfg.name) if snapshot is not None else None
        if cfg.enabled and (entry is None or entry.error):
            why = f": {entry.error}" if entry is not None and entry.error else ""
            diag.missing_from_first_list = True
            if diag.status == "ok":  # it lists now: what the catalogue holds is an earlier run's failure
                earlier = f" (an earlier run's failure{why})" if why else ""
                diag.notes.append(
                    f"listed now, but not yet in the catalogue{earlier}: `coffer refresh {cfg.name}` records "
                    "this listing for `coffer list`, curation and the first tools/list of `coffer serve`"
                )
            else:
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
            diag.tokens = sum(tool_tokens([t.wire for t in visible]))
        servers.append(diag)
    shared = {name: sorted(owners) for name, owners in sorted(served_by.items()) if len(owners) > 1}
    return Diagnosis(servers, shared, _builtin_tokens(reg.settings))
