"""`coffer search`: rank the saved catalogue snapshot offline, with the rule agents are held to.

Only tools an agent may see are ranked (`coffer.trust.curation.visible_tools`).
"""

from __future__ import annotations

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
    # remember_words: the next `coffer search` with this query's new words needs no tokenizer
    return search_tools(tools, query, k, mode=mode, cache_dir=paths.cache_dir(), remember_words=True, explain=explain)
