"""`find`: the registry cache ranked by the vault's own ranker (coffer.ranking), over what each server is
and what its tools do, so "open a pull request" finds a GitHub server though no entry's name says so.

The whole cache is one doc list; its index is saved keyed by the cache's generation (coffer.ranking's
snapshot), so a search over an unchanged cache of 30,000 entries reads arrays back instead of
re-tokenising and re-embedding them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from coffer.discovery import cache
from coffer.discovery.entries import Entry, as_dict, first_party, publisher
from coffer.ranking.docs import Doc
from coffer.ranking.tokenize import tokenize

if TYPE_CHECKING:
    from coffer.ranking import Ranker


# What the registry says of a server beyond its words, as factors on its score (names why each is there)
NAMED_OWN = 1.3  # the product the query names, published by its maker (`com.stripe/mcp` for "stripe")
OWN = 1.1  # a maker's own server for its product, though the query does not name the maker
DEPRECATED = 0.5  # its publisher says to move off it
NOT_RUNNABLE = 0.85  # it lists ways to run it, none of which Coffer can use here (sse only, nuget, mcpb)
POOL = 60  # how many of the ranker's best are weighed, folded and cut down to k
GOOD, PARTIAL = 0.6, 0.3  # the share of the query's words (by idf) a server must hold to fit, or fit in part
CLOSE = 0.75  # a score this near the best one's is a fit in part, whatever words it holds
UNKNOWN = 0.5  # a query whose weight is mostly in words no server holds asks for what is not there
RUNNABLE = ("npm", "pypi", "oci", "remote:streamable-http")


@dataclass(frozen=True)
class Hit:
    entry: Entry
    score: float
    fit: str  # good | partial | loose (meaning only: shown where nothing holds the query's words)
    also: tuple[str, ...] = ()  # near-duplicates folded into this one (the same code or the same words)
    own: bool = False  # its maker's own server for what was asked (`makers_own`)


def find(query: str, registries: list[str], k: int = 10) -> tuple[list[Hit], int]:
    """The k best cached entries for `query` across `registries` that fit it, and how many were searched.

    The vault's ranker finds candidates by words and meaning; they are then weighed by what the registry
    says of each (who publishes it, whether it is kept up, whether it runs here), near-duplicates are
    folded, and what holds too little of the query is cut: none at all when nothing fits."""

    ranker = index(registries)
    if ranker is None:
        return [], 0
    searched = ranker.total
    if _knows_nothing_of(ranker, query):
        return [], searched  # not one of its words is in any entry: what meaning alone finds is noise
    scored = {int(doc.id): score for doc, score in ranker.search(query, max(POOL, 3 * k)).hits}
    implied = implied_makers(query) - _words(query)  # "a Jira ticket": Atlassian's, though it says no "atlassian"
    named = _words(query) | implied
    makers = [i for i, name in cache.published_by(sorted(named), registries) if i not in scored and first_party(name)]
    at = {i: n for i in makers if (n := ranker.position(str(i))) is not None}  # the maker's own, wherever it ranks
    scored.update(zip(at, ranker.scores_of(query, list(at.values())), strict=True))
    if not scored:
        return [], searched
    ids = list(scored)
    covered = ranker.coverage(query, [n for i in ids if (n := ranker.position(str(i))) is not None])
    if _absent_share(covered.unknown_share, reach(ranker)) >= UNKNOWN:
        return [], searched  # the query is mostly words no server holds: what it asks for is not here
    best = max(scored.values())
    close = [scored[i] >= CLOSE * best for i in ids]
    fits = dict(zip(ids, map(_fit_word, covered.shares, covered.key_held, close), strict=True))
    found = cache.entries_at(ids)
    for i in _best_of(implied, found, scored):  # what the product's maker publishes holds the product by name
        fits[i] = _fit_word(1.0 if fits[i] == "good" else 0.0, True, False)
    weighed = [(found[i], score * _standing(found[i], named), fits[i]) for i, score in scored.items() if i in found]
    weighed.sort(key=lambda w: (not (_names_maker(w[0], named) and w[2] != "loose"), -w[1]))
    folded = _fold(weighed)
    fitting = [hit for hit in folded if hit[2] != "loose"]
    if not fitting and not ranker.unmatched(query):
        fitting = folded  # every word is known, none held together: meaning alone, marked loose
    hits = [Hit(e, round(s, 4), fit, also, makers_own(e, named)) for e, s, fit, also in fitting[:k]]
    return hits, searched


def index(registries: list[str]) -> Ranker | None:
    """The ranker over every cached entry of `registries` (None when none is cached): read back from its
    snapshot when the cache has not changed since it was built (no entry is read: a warm `find`), else
    built and saved, which a refresh does at once so that the first `find` after it is warm too."""
    from coffer.ranking import Ranker
    from coffer.vault import paths

    key = index_key(registries)
    ranker = Ranker.saved(paths.cache_dir(), key, english_docs=True, acting=False)
    if ranker is not None:
        return ranker
    rows = cache.index_rows(registries)
    if not rows:
        return None
    # the publisher's name is a word of its servers: Cloudinary's `io.github.cloudinary/asset-management-mcp`
    # says "cloudinary" nowhere else, and would be found for no ask that names Cloudinary
    docs = [Doc(id=str(rowid), name=short, text=f"{text} {publisher(name)}") for rowid, name, short, text in rows]
    return Ranker(docs, "hybrid", paths.cache_dir(), docs_key=key, english_docs=True, acting=False)


def derive(registries: list[str]) -> None:
    """Everything built from the cache, built at a read so that no later call waits on it: the ranker's
    index (`find`) and the registry's words (`coffer__search_tools`' abstention, coffer.discovery.world)."""
    from coffer.discovery import world

    index(registries)
    world.words(registries)


def index_key(registries: list[str]) -> str:
    """What the saved index of these registries' cache is keyed by: it changes when any entry does."""
    return f"registries-rowid-v2-{cache.generation(registries)}"  # the docs in row id order; v2: publishers


