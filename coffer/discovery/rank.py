"""`find`: the registry cache ranked by the vault's own ranker (coffer.ranking), over what each server is
and what its tools do, so "open a pull request" finds a GitHub server though no entry's name says so.

The whole cache is one doc list; its index is saved keyed by the cache's generation (coffer.ranking's
snapshot), so a search over an unchanged cache of 30,000 entries reads arrays back instead of
re-tokenising and re-embedding them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from coffer.discovery import cache
from coffer.ranking.docs import Doc

if TYPE_CHECKING:
    from coffer.ranking import Ranker


@dataclass(frozen=True)
class Hit:
    row: cache.Row
    score: float


def find(query: str, registries: list[str], k: int = 10) -> tuple[list[Hit], int]:
    """The k best cached entries for `query` across `registries`, and how many were searched."""
    from coffer.ranking import Ranker
    from coffer.vault import paths

    key = f"registries-rowid-{cache.generation(registries)}"  # the docs in row id order
    rows = cache.index_rows(registries, texts=not Ranker.is_saved(paths.cache_dir(), key))
    if not rows:
        return [], 0
    docs = [Doc(id=str(rowid), name=short, text=text) for rowid, short, text in rows]
    ranker = Ranker(docs, "hybrid", paths.cache_dir(), docs_key=key, english_docs=True)
    if _knows_nothing_of(ranker, query):
        return [], len(rows)  # not one of its words is in any entry: what meaning alone finds is noise
    result = ranker.search(query, k)
    found = cache.by_rowid([int(doc.id) for doc, _ in result.hits])
    return [Hit(found[int(doc.id)], score) for doc, score in result.hits if int(doc.id) in found], len(rows)


def _knows_nothing_of(ranker: Ranker, query: str) -> bool:
    """Every word of the query that could match (three letters or more) is one no cached entry holds."""
    from coffer.ranking.tokenize import tokenize

    words = {t for t in tokenize(query) if len(t) >= 3}
    unknown = set(ranker.unmatched(query))
    return bool(words) and words <= unknown


def suggest(query: str, unknown: list[str], registries: list[str], k: int = 3) -> list[dict[str, str]]:
    """Registry servers for what the vault knows nothing of: the cached entries that hold one of the
    query's `unknown` words, best first. From the cache only, never the network (the gateway's call
    path); none when nothing was ever cached."""
    from coffer.ranking import Ranker

    rows = cache.matching(unknown, registries)
    if not rows:
        return []
    docs = [Doc(id=str(n), name=r.short, text=r.text) for n, r in enumerate(rows)]
    ranked = Ranker(docs, "hybrid", None, english_docs=True).search(query, min(k, len(docs)))
    out = []
    for doc, _ in ranked.hits:
        row = rows[int(doc.id)]
        about = row.text if len(row.text) <= 160 else row.text[:159] + "…"
        out.append({"name": row.name, "version": row.version, "about": about, "install": f"coffer add {row.name}"})
    return out
