"""Queries in other languages, read in the English tool catalogues are written in.

Both bundled embedding models are English models, and a catalogue's words are English: "abre un PR
para mi rama" shares only "PR" with `create_pull_request`, and the model splits "abre" and "rama"
into pieces that mean nothing. No multilingual model ships in a package Coffer can depend on, so
queries are translated word by word through a small glossary (`glossary.txt`: the catalogues' ~150
most used words in Spanish, German, French, Portuguese, Italian, Russian, Chinese and Japanese) before
ranking. The result is crude English ("open PR branch"), which is what the ranker needs: the
catalogue's words, and the developer vocabulary (`coffer.ranking.vocabulary`) applied after it.

- Language: Cyrillic is Russian; kana is Japanese; other CJK is Chinese (Japanese second); a Latin
  query is the language whose function words and glossary words it holds most, and only when that
  beats the English evidence (English function words and glossary words), so English queries are
  never rewritten.
- Latin and Cyrillic words are matched by their Snowball stem in that language (inflections: abre,
  abrir, abra), phrases first ("base de datos"); the language's function words are dropped and words
  the glossary does not know (names, loanwords, "PR") are kept. Paths and identifiers are left alone.
- Chinese and Japanese are matched by longest glossary entry in each run of CJK characters; the
  original characters stay (a catalogue with Chinese descriptions still matches them) and the English
  is appended.
- Tool search replaces the words (catalogues are English); `coffer__ask` appends the English to the
  query as typed (`keep_original`), since notes are written in whatever language their author uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from coffer.ranking.tokenize import STOPWORDS, snowball, stem

GLOSSARY_FILE = Path(__file__).with_name("glossary.txt")
LATIN = ("es", "de", "fr", "pt", "it")
COLUMNS = ("en", *LATIN, "ru", "zh", "ja")
_STEMMERS = {"es": "spanish", "de": "german", "fr": "french", "pt": "portuguese", "it": "italian", "ru": "russian"}
MAX_PHRASE = 4
MIN_EVIDENCE = 2


def _words_of(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Function words: they tell the language apart and carry nothing a tool description needs.
FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "es": _words_of(
        "el la los las un una unos unas de del al en con por para mi mis tu tus su sus que y o es este esta "
        "estos estas ese esa lo le les se me te nos todo como cual donde cuando muy más sin sobre entre "
        "hasta desde ya hay"
    ),
    "de": _words_of(
        "der die das den dem des ein eine einen einem einer eines und oder für mit von zu zum zur im in "
        "auf aus bei nach über unter ist sind mein meine meinen meinem meiner dein deine ihr ihre unser "
        "bitte alle nicht auch noch wie was wo wann ich mir mich du dir es sie wir sich hat haben wird "
        "wurde kann soll an"
    ),
    "fr": _words_of(
        "le la les un une des du de d l au aux et ou pour par avec dans sur sous est sont mon ma mes ton "
        "ta tes son sa ses notre nos votre vos ce cet cette ces qui que quoi dont où je tu il elle nous "
        "vous ils moi toi lui leur en y ne pas plus très stp svp"
    ),
    "pt": _words_of(
        "o os as um uma uns umas do da dos das de no na nos nas em com por para pelo pela meu minha meus "
        "minhas seu sua seus suas e ou que é são este esta isto esse essa isso ao aos à às se me te nós "
        "você vocês mais muito sem sobre entre até por favor"
    ),
    "it": _words_of(
        "il lo la i gli le un uno una di del dello della dei degli delle da dal dalla in nel nella con "
        "su sul sulla per tra fra e o che è sono mio mia miei mie tuo tua suo sua nostro questo questa "
        "quello quella ci mi ti si non più molto anche come dove quando"
    ),
    "ru": _words_of(
        "в во на с со к ко по за из от до для о об и или а но что это этот эта эти мой моя мои моё мне "
        "меня ты вы мы он она они как где когда все весь не ни же ли бы пожалуйста"
    ),
}

_LETTERS = re.compile(r"[^\W\d_]+", re.UNICODE)
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_IDENTIFIER = re.compile(r"[/\\._@:=~]\w")  # out.pdf, src/app, user@host, key=value: not words
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Glossary:
    """The glossary, indexed: stem phrases per Latin/Cyrillic language, forms per CJK language."""

    phrases: dict[str, dict[tuple[str, ...], tuple[str, ...]]]
    cjk: dict[str, dict[str, tuple[str, ...]]]
    english: frozenset[str]  # the English column's words
    english_stems: frozenset[str]  # ... stemmed: a query holding them is evidence of English


def _stems(lang: str, words: list[str]) -> list[str]:
    return list(snowball(_STEMMERS[lang]).stemWords(words))


def parse(text: str) -> list[dict[str, list[str]]]:
    """Rows of the glossary file: column -> forms. Raises ValueError on a malformed row."""
    rows: list[dict[str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(" | ")]
        if len(cells) != len(COLUMNS) or not all(cells):
            raise ValueError(f"glossary line {number}: expected {len(COLUMNS)} non-empty columns")
        forms = ([f.strip().lower() for f in cell.split(",") if f.strip()] for cell in cells)
        rows.append(dict(zip(COLUMNS, forms, strict=True)))
    return rows


@lru_cache(maxsize=1)
def glossary() -> Glossary:
    """Read and index `glossary.txt` once per process (only when a query may not be English)."""
    phrases: dict[str, dict[tuple[str, ...], tuple[str, ...]]] = {lang: {} for lang in _STEMMERS}
    cjk: dict[str, dict[str, tuple[str, ...]]] = {"zh": {}, "ja": {}}
    english: set[str] = set()
    for row in parse(GLOSSARY_FILE.read_text(encoding="utf-8")):
        meaning = tuple(dict.fromkeys(w for form in row["en"] for w in form.split()))
        english.update(meaning)
        for lang in _STEMMERS:
            for form in row[lang]:
                key = tuple(_stems(lang, _LETTERS.findall(form)))
                if key:
                    phrases[lang][key] = tuple(dict.fromkeys((*phrases[lang].get(key, ()), *meaning)))
        for lang in cjk:
            for form in row[lang]:
                cjk[lang][form] = tuple(dict.fromkeys((*cjk[lang].get(form, ()), *meaning)))
    return Glossary(
        phrases=phrases, cjk=cjk, english=frozenset(english), english_stems=frozenset(stem(w) for w in english)
    )


def _words(query: str) -> list[tuple[int, int, str]]:
    """(start, end, lowercased word) of each letter run outside paths and identifiers."""
    out: list[tuple[int, int, str]] = []
    for chunk in re.finditer(r"\S+", query):
        if _IDENTIFIER.search(chunk.group(0)):
            continue
        for m in _LETTERS.finditer(chunk.group(0)):
            out.append((chunk.start() + m.start(), chunk.start() + m.end(), m.group(0).lower()))
    return out


def _matches(
    lang: str, words: list[str], table: dict[tuple[str, ...], tuple[str, ...]]
) -> list[tuple[int, int, tuple[str, ...]]]:
    """(first, last + 1, English) of each glossary phrase among `words`, longest first, left to right."""
    stems = _stems(lang, words)
    function_words = FUNCTION_WORDS[lang]
    spans: list[tuple[int, int, tuple[str, ...]]] = []
    i = 0
    while i < len(words):
        for size in range(min(MAX_PHRASE, len(words) - i), 0, -1):
            # a function word alone is never a glossary word ("para" is not "parar", "sich" not "sichern")
            meaning = table.get(tuple(stems[i : i + size])) if size > 1 or words[i] not in function_words else None
            if meaning:
                spans.append((i, i + size, meaning))
                i += size
                break
        else:
            i += 1
    return spans


def detect(query: str) -> str | None:
    """The query's language when it is one the glossary covers and not English; None otherwise."""
    if any(len(run) > 1 for run in _CJK_RUN.findall(query)):  # one stray ideograph is mojibake, not Chinese
        return "ja" if _KANA.search(query) else "zh"
    words = [w for _, _, w in _words(query)]
    if not words:
        return None
    cyrillic = sum(1 for w in words if _CYRILLIC.search(w))
    if cyrillic:  # Russian with a few Latin names (PR, GitHub), not one Russian word in an English question
        return "ru" if 2 * cyrillic >= len(words) else None
    table = glossary()
    english = {w for w in words if w in STOPWORDS or stem(w) in table.english_stems}
    best, best_score, best_english = None, 0, 0
    for lang in LATIN:
        known = {w for a, b, _ in _matches(lang, words, table.phrases[lang]) for w in words[a:b]}
        found = [w for w in words if w in known and w not in english]
        if not found:
            continue
        own = FUNCTION_WORDS[lang]
        score = len(found) + sum(1 for w in words if w in own and w not in STOPWORDS)
        # a word of both languages ("an", "in", "test") is evidence for neither
        english_score = sum(1 for w in words if w in english and w not in own and w not in known)
        if score - english_score > best_score - best_english:
            best, best_score, best_english = lang, score, english_score
    # two pieces of evidence at least: one word ("ticket", "logs") is as likely an English loanword
    return best if best_score >= MIN_EVIDENCE and best_score > best_english else None


