"""`coffer refresh`, and `coffer add`'s and `coffer import`'s first start: probe, then record.

Recording a listing (`record_listing`) writes the catalogue snapshot entry, `Pins.observe` (so a
changed tool is held and `coffer diff` shows it at once) and re-indexes the server's text resources
for `coffer__ask`; a server that failed keeps its last good entry and index. None starts a server
whose launch config the user has not approved, the same rule `coffer serve` follows.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coffer.manage.probe import Probe, Progress, probe_configs, probe_servers, summary
from coffer.vault import catalogue, registry
from coffer.vault.registry import ServerConfig

if TYPE_CHECKING:
    from coffer.trust.pinning import Pins

NOT_APPROVED = "launch config not approved: check it with `coffer diff {0}`, then `coffer approve {0}`"


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


def targets(names: list[str] | None = None) -> list[ServerConfig]:
    """The named servers (even disabled ones: the user asked), else every enabled one. NotFoundError if unknown."""
    reg = registry.load()
    return [reg.get(n) for n in dict.fromkeys(names)] if names else reg.enabled_servers()


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
    told: Collection[str] = (),
) -> tuple[set[str], int | None]:
    """Record what `name` served: snapshot entry, pins (changed tools held), knowledge index.

    Returns (exposed names held now, resources indexed or None when `resources` is None).
    """
    from coffer.memory import knowledge as memory

    meta = None if capabilities is None else {"told": sorted(told), "capabilities": capabilities}
    catalogue.save_server(name, listing, meta=meta)
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
            failed = UpstreamError(error if error.startswith(f"{cfg.name}:") else f"{cfg.name}: {error}")
            failed.stderr_tail = list(probe.stderr_tail)  # type: ignore[attr-defined]
            raise failed
        record_listing(
            pins, cfg.name, probe.listing, probe.resources, cfg.exposed_prefix, probe.capabilities, probe.told
        )
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
            held, indexed = record_listing(
                pins, probe.name, probe.listing, probe.resources, prefix, probe.capabilities, probe.told
            )
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
