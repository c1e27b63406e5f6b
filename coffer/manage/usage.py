"""Usage you can act on: which listed tools are called, how often, how well, and which never are; and a
profile pruned of the tools nobody used (`coffer log stats`, `coffer profile prune`, the console).

The log knows calls by server and tool; the catalogue knows what is listed. "Never called" is every
tool an agent may see now (curation and trust applied) with no call in the window.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from coffer.errors import NotFoundError, UsageError
from coffer.gateway.advertise import matches  # the profile's own filter, as `coffer serve` applies it
from coffer.log import query as log
from coffer.log.calls import open_log
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, paths, registry
from coffer.vault.profiles import Profile


def usage(filters: log.Filters | None = None, db: Any = None) -> dict[str, Any]:
    """`stats` (per tool: calls, errors, p50/p95, last used) and `never_called` (listed tools with no call
    matching `filters`; its server and tool filters narrow it too). `db`: the log, when already open."""
    filters = filters or log.Filters()
    rows = log.stats(db, filters) if db is not None else _stats(filters)
    called = {(r["server"], r["tool"]) for r in rows}
    never = [
        {"name": t.name, "server": t.server, "tool": t.tool}
        for t in _visible(registry.load())
        if (t.server, t.tool) not in called
        and (filters.server is None or t.server == filters.server)
        and (filters.tool is None or filters.tool in (t.tool, t.name))
    ]
    return {"stats": rows, "never_called": never}


def _stats(filters: log.Filters) -> list[dict[str, Any]]:
    db = open_log()
    try:
        return log.stats(db, filters)
    finally:
        db.conn.close()


def _visible(reg: registry.Registry) -> list[catalogue.CatalogueTool]:
    with Pins.read() as pins:
        return curation.visible_tools(reg, catalogue.load_snapshot(), pins)


@dataclass(frozen=True)
class Pruned:
    profile: Profile
    kept: list[str]  # exposed names the pruned profile lists
    left_out: list[str]  # exposed names it no longer shows (reachable through coffer__call_tool)
    created: bool  # there was no such profile before


def _undo_path(name: str) -> Any:
    return paths.ensure_private_dir(paths.data_dir() / "profile-undo") / f"{name}.json"


def prune(name: str, unused_for_s: float, now: float | None = None) -> Pruned:
    """Write profile `name` without the tools it shows that had no call in the last `unused_for_s`
    seconds (a new profile from every visible tool when there is none); `undo` puts back what was there."""
    if unused_for_s <= 0:
        raise UsageError("--unused-for must be a positive duration, e.g. 30d")
    reg = registry.load()
    before = reg.profiles.get(name)
    since = (time.time() if now is None else now) - unused_for_s
    used = {(r["server"], r["tool"]) for r in _stats(log.Filters(since=since))}
    base = before or Profile(name=name)
    shown = [t for t in _visible(reg) if matches(base, t)]
    kept = [t.name for t in shown if (t.server, t.tool) in used]
    left_out = [t.name for t in shown if (t.server, t.tool) not in used]
    if not kept:
        raise UsageError(f"no tool profile '{name}' shows was called in that time: pruning would leave nothing")
    profile = Profile(name, base.mode, base.max_tools, list(base.servers), sorted(kept), list(base.pinned))
    undo = _undo_path(name)
    fd = os.open(undo, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"before": before.to_dict() if before else None}, fh)
    registry.add_profile(profile, replace=True)
    return Pruned(profile, sorted(kept), sorted(left_out), before is None)


def undo(name: str) -> Profile | None:
    """Put profile `name` back as it was before its last prune (None: it did not exist, so it is removed)."""
    path = _undo_path(name)
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))["before"]
    except FileNotFoundError:
        raise NotFoundError(f"profile '{name}' has no prune to undo") from None
    if saved is None:
        registry.remove_profile(name)
        restored = None
    else:
        restored = Profile(**saved)
        registry.add_profile(restored, replace=True)
    path.unlink()
    return restored
