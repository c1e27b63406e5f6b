"""What each profile advertises now, from the catalogue snapshot and the invocation log (the same
selection `coffer serve --profile` makes at start), for `coffer profile list/show` and `coffer doctor`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from coffer.codemode import policy
from coffer.gateway import advertise, builtins
from coffer.log.query import call_counts
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, registry


def preview(name: str | None, reg: registry.Registry | None = None) -> dict[str, Any]:
    """The profile (None: no profile) with the tool names it advertises now and their token cost."""
    return previews([name], reg)[0]


def previews(names: list[str | None], reg: registry.Registry | None = None) -> list[dict[str, Any]]:
    """`preview` of each profile in `names`, reading the catalogue, the trust store and the log once."""
    reg = reg or registry.load()
    chosen = [reg.profile(name) if name is not None else None for name in names]
    with Pins.read() as pins:
        tools = curation.visible_tools(reg, catalogue.load_snapshot(), pins)
    counts = call_counts() if any(p is not None for p in chosen) else {}
    rows = []
    for profile in chosen:
        shown = None
        defs = builtins.tool_definitions(policy.enabled(reg.settings, profile))
        if profile is not None:
            shown = advertise.select(profile, tools, len(defs), counts, list(reg.servers))
        listed = advertise.tools_result(
            defs, builtins.call_tool_definition(), tools, shown, profile.max_tools if profile else None
        )
        row: dict[str, Any] = profile.to_dict() if profile else {"name": None, "mode": "all", "max_tools": None}
        rows.append(
            row
            | {
                "advertised": len(listed),
                "tokens": advertise.tokens(listed),
                "hides": bool(shown and shown.hides),
                "advertised_tools": [t["name"] for t in listed],
            }
        )
    return rows


def preview_all() -> list[dict[str, Any]]:
    reg = registry.load()
    return [{k: v for k, v in row.items() if k != "advertised_tools"} for row in previews(list(reg.profiles), reg)]


def clients_by_profile() -> dict[str, list[str]]:
    """Which clients run `coffer serve` on this vault from their user file (and Claude Code's local
    scopes), keyed by the `--profile` each passes ("" for none): what the console's profiles page says
    each client sees. An entry for another vault (its COFFER_HOME), or a client file that is missing or
    cannot be read, counts as no client."""
    from coffer.clients import common, importer, known
    from coffer.errors import CofferError

    out: dict[str, list[str]] = {}
    for client in known.CLIENTS.values():
        try:
            sources = [s for s in client.sources(scope=None, cwd=None) if s.scope in ("user", "local")]
        except CofferError:
            continue  # no usual file (the generic JSON client)
        for source in sources:
            try:
                entries = importer.entries_of(client, source)
            except CofferError:
                continue
            for _name, raw in entries:
                launch = common.launch_of(raw)
                if launch is None or not common.is_coffer_serve(*launch[:2]) or not _this_vault(launch[2]):
                    continue
                args = launch[1]
                profile = args[args.index("--profile") + 1] if "--profile" in args[:-1] else ""
                where = client.label if source.scope == "user" else f"{client.label} ({source.project})"
                out.setdefault(profile, []).append(where)
    return out


def _this_vault(env: dict[str, str]) -> bool:
    mine, theirs = os.environ.get("COFFER_HOME"), env.get("COFFER_HOME")
    if not mine or not theirs:
        return not mine and not theirs
    return Path(mine).expanduser().resolve() == Path(theirs).expanduser().resolve()
