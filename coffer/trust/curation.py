"""The one rule for what an agent sees and may call: registry curation plus trust.

Asked by the gateway (tools/list, coffer__search_tools and every call), `coffer search` and `coffer
doctor`, so the same rule decides what is listed, searchable and callable everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from coffer.trust.pinning import Pins
from coffer.vault.catalogue import CatalogueTool, Snapshot, server_tools
from coffer.vault.registry import Registry, ServerConfig


def refusal(
    registry: Registry, pins: Pins | None, server: str, tool: str | None = None, exposed: str | None = None
) -> str | None:
    """Why `server` (or one of its tools) may not be shown to an agent or called; None when it may.

    The one rule for what an agent sees, asked by the gateway (tools/list, coffer__search_tools and
    every call), `coffer search` and `coffer doctor`: the server is in the vault and enabled, the tool
    is not disabled, the launch config is approved and the tool is not held (coffer.trust.pinning). `pins`
    is None only while the gateway has no trust store open; then trust is not checked.
    """
    cfg = registry.servers.get(server)
    if cfg is None:
        return f"server '{server}' is not in the vault"
    if not cfg.enabled:
        return f"server '{server}' is disabled (`coffer enable {server}`)"
    if tool is not None and (tool in cfg.disabled_tools or (exposed or "") in cfg.disabled_tools):
        name = exposed or tool
        return f"tool '{name}' is disabled (`coffer enable {name}`)"
    return None if pins is None else pins.refusal(cfg, tool, exposed)  # unapproved or held


def curate(registry: Registry, pins: Pins | None, server: str, tools: Iterable[CatalogueTool]) -> list[CatalogueTool]:
    """The ones of `server`'s tools an agent may see (`refusal` allows them), sorted by exposed name."""
    if refusal(registry, pins, server) is not None:
        return []
    return sorted((t for t in tools if refusal(registry, pins, server, t.tool, t.name) is None), key=lambda t: t.name)


def visible_servers(registry: Registry, pins: Pins | None) -> list[str]:
    """Servers whose tools and knowledge an agent may see: enabled and launch-approved."""
    return [cfg.name for cfg in registry.enabled_servers() if refusal(registry, pins, cfg.name) is None]


def visible_tools(registry: Registry, snapshot: Snapshot | None, pins: Pins | None) -> list[CatalogueTool]:
    """The snapshot's tools an agent may see (see `refusal`), sorted by exposed name (deterministic order)."""
    out: list[CatalogueTool] = []
    for cfg in registry.enabled_servers():
        out.extend(curate(registry, pins, cfg.name, server_tools(snapshot, cfg.name, cfg.exposed_prefix)))
    out.sort(key=lambda t: t.name)
    return out


def hidden_tools(registry: Registry, snapshot: Snapshot | None, pins: Pins) -> list[tuple[CatalogueTool, str, str]]:
    """The snapshot's tools an agent may not see, each with why in a few words and what shows it:
    (tool, "disabled" | "awaiting approval", "coffer enable X" | "coffer approve X"). Searches say how
    many of their matches these are, never the tools themselves."""
    out: list[tuple[CatalogueTool, str, str]] = []
    for name, cfg in registry.servers.items():
        tools = server_tools(snapshot, name, cfg.exposed_prefix)
        if not tools:
            continue
        server_why = refusal(registry, pins, name)
        for t in tools:
            if server_why is None and refusal(registry, pins, name, t.tool, t.name) is None:
                continue
            out.append((t, *withheld_because(cfg, t)))
    return out


def withheld_because(cfg: ServerConfig, t: CatalogueTool) -> tuple[str, str]:
    """Why a tool agents may not see is withheld, in a few words, and the command that shows it."""
    if not cfg.enabled:
        return "disabled", f"coffer enable {cfg.name}"
    if t.tool in cfg.disabled_tools or t.name in cfg.disabled_tools:
        return "disabled", f"coffer enable {t.name}"
    return "awaiting approval", f"coffer approve {cfg.name}"  # its launch config or the tool waits for review