def _names_maker(entry: Entry, named: set[str]) -> bool:
    """The query names the maker of `entry`, and `entry` is that maker's own server: what the user asked
    for by name ("in GitLab": GitLab's server), ahead of third parties' servers for it."""
    return publisher(entry.name) in named and first_party(entry.name)


def makers_own(entry: Entry, named: set[str]) -> bool:
    """`entry` is its maker's own server for what the query asks: named for its publisher, and not
    matched by the name of something else (Smithery's `smithery-ai-slack` is a third party's server
    for "post to slack", however first-party its name)."""
    if not first_party(entry.name):
        return False
    owner = publisher(entry.name)
    held = set(_words(entry.name.rsplit("/", 1)[-1].replace("-", " ").replace("_", " "))) & named
    return not held or owner in named


def _standing(entry: Entry, named: set[str]) -> float:
    """The factor what the registry says of `entry` puts on its score."""
    factor = 1.0
    if makers_own(entry, named):
        factor *= NAMED_OWN if _names_maker(entry, named) else OWN
    if entry.status == "deprecated":
        factor *= DEPRECATED
    if entry.kinds and not any(kind in RUNNABLE for kind in entry.kinds):
        factor *= NOT_RUNNABLE
    return factor


def _fold(weighed: list[tuple[Entry, float, str]]) -> list[tuple[Entry, float, str, tuple[str, ...]]]:
    """Near-duplicates under the best of them: the same repository (and folder), or the same short name
    and description (one server republished under several names)."""
    out: list[tuple[Entry, float, str, list[str]]] = []
    seen: dict[str, int] = {}
    for entry, score, fit in weighed:
        keys = [f"words:{entry.short}:{' '.join(entry.description.lower().split())}"]
        if entry.repository:
            folder = str(as_dict(entry.server.get("repository")).get("subfolder") or "")
            keys.append(f"repo:{entry.repository.lower().removesuffix('.git').rstrip('/')}/{folder}")
        at = next((seen[key] for key in keys if key in seen), None)
        if at is not None:
            out[at][3].append(entry.name)
            continue
        for key in keys:
            seen[key] = len(out)
        out.append((entry, score, fit, []))
    return [(e, s, c, tuple(also)) for e, s, c, also in out]


