"""Text to BM25 terms: split identifiers, lowercase, drop stopwords, stem.

Tool names arrive as `create_pull_request`, `browser-navigate`, `getFileInfo` or `ec2Instances`;
queries arrive as plain English. Both go through the same pipeline so "open a pull request" meets
`create_pull_request`. Deterministic and pure: the same text always gives the same terms.
"""

from __future__ import annotations

import functools
import re
import threading
from itertools import pairwise
from pathlib import Path

# A run of letters/digits, or one CJK ideograph (no spaces in Chinese: one character per term is the
# cheapest segmentation that still lets a Chinese query meet a Chinese description).
_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_]+", re.UNICODE)
# camelCase and digit boundaries inside one word: "getHTTPResponse2xx" -> get HTTP Response 2 xx.
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_A-Za-z]+", re.UNICODE)

STOPWORDS: frozenset[str] = frozenset(
    {
        "a",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "should",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
    }
)


# Short forms developers type for words tool descriptions spell out. Applied to docs and queries alike.
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "pr": ("pull", "request"),
    "prs": ("pull", "request"),
    "repo": ("repository",),
    "repos": ("repository",),
    "k8s": ("kubernetes",),
    "db": ("database",),
    "env": ("environment",),
    "dir": ("directory",),
    "dirs": ("directory",),
    "config": ("configuration",),
    "info": ("information",),
    "msg": ("message",),
    "img": ("image",),
    "js": ("javascript",),
    "ts": ("typescript",),
    "py": ("python",),
    "md": ("markdown",),
    "url": ("url", "link"),
}


_local = threading.local()


def snowball(language: str = "english"):  # type: ignore[no-untyped-def]
    """A Snowball stemmer ("english", "spanish", ...): PyStemmer's C build when installed (1 ms to
    import, 19x faster), else snowballstemmer's pure Python (whose package imports all 40 of its
    languages). The two give the same stems (tests/ranking/test_ranking.py compares them on every
    catalogue and eval word). One per thread and language: a stemmer keeps state between calls (the
    gateway ranks in worker threads)."""
    stemmers: dict[str, object] = _local.__dict__.setdefault("stemmers", {})
    stemmer = stemmers.get(language)
    if stemmer is None:
        try:
            import Stemmer

            stemmer = Stemmer.Stemmer(language)
        except ImportError:
            import snowballstemmer

            stemmer = snowballstemmer.stemmer(language)
        stemmers[language] = stemmer
    return stemmer


@functools.cache
def _compiled_stemmer() -> bool:
    """Whether PyStemmer is installed (`snowball` uses it), without importing it."""
    import importlib.util

    return importlib.util.find_spec("Stemmer") is not None


_stems: dict[str, str] = {}
_stem_cache: dict[str, object] = {"path": None, "loaded": 0}
STEM_CACHE_VERSION = 1  # bump when the stemmer or its input rules change


def use_stem_cache(path: Path) -> None:
    """Load stems computed by an earlier run (Snowball in pure Python is most of a cold index build:
    about 0.3 s for the 222 real tools); `save_stem_cache` writes back what this run added. Not with
    PyStemmer: it stems a query's words faster than the cache is read (10-20 ms at 30,000 servers)."""
    import json

    if _stem_cache["path"] == path or _compiled_stemmer():
        return
    _stem_cache["path"] = path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if isinstance(data, dict) and data.get("version") == STEM_CACHE_VERSION and isinstance(data.get("stems"), dict):
        for word, value in data["stems"].items():
            if isinstance(word, str) and isinstance(value, str):
                _stems.setdefault(word, value)
    _stem_cache["loaded"] = len(_stems)


def forget_stems() -> None:
    """Drop the stems this process holds (and stop writing them back): the words of removed texts."""
    _stems.clear()
    _stem_cache.update(path=None, loaded=0)


def save_stem_cache() -> None:
    """Write the stem cache when this run stemmed words it did not have (best effort: a cache)."""
    import json

    path = _stem_cache["path"]
    if not isinstance(path, Path) or len(_stems) <= int(_stem_cache["loaded"]):  # type: ignore[call-overload]
        return
    try:
        from coffer.vault.fsutil import atomic_write

        atomic_write(path, json.dumps({"version": STEM_CACHE_VERSION, "stems": _stems}, ensure_ascii=False))
        _stem_cache["loaded"] = len(_stems)
    except OSError:
        return


def stem(word: str) -> str:
    """Snowball (Porter2) stem, memoised: a catalogue repeats few distinct words."""
    hit = _stems.get(word)
    if hit is None:
        hit = snowball().stemWord(word) if word.isascii() and word.isalpha() else word
        if len(_stems) < 200_000:
            _stems[word] = hit
    return hit


def split_words(text: str) -> list[str]:
    """Lowercased words of `text`, identifiers split on snake, kebab, camel case and digits.

    A letter run followed by digits also keeps its joined form ("base64", "ec2" from "ec2Instances"),
    since people type those whole.
    """
    out: list[str] = []
    for word in _WORD.findall(text):
        if word.lower() in ABBREVIATIONS:  # "k8s" stays whole so it can be expanded
            out.append(word.lower())
            continue
        parts = _PART.findall(word) if not word.islower() or any(c.isdigit() for c in word) else [word]
        if len(parts) > 1:
            lowered = [p.lower() for p in parts]
            out.extend(lowered)
            out.extend(a + b for a, b in pairwise(lowered) if b.isdigit() and a.isalpha())
        else:
            out.append(word.lower())
    return out


_word_terms: dict[str, tuple[str, ...]] = {}


def _terms_of(word: str) -> tuple[str, ...]:
    """Terms of one regex word, memoised: catalogues and queries repeat few distinct words."""
    hit = _word_terms.get(word)
    if hit is None:
        hit = tuple(stem(w) for part in split_words(word) for w in ABBREVIATIONS.get(part, (part,)) if _keep(w))
        if len(_word_terms) < 200_000:
            _word_terms[word] = hit
    return hit


def tokenize(text: str) -> list[str]:
    """BM25 terms of `text`, in order, repeats kept (term frequency matters)."""
    out: list[str] = []
    for word in _WORD.findall(text):
        out.extend(_terms_of(word))
    return out


def _keep(word: str) -> bool:
    if word in STOPWORDS:
        return False
    # Single Latin letters are noise ("s" from "s3"), single digits and CJK characters are not.
    return len(word) > 1 or not word.isascii() or word.isdigit()


_ABBREV_RE = re.compile(r"\b(" + "|".join(sorted(ABBREVIATIONS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def expand_abbreviations(text: str) -> str:
    """`text` with short forms spelled out ("open a PR" -> "open a pull request"), for the embedder."""
    return _ABBREV_RE.sub(lambda m: " ".join(ABBREVIATIONS[m.group(0).lower()]), text)
