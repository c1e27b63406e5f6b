"""Reviewing and approving what changed since approval (a launch config, held tools): the one way
`coffer diff`/`coffer approve` and the console's approve button do it."""

from __future__ import annotations

from typing import Any

from coffer.errors import UsageError
from coffer.trust import pinning
from coffer.trust.injection import scan
from coffer.trust.pinning import Pins
from coffer.vault import registry


def approve(target: str) -> list[str]:
    """Approve SERVER (its launch config and every held tool) or one held SERVER__TOOL; what was approved
    ("launch config", exposed names), empty when nothing waited."""
    server, tool = registry.split_target(target)
    cfg = registry.load().get(server)
    with Pins.open() as pins:
        if tool is not None:
            return [f"{server}__{pins.approve_tool(server, tool).tool}"]
        done = ["launch config"] if pins.approve_server(cfg) else []
        return done + [f"{server}__{p.tool}" for p in pins.approve_tools(server)]


def review(server: str, events: int = 20) -> dict[str, Any]:
    """What waits for approval on `server`: the launch config (state, approved vs current, a unified
    diff), each held tool (its diff and what the injection scan found) and the last trust events."""
    if registry.SEP in server:
        raise UsageError("give a server name; `coffer diff` shows every held tool of it")
    cfg = registry.load().get(server)
    with Pins.open() as pins:
        state = pins.server_state(cfg)
        old_cfg, new_cfg = pins.config_change(cfg)
        held = pins.held(server)
        recent = pins.events(server, limit=events)
    config_diff = pinning.unified(
        pinning.pretty(old_cfg) if old_cfg else "", pinning.pretty(new_cfg), f"{server} launch config", "registry now"
    )
    tools = [
        {
            "tool": p.tool,
            "name": p.exposed,
            "state": p.state,
            "approved": p.old,
            "served": p.new,
            "diff": p.diff(),
            "injection": scan(p.new or {}, server),
        }
        for p in held
    ]
    config = {"state": state, "approved": old_cfg, "current": new_cfg, "diff": config_diff}
    return {"server": server, "config": config, "tools": tools, "events": recent}
