"""`coffer search`: rank the saved catalogue snapshot offline, with the rule agents are held to.

Only tools an agent may see are ranked (`coffer.trust.curation.visible_tools`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from coffer.errors import NotFoundError, UsageError
from coffer.ranking import RankResult, search_tools
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, paths, registry


def search_snapshot(query: str, k: int = 5, mode: str = "hybrid", explain: bool = False) -> RankResult:
    """Rank the saved catalogue snapshot's tools an agent may see (`curation.visible_tools`), offline.

    Raises NotFoundError when no snapshot exists yet, UsageError for an empty query or k < 1.
    """
    if not query.strip():
        raise UsageError("the query is empty")
    if k < 1:
        raise UsageError(f"--top-k must be at least 1, got {k}")
    snapshot = catalogue.load_snapshot()
    if snapshot is None:
        raise NotFoundError(
            "no catalogue snapshot yet: run `coffer refresh` (or start `coffer serve`) to list the servers' tools"
        )
    reg = registry.load()
    with Pins.read() as pins:  # read only, on the standard library's sqlite3: no migration, no sqlite_utils
        tools = curation.visible_tools(reg, snapshot, pins)
        hidden = curation.hidden_tools(reg, snapshot, pins)
    # remember_words: the next `coffer search` with this query's new words needs no tokenizer
    cache = paths.cache_dir()
    result = search_tools(tools, query, k, mode=mode, cache_dir=cache, remember_words=True, explain=explain)
    if hidden:  # how many of the best k over every tool the user could not be shown, and why
        why = {t.name: (t.server, reason, fix) for t, reason, fix in hidden}
        everything = search_tools([*tools, *(t for t, _, _ in hidden)], query, k, mode=mode, cache_dir=cache)
        counts = Counter(why[d.id] for d, _ in everything.hits if d.id in why)
        shown = [{"server": srv, "count": n, "why": why_, "fix": fix} for (srv, why_, fix), n in sorted(counts.items())]
        result = dataclasses.replace(result, hidden=shown)
    return result


def hidden_note(hidden: list[dict[str, object]]) -> str | None:
    """One line for the matches a search could not show: `2 matching tools of time are awaiting
    approval: coffer approve time`; None when there were none."""
    if not hidden:
        return None
    parts = []
    for h in hidden:
        tools = "tool is" if h["count"] == 1 else "tools are"
        parts.append(f"{h['count']} matching {tools} {h['why']} ({h['server']}): `{h['fix']}`")
    return "not shown: " + "; ".join(parts)
