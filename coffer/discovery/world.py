"""What the registry knows of the world: which words name servers. A query word that no tool in the vault
holds but that names servers in the registry cache ("Slack", "Jira") says the user asks for a service the
vault lacks; one that names none ("Paris", "Bob") is an argument. The registry is the list: no service
name is written in the code.

A word's evidence is how much of its use in the registry is as a server's name: the servers whose name
holds it, over the entries whose words hold it at all (plus `SMOOTH`, so a word met once weighs little),
doubled where the query spells it as a name is spelled (a capital inside the sentence: "on Slack",
"HubSpot"). To it adds what the registry says those servers do: the share of the rest of the query
that their descriptions hold (`about`: "refund" and "invoices" for the servers named Stripe), at
`CONTEXT_WEIGHT`. "list this month's Stripe invoices" asks for what Stripe's servers do; "the stock
price of Apple" asks nothing of what Apple's servers do (notes, music), so Apple is an argument there.
Past `THRESHOLD`, `coffer__search_tools` answers no tools and names the registry's servers for it.
Measured over every eval set (evals/README.md): the curve, and why the ranker's own evidence (what the
best tool holds of the rest of the query) is not in it.

The counts are built once per cache generation and kept beside the cache (a few hundred KB), so the call
path reads a file, never the registry and never 30,000 rows.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from coffer.ranking.docs import ToolLike
from coffer.ranking.tokenize import STOPWORDS

SMOOTH = 3.0
SPELLED_AS_NAME = 2.0
BRAND = 0.5  # a word the brand list (coffer.discovery.brands) names: a product or service, whatever the registry has
CONTEXT_WEIGHT = 1.5  # the share of the rest of the query that the word's servers' descriptions hold
ABOUT_SHARE = 0.1  # a stem says what a word's servers do when this share of them holds it (one at least)
THRESHOLD = 0.875  # the highest abstention with at most 2% wrong on every in-vault eval set (1% here)
# Below THRESHOLD a word still gets the registry's servers offered beside the tools when it is this much a
# name: over the recorded registry "weather" 0.34 and "translate" 0.2 are; "quickly" 0.14, "french" 0.08
# and "history" 0.06 are everyday words that a server or two happen to be named for
OFFER = 0.2
_WORD = re.compile(r"[A-Za-z0-9]+")
_SENTENCE_END = re.compile(r"[.!?:]\s*$")


@dataclass(frozen=True)
class Words:
    """How many cached servers' names hold each word, how many entries hold it anywhere, and the stems
    the descriptions of the servers it names hold (what those servers do)."""

    named: dict[str, int]
    used: dict[str, int]
    about: dict[str, str] = field(default_factory=dict)  # word -> its servers' stems, space-separated

    def context(self, word: str, rest: list[str]) -> float:
        """The share of `rest` (the query's other stems) that the servers `word` names are about."""
        held = set(self.about.get(word, "").split())  # split per asked word: loading 30,000 servers' stays 0.1 s
        return sum(t in held for t in rest) / len(rest) if held and rest else 0.0

    def evidence(self, word: str, as_name: bool) -> float:
        """How strongly `word` names a service rather than being an everyday word or an argument."""
        named = self.named.get(word, 0)
        if not named:
            return 0.0
        return named / (self.used.get(word, named) + SMOOTH) * (SPELLED_AS_NAME if as_name else 1.0)


def count(entries: Iterable[tuple[str, str, str, str]]) -> Words:
    """Words from (registry name, short name, title, text) rows: a name's words are its short name's,
    its server part's and its title's (not its publisher's: adding them lowered abstention at 2%
    wrong from 45 to 39 on the eval sets)."""
    from coffer.ranking.tokenize import tokenize

    named: Counter[str] = Counter()
    used: Counter[str] = Counter()
    stems: dict[str, Counter[str]] = {}
    for name, short, title, text in entries:
        words = set(_lower_words(f"{short} {name.rsplit('/', 1)[-1]} {title}"))
        named.update(words)
        used.update(words | set(_lower_words(text)))
        said = set(tokenize(text))
        for word in words:
            stems.setdefault(word, Counter()).update(said)
    about = {
        word: " ".join(sorted(t for t, n in held.items() if n >= max(1.0, ABOUT_SHARE * named[word])))
        for word, held in stems.items()
    }
    return Words(dict(named), dict(used), about)


def words(registries: list[str]) -> Words | None:
    """The counts for the cached entries of `registries`, built once per cache generation; None when
    nothing was ever cached."""
    from coffer.discovery import cache

    if not registries or not cache.cache_path().exists():
        return None
    return _load(tuple(registries), cache.generation(registries))


@lru_cache(maxsize=4)
def _load(registries: tuple[str, ...], generation: str) -> Words | None:
    from coffer.discovery import cache
    from coffer.vault import paths
    from coffer.vault.fsutil import atomic_write

    where = paths.cache_dir() / f"registry-words-{generation}.json"
    try:
        saved = json.loads(where.read_text(encoding="utf-8"))
        return Words(saved["named"], saved["used"], saved["about"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    rows = cache.name_rows(list(registries))
    if not rows:
        return None
    built = count(rows)
    for old in paths.cache_dir().glob("registry-words-*.json"):
        old.unlink(missing_ok=True)
    saved = {"named": built.named, "used": built.used, "about": built.about}
    atomic_write(where, json.dumps(saved), mode=0o644)
    return built


def services(query: str, vault_knows: Callable[[str], bool], known: Words) -> list[tuple[str, float]]:
    """The query's words that no tool in the vault knows and that name servers in the registry or a
    brand (coffer.discovery.brands), with their evidence (the registry's names, what the rest of the
    query asks of those servers, `BRAND` for a brand's name), strongest first. A brand of several
    words ("Google Ads") is one entry, its words joined by a space."""
    from coffer.ranking.tokenize import tokenize

    out: dict[str, float] = {}
    stems = list(dict.fromkeys(tokenize(query)))
    matches = list(_WORD.finditer(query))
    for i, match in enumerate(matches):
        raw = match.group()
        word = raw.lower()
        inside = match.start() > 0 and not _SENTENCE_END.search(query[: match.start()])
        as_name = inside and any(c.isupper() for c in raw)  # "on Slack", "HubSpot": spelled as a name
        brand = BRAND * (SPELLED_AS_NAME if as_name else 1.0)
        phrases = _brand_phrases(matches[i:], vault_knows)
        for phrase in phrases:
            if phrase != word:
                out[phrase] = max(out.get(phrase, 0.0), brand)
        if len(word) < 3 or word in STOPWORDS or word.isdigit() or vault_knows(word):
            continue
        strength = known.evidence(word, as_name)
        if strength:
            own = set(tokenize(word))
            strength += CONTEXT_WEIGHT * known.context(word, [t for t in stems if t not in own])
        strength = max(strength, brand if word in phrases else 0.0)
        if strength > out.get(word, 0.0):
            out[word] = strength
    return sorted(out.items(), key=lambda kv: -kv[1])


def _brand_phrases(words: list[re.Match[str]], vault_knows: Callable[[str], bool]) -> list[str]:
    """The brands' names the query spells from its word `words[0]` on, one to `brands.LONGEST` words long,
    that the vault does not know (as one word, "hackernews", or word by word)."""
    from coffer.discovery.brands import LONGEST, brands

    names = brands()
    found = []
    for n in range(1, min(LONGEST, len(words)) + 1):
        parts = [m.group().lower() for m in words[:n]]
        phrase = " ".join(parts)
        if phrase not in names or all(p in STOPWORDS or len(p) < 3 for p in parts):
            continue
        if vault_knows("".join(parts)) or all(vault_knows(p) for p in parts):
            continue
        found.append(phrase)
    return found


_VOCABULARIES: dict[str, Callable[[str], bool]] = {}


def lacking(
    query: str,
    tools: Iterable[ToolLike],
    stem_known: Callable[[str], bool],
    registries: Iterable[str],
    key: str | None = None,
) -> tuple[list[str], list[str]]:
    """What `query` holds that the vault's `tools` do not know, by the registry cache of `registries`
    (never the network): the words by which it asks for a service the vault lacks (past THRESHOLD:
    then no tool is the answer), and every word no tool knows that is enough of a name in the registry
    (`OFFER`), strongest first ("weather" in "the weather in Paris", not "Paris" nor "quickly": what the
    registry's servers are offered for). Without a cache (a new vault, no network) the shipped brand list
    is the only evidence: "a survey in Typeform" is still no ask for the vault's tools. With `key` (the
    catalogue's), the vault's words are read once per catalogue (the gateway's call path), else every
    time (one `coffer search`)."""
    urls = list(dict.fromkeys(registries))
    known = (words(urls) if urls else None) or Words({}, {})
    knows = _VOCABULARIES.get(key) if key is not None else None
    if knows is None:
        knows = vault_vocabulary(tools, stem_known)
        if key is not None:
            _VOCABULARIES[key] = knows
            while len(_VOCABULARIES) > 8:  # a few catalogues (profiles) at a time
                _VOCABULARIES.pop(next(iter(_VOCABULARIES)))
    found = services(query, knows, known)
    return [word for word, strength in found if strength > THRESHOLD], [w for w, strength in found if strength >= OFFER]


def vault_vocabulary(tools: Iterable[ToolLike], stem_known: Callable[[str], bool]) -> Callable[[str], bool]:
    """Whether the vault's tools know a word: as written in their names, descriptions and schemas, or
    as a stem their index holds ("messages": messag); a word the index holds only in pieces is not known
    ("HubSpot" as "hub" and "spot" is not "hubspot", "1Password" as "password" is not "1password")."""
    from coffer.ranking.tokenize import tokenize

    raw = {w for t in tools for w in _lower_words(f"{t.name} {t.description} {json.dumps(t.input_schema)}")}
    return lambda word: word in raw or (len(tokenize(word)) == 1 and stem_known(word))


def _lower_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]