def translate(query: str, keep_original: bool = False) -> str:
    """`query` in the catalogue's English, word by word; unchanged when it is English (or unknown).

    `keep_original` adds the English after the query instead of replacing its words: for documents
    that may be written in the query's own language (notes), whose words must still match.
    """
    if query.isascii() and not _ascii_candidate(query):
        return query
    lang = detect(query)
    if lang is None:
        return query
    table = glossary()
    if lang in ("zh", "ja"):
        return _translate_cjk(query, lang, table)
    english, meanings = _translate_words(query, lang, table)
    if not meanings:
        return query
    return f"{query} {' '.join(dict.fromkeys(meanings))}" if keep_original else english


def _translate_words(query: str, lang: str, table: Glossary) -> tuple[str, list[str]]:
    """A Latin-script or Russian query with its glossary words in English and its function words
    gone, and the English words it took from the glossary."""
    spans = _words(query)
    if lang == "ru":  # a Russian query may still hold Latin words (PR, GitHub): those stay
        spans = [s for s in spans if _CYRILLIC.search(s[2])]
    words = [w for _, _, w in spans]
    out: list[str] = []
    meanings: list[str] = []
    pos = 0
    for a, b, meaning in _matches(lang, words, table.phrases[lang]):
        out.append(_without_function_words(query[pos : spans[a][0]], lang))
        out.append(" ".join(meaning))
        meanings.extend(meaning)
        pos = spans[b - 1][1]
    out.append(_without_function_words(query[pos:], lang))
    return _SPACES.sub(" ", " ".join(out)).strip(), meanings


