"""`coffer search`: rank the saved catalogue snapshot offline, with the rule agents are held to.

Only tools an agent may see are ranked (`coffer.trust.curation.visible_tools`). A query that asks for a
service the vault lacks ("post to Slack", by the registry cache's names: coffer.discovery.world) gets
what `coffer__search_tools` gives an agent: no tools, and the registry's servers for it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from coffer.errors import NotFoundError, UsageError
from coffer.ranking import RankResult, cached_ranker, docs_from_tools, search_tools
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, paths, registry


@dataclasses.dataclass(frozen=True)
class Lacking:
    """What a query asks for that no tool in the vault serves: its words, and the registry cache's
    servers for them (name, version, about, install)."""

    words: list[str]
    servers: list[dict[str, str]]


def search_snapshot(
    query: str, k: int = 5, mode: str = "hybrid", explain: bool = False, lacking: list[Lacking] | None = None
) -> RankResult:
    """Rank the saved catalogue snapshot's tools an agent may see (`curation.visible_tools`), offline;
    where the query asks for a service the vault lacks, `lacking` (when given) gets it, and the hits
    are what ranked closest.

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
    if lacking is not None and reg.registries:
        found = _lacking(query, tools, list(dict.fromkeys(reg.registries.values())), mode)
        if found is not None:
            lacking.append(found)
    return result


def _lacking(query: str, tools: list[catalogue.CatalogueTool], registries: list[str], mode: str) -> Lacking | None:
    """The service the query asks for that the vault lacks, by the registry cache (never the network)."""
    from coffer.discovery import world

    known = world.words(registries)
    if known is None:
        return None
    ranker = cached_ranker(
        docs_from_tools(tools), mode=mode, cache_dir=paths.cache_dir(), implied_needs=True, english_docs=True
    )
    words = world.asks_elsewhere(query, world.vault_vocabulary(tools, ranker.knows_word), known)
    if not words:
        return None
    from coffer.discovery.rank import suggest

    return Lacking(words, suggest(query, words, registries))


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