def _words(query: str) -> set[str]:
    """The query's words as a namespace could spell them ("GitLab" -> gitlab, "monday.com" -> monday)."""
    return {w for w in re.split(r"[^a-z0-9-]+", query.lower()) if len(w) >= 2}


def _fit_word(share: float, key_held: bool, close: bool) -> str:
    """good: most of the query's words, its most specific among them; partial: that word, a fair share
    of them, or a meaning close to the best match's."""
    if share >= GOOD and key_held:
        return "good"
    return "partial" if key_held or share >= PARTIAL or close else "loose"


def implied_makers(query: str) -> set[str]:
    """The makers of the products the query names, by the maker list (coffer.discovery.brands): "Jira" and
    "Confluence" are Atlassian's, "Next.js" Vercel's; a name of one word has four letters at least."""
    from coffer.discovery.brands import LONGEST, key, makers

    table, words = makers(), key(query).split()
    spans = (
        " ".join(words[i : i + n]) for i in range(len(words)) for n in range(1, LONGEST + 1) if i + n <= len(words)
    )
    return {table[name] for name in spans if name in table and (" " in name or len(name) >= 4)}


def _best_of(makers: set[str], found: dict[int, Entry], scored: dict[int, float]) -> list[int]:
    """For each maker the query implies, its own server that scores best among those found."""
    best: dict[str, int] = {}
    for i, entry in found.items():
        owner = publisher(entry.name)
        if owner in makers and first_party(entry.name) and (owner not in best or scored[i] > scored[best[owner]]):
            best[owner] = i
    return list(best.values())


def reach(ranker: Ranker) -> float:
    """The share of the words tool catalogues are written in (the glossary's English column: create,
    file, time, ...) that some cached server holds: about 1.0 over the official registry, 0.12 over ten
    servers, where most everyday words are absent only because the registry is small."""
    words = _common_words()
    return sum(ranker.knows_word(w) for w in words) / len(words) if words else 1.0


def _absent_share(unknown_share: float, reach: float) -> float:
    """The query's share in words no server holds, each counted as absent by the registry's `reach`: a
    word a registry of ten servers lacks says little ("time in another city" over a company's own),
    one the official registry lacks says it is asked for what is not there; a query none of whose
    words any server holds stays wholly absent (gibberish finds nothing in any registry)."""
    unknown = reach * unknown_share
    return unknown / (unknown + 1.0 - unknown_share) if unknown else 0.0


@lru_cache(maxsize=1)
def _common_words() -> tuple[str, ...]:
    from coffer.ranking.languages import GLOSSARY_FILE

    lines = GLOSSARY_FILE.read_text(encoding="utf-8").splitlines()
    english = (line.split(" | ", 1)[0] for line in lines if line.strip() and not line.startswith("#"))
    return tuple(dict.fromkeys(w for cell in english for form in cell.split(",") for w in form.split()))


def _knows_nothing_of(ranker: Ranker, query: str) -> bool:
    """Every word of the query that could match (three letters or more) is one no cached entry holds."""
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
    ranked = Ranker(docs, "hybrid", None, english_docs=True, acting=False).search(query, min(k, len(docs)))
    out = []
    for doc, _ in ranked.hits:
        row = rows[int(doc.id)]
        about = row.text if len(row.text) <= 160 else row.text[:159] + "…"
        out.append({"name": row.name, "version": row.version, "about": about, "install": f"coffer add {row.name}"})
    return out