def _ascii_candidate(query: str) -> bool:
    """Cheap pre-check for an ASCII query: does it hold a word no English query would?

    Most queries are English: they skip the glossary (and the stemmers) entirely unless one of their
    words is another language's function word.
    """
    words = {w.lower() for w in _LETTERS.findall(query)}
    return any(w in FUNCTION_WORDS[lang] and w not in STOPWORDS for lang in LATIN for w in words) or (
        bool(words) and not words & STOPWORDS and _glossary_hit(words)
    )


def _glossary_hit(words: set[str]) -> bool:
    """A query without a single English function word ("descargar archivo"): ask the glossary."""
    table = glossary()
    return any(
        w not in table.english and (stem,) in table.phrases[lang]
        for lang in LATIN
        for w, stem in zip(sorted(words), _stems(lang, sorted(words)), strict=True)
    )


def _without_function_words(text: str, lang: str) -> str:
    """`text` without the language's function words (kept where they are part of a path)."""
    words = FUNCTION_WORDS[lang]

    def chunk(m: re.Match[str]) -> str:
        if _IDENTIFIER.search(m.group(0)):
            return m.group(0)
        return _LETTERS.sub(lambda w: "" if w.group(0).lower() in words else w.group(0), m.group(0))

    return re.sub(r"\S+", chunk, text)


def _translate_cjk(query: str, lang: str, table: Glossary) -> str:
    """The query with the English of every glossary entry found in its CJK runs appended."""
    first, second = table.cjk[lang], table.cjk["zh" if lang == "ja" else "ja"]
    longest = max(len(form) for form in (*first, *second))
    meaning: list[str] = []
    for run in _CJK_RUN.findall(query):
        i = 0
        while i < len(run):
            for size in range(min(longest, len(run) - i), 0, -1):
                piece = run[i : i + size]
                hit = first.get(piece) or second.get(piece)
                if hit:
                    meaning.extend(hit)
                    i += size
                    break
            else:
                i += 1
    if not meaning:
        return query
    return f"{query} {' '.join(dict.fromkeys(meaning))}"
