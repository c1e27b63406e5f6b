"""`coffer search`: rank the saved catalogue snapshot offline, with the rule agents are held to.

Only tools an agent may see are ranked (`coffer.trust.curation.visible_tools`). A query that asks for a
service the vault lacks ("post to Slack", by the registry cache's names: coffer.discovery.world) gets
what `coffer__search_tools` gives an agent: no tools, and the registry's servers for it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from coffer.discovery import world
from coffer.errors import NotFoundError, UsageError
from coffer.ranking import Ranker, RankResult, cached_ranker, docs_from_tools, search_tools
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, paths, registry


@dataclasses.dataclass(frozen=True)
class Lacking:
    """What a query holds that no tool in the vault knows: its words, and the registry cache's servers
    for them (name, version, about, install). `abstains`: the words ask for a service the vault lacks,
    so no tool is the answer (coffer.discovery.world); else they are words no tool holds ("weather"),
    and the tools still stand, with the registry's servers beside them, as `coffer__search_tools` gives."""

    words: list[str]
    servers: list[dict[str, str]]
    abstains: bool = True

    def fields(self, found: list[dict[str, Any]]) -> dict[str, Any]:
        """What a search answer with these tools (`found`, best first) says of it, as the agent's
        `coffer__search_tools` answer does: no tools, `lacking`, `closest` and `registry`; or `unknown`
        and `registry` beside the tools."""
        if self.abstains:
            return {"tools": [], "lacking": self.words, "closest": found[:3], "registry": self.servers}
        return {"unknown": self.words, "registry": self.servers}


def search_or_lacking(
    query: str, k: int = 5, mode: str = "hybrid", explain: bool = False
) -> tuple[RankResult, Lacking | None]:
    """Rank the saved catalogue snapshot's tools an agent may see (`curation.visible_tools`), offline,
    and say what the query holds that no tool knows, by the registry cache (never the network): a
    service the vault lacks (then the hits are what ranked closest), or words the registry's servers
    know and no tool here does; None without either (without a cached registry, only a brand the
    shipped list names can be lacking).

    Raises NotFoundError when no snapshot exists yet, UsageError for an empty query or k < 1."""
    result, tools, reg = _ranked(query, k, mode, explain)
    registries = list(dict.fromkeys(reg.registries.values()))
    elsewhere, named = world.lacking(query, tools, _ranker(tools, mode).knows_word, registries)
    words = elsewhere or named
    if not words:
        return result, None
    abstains = bool(elsewhere)
    from coffer.discovery.rank import suggest

    servers = suggest(query, words, registries)
    if not abstains and not servers:
        return result, None
    return result, Lacking(words, servers, abstains)


def _ranker(tools: list[catalogue.CatalogueTool], mode: str) -> Ranker:
    """The ranker `search_tools` built for these tools (kept: coffer.ranking.reuse)."""
    docs = docs_from_tools(tools)
    return cached_ranker(docs, mode=mode, cache_dir=paths.cache_dir(), implied_needs=True, english_docs=True)


def _ranked(
    query: str, k: int, mode: str, explain: bool
) -> tuple[RankResult, list[catalogue.CatalogueTool], registry.Registry]:
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
    return result, tools, reg


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
