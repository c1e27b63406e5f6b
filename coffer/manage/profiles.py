"""What each profile advertises now, from the catalogue snapshot and the invocation log (the same
selection `coffer serve --profile` makes at start), for `coffer profile list/show` and `coffer doctor`."""

from __future__ import annotations

from typing import Any

from coffer.gateway import builtins, profiles
from coffer.log.calls import call_counts
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, registry


def preview(name: str | None, reg: registry.Registry | None = None) -> dict[str, Any]:
    """The profile (None: no profile) with the tool names it advertises now and their token cost."""
    reg = reg or registry.load()
    profile = reg.profile(name) if name is not None else None
    with Pins.read() as pins:
        tools = curation.visible_tools(reg, catalogue.load_snapshot(), pins)
    defs = builtins.tool_definitions()
    shown = None
    if profile is not None:
        shown = profiles.select(profile, tools, len(defs), call_counts(), list(reg.servers))
    listed = profiles.tools_result(
        defs, builtins.call_tool_definition(), tools, shown, profile.max_tools if profile else None
    )
    row: dict[str, Any] = profile.to_dict() if profile else {"name": None, "mode": "all", "max_tools": None}
    return row | {
        "advertised": len(listed),
        "tokens": profiles.tokens(listed),
        "hides": bool(shown and shown.hides),
        "advertised_tools": [t["name"] for t in listed],
    }


def preview_all() -> list[dict[str, Any]]:
    reg = registry.load()
    return [{k: v for k, v in preview(n, reg).items() if k != "advertised_tools"} for n in reg.profiles]
