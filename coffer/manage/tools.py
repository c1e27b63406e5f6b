"""Turning servers and tools on and off, and the tool table: the one way `coffer enable/disable` and the
console do it, so both check the same names and write the registry the same way (under its lock)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coffer.errors import NotFoundError, did_you_mean
from coffer.manage.states import server_states
from coffer.results.tokens import tool_tokens
from coffer.vault import catalogue, registry


@dataclass(frozen=True)
class Toggled:
    target: str
    enabled: bool
    changed: bool  # False: it already was


def toggle(target: str, enabled: bool, force: bool = False) -> Toggled:
    """Enable or disable SERVER or SERVER__TOOL. A tool must be in the catalogue unless `force` (a server
    not listed yet); raises NotFoundError for an unknown server or tool."""
    return toggle_all([target], enabled, force)[0]


def toggle_all(targets: list[str], enabled: bool, force: bool = False) -> list[Toggled]:
    """`toggle` for several targets, all or nothing: every one is checked before any is written."""
    reg = registry.load()
    snap = catalogue.load_snapshot() if any(registry.split_target(t)[1] is not None for t in targets) else None
    checked = [(target, *_checked(reg, snap, target, force)) for target in targets]
    return [Toggled(t, enabled, registry.set_enabled(server, tool, enabled)) for t, server, tool in checked]


def _checked(
    reg: registry.Registry, snap: catalogue.Snapshot | None, target: str, force: bool
) -> tuple[str, str | None]:
    """(server, the tool's own name) of a target that exists; NotFoundError otherwise."""
    server, tool = registry.split_target(target)
    reg.get(server)
    if tool is not None:
        tools = catalogue.server_tools(snap, server, reg.servers[server].exposed_prefix)
        found = catalogue.find_tool(snap, server, tool, reg.servers[server].exposed_prefix)
        if found is not None:
            tool = found.tool
        elif not force:
            entry = snap.servers.get(server) if snap is not None else None
            if entry is None or entry.error:  # never listed: nothing to check the name against
                why = f"its last start failed: {entry.error}" if entry is not None else "it was never started"
                raise NotFoundError(
                    f"'{server}' never listed its tools ({why}), so tool '{tool}' cannot be checked: "
                    f"`coffer doctor {server}` shows why, `coffer refresh {server}` lists it; or pass --force"
                )
            near = did_you_mean(tool, [t.tool for t in tools])
            raise NotFoundError(f"unknown tool '{tool}' on server '{server}'{near} (see `coffer show {server}`)")
    return server, tool


def tool_rows(reg: registry.Registry | None = None) -> list[dict[str, Any]]:
    """Every catalogued tool of every server: its exposed name, whether it is enabled (it and its
    server), held for review, and what advertising it costs in tokens; by server, then name."""
    reg = reg or registry.load()
    snap = catalogue.load_snapshot()
    states = server_states(reg, snap)
    rows: list[dict[str, Any]] = []
    for name, cfg in sorted(reg.servers.items()):
        off, held = set(cfg.disabled_tools), set(states[name]["held"])
        tools = catalogue.server_tools(snap, name, cfg.exposed_prefix)
        for t, cost in zip(tools, tool_tokens([t.wire for t in tools]), strict=True):
            rows.append(
                {
                    "name": t.name,
                    "server": name,
                    "tool": t.tool,
                    "enabled": t.tool not in off,
                    "server_enabled": cfg.enabled,
                    "held": t.name in held or t.tool in held,
                    "tokens": cost,
                    "description": t.description,
                }
            )
    return rows


def code_mode_on() -> bool:
    """Whether coffer__run is on for clients without a profile that says otherwise."""
    from coffer.codemode import policy

    return policy.enabled(registry.load().settings)


def set_code_mode(on: bool) -> bool:
    """Turn coffer__run on or off (`[settings] code_mode`); False when it already was so."""
    with registry.edit() as doc:
        settings: Any = doc.setdefault("settings", {})
        changed = settings.get("code_mode", False) is not on
        settings["code_mode"] = on
        return bool(changed)


def set_script_tools(server: str, allow: str | list[str]) -> bool:
    """What a coffer__run script may call of `server`: "read" (its read-only tools), "all", or tool names
    besides the read-only ones; False when it already was so."""
    with registry.edit() as doc:
        table: Any = doc.get("servers", {}).get(server)
        if table is None:
            raise registry.unknown_server(server, doc.get("servers", {}))
        changed = table.get("code_mode", "read") != allow
        if allow == "read":
            table.pop("code_mode", None)
        else:
            table["code_mode"] = allow
        return bool(changed)
