"""`find`: the registry cache ranked by the vault's own ranker (coffer.ranking), over what each server is
and what its tools do, so "open a pull request" finds a GitHub server though no entry's name says so.

The whole cache is one doc list; its index is saved keyed by the cache's generation (coffer.ranking's
snapshot), so a search over an unchanged cache of 30,000 entries reads arrays back instead of
re-tokenising and re-embedding them.
"""

from __future__ import annotations

from dataclasses import dataclass

from coffer.discovery import cache
from coffer.ranking.docs import Doc


@dataclass(frozen=True)
class Hit:
    row: cache.Row
    score: float


def find(query: str, registries: list[str], k: int = 10) -> tuple[list[Hit], int]:
    """The k best cached entries for `query` across `registries`, and how many were searched."""
    from coffer.ranking import Ranker
    from coffer.vault import paths

    rows, generation = cache.rows(registries)
    if not rows:
        return [], 0
    docs = [Doc(id=str(n), name=r.short, text=r.text) for n, r in enumerate(rows)]
    ranker = Ranker(docs, "hybrid", paths.cache_dir(), docs_key=f"registries-{generation}", english_docs=True)
    result = ranker.search(query, k)
    return [Hit(rows[int(doc.id)], score) for doc, score in result.hits], len(rows)
