"""Reviewing and approving what changed since approval (a launch config, held tools): the one way
`coffer diff`/`coffer approve` and the console's approve button do it."""

from __future__ import annotations

import contextlib
from typing import Any

from coffer.errors import CofferError, UsageError
from coffer.trust import pinning
from coffer.trust.injection import scan
from coffer.trust.pinning import Pins
from coffer.vault import registry


def approve(target: str, probe: bool = True) -> list[str]:
    """Approve SERVER (its launch config and every held tool) or one held SERVER__TOOL; what was approved
    ("launch config", exposed names), empty when nothing waited. `probe`: an approved launch change
    starts the server once, and the tools it lists are approved with it."""
    server, tool = registry.split_target(target)
    cfg = registry.load().get(server)
    with Pins.open() as pins:
        if tool is not None:
            return [f"{server}__{pins.approve_tool(server, tool).tool}"]
        launch = pins.approve_server(cfg)
        done = [f"{server}__{p.tool}" for p in pins.approve_tools(server)]
    if launch and cfg.enabled and probe:
        # The tools a changed launch produces are part of what was approved: list them now, as `coffer add`
        # does, so neither a second approve nor a snapshot of the old launch's tools follows.
        from coffer.manage.refresh import probe_and_record  # starts a server: only when a launch changed

        with contextlib.suppress(CofferError):  # it cannot start now: held when it first lists, as any
            probe_and_record(cfg)
        with Pins.open() as pins:
            done += [f"{server}__{p.tool}" for p in pins.approve_tools(server) if f"{server}__{p.tool}" not in done]
    return (["launch config"] if launch else []) + done


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
