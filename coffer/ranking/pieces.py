"""Token ids of wordllama's tokenizer, remembered per word, so a query rarely needs the tokenizer.

Loading the tokenizer (a 1.8 MB JSON of 32,000 tokens and 61,000 merges) costs ~0.11 s, a fifth of a
`coffer search` run, to tokenise a few words. The tokenizer decomposes exactly: its only normalisation
is "prepend ▁, turn spaces into ▁", it has no pre-tokenizer, and its BPE merges only make tokens of
its vocabulary. So where no token spans two characters, no merge does, and the text's ids are the
concatenation of the parts' ids on either side. No token holds a ▁ after another character, and none
mixes punctuation (the closure of ASCII punctuation under "shares a token with", `punct_class`) with
other characters, so "open the (draft) PR" splits into "▁open", "▁the", "▁(", "draft", ")", "▁PR";
and digits share no token with anything (`isolated_chars`), so "port 3000" is "▁port", "▁", "3", "0"...
Everything this cache holds came from the tokenizer itself (`learn`); a text made only of known
pieces gets exactly the ids the tokenizer would give it (tests compare the two on every catalogue
and eval text), and any other text goes to the tokenizer. So does a text holding one of its special
tokens ("<s>"), which the tokenizer matches in raw text before anything else.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MARK = "\u2581"  # the tokenizer's word-start mark
_WORD_TOKEN = re.compile(f"{MARK}[A-Za-z]+")  # whole words, and punctuation (below), are learnt from the vocabulary
_PLAIN = re.compile(f"[{MARK}A-Za-z0-9]+")
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
MAX_FRESH = 20_000  # query pieces one process learns (a long-running gateway meets many words)
_SEP = "\x00"  # joins packed strings; a piece holding it is never cached


def decomposable(normalizer: Any, pre_tokenizer: Any, model_type: str, vocab: Iterable[str]) -> bool:
    """Whether a tokenizer splits at word starts as this cache assumes: `normalizer` its config (JSON
    data), `pre_tokenizer` None when it has none, a BPE model, and no ▁ after another character."""
    expected = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": MARK},
            {"type": "Replace", "pattern": {"String": " "}, "content": MARK},
        ],
    }
    if normalizer != expected or pre_tokenizer is not None or model_type != "BPE":
        return False
    return not any(MARK in token.lstrip(MARK) for token in vocab)


def punct_class(vocab: Iterable[str], specials: Iterable[str] = ()) -> frozenset[str]:
    """ASCII punctuation plus every character that shares a token with it, to a fixed point: no
    token then mixes a character of the class with one outside it (▁ aside)."""
    skip = set(specials)
    # tokens of plain letters and digits cannot hold punctuation: skipped without making sets
    tokens = [set(t) - {MARK} for t in vocab if not _PLAIN.fullmatch(t) and t not in skip and not _is_byte_token(t)]
    members = set(_ASCII_PUNCT)
    while True:
        grown = set()
        for chars in tokens:
            if chars & members and chars - members:
                grown |= chars - members
        if not grown:
            return frozenset(members)
        members |= grown


def _is_byte_token(token: str) -> bool:
    return len(token) == 6 and token.startswith("<0x") and token.endswith(">")


def isolated_chars(vocab: Iterable[str], specials: Iterable[str] = ()) -> frozenset[str]:
    """ASCII characters that are tokens of their own and occur in no longer token (the digits, in
    Llama's vocabulary): each is a piece alone, and so is the ▁ before one. ASCII only, to keep the
    splitting pattern small (it is compiled at every start)."""
    skip = set(specials)
    in_longer: set[str] = set()
    alone: set[str] = set()
    for token in vocab:
        if token in skip or _is_byte_token(token):
            continue
        if len(token) == 1:
            alone.add(token)
        else:
            in_longer.update(token)
    return frozenset(c for c in alone - in_longer if c.isascii() and c.isprintable() and c != " ")


def _splitter(punct: frozenset[str], isolated: frozenset[str]) -> re.Pattern[str]:
    chars = "".join(re.escape(c) for c in sorted(punct))
    alone = "".join(re.escape(c) for c in sorted(isolated - punct))
    if not alone:
        return re.compile(f"{MARK}*(?:[{chars}]+|[^{chars}{MARK}]+)|{MARK}+")
    return re.compile(f"{MARK}*(?:[{chars}]+|[^{chars}{MARK}{alone}]+)|{MARK}+|[{alone}]")


def piece_text(piece: str) -> str:
    """The text that the tokenizer normalises to exactly `piece` (a piece that starts a word)."""
    tail = piece.lstrip(MARK)
    return " " * (len(piece) - len(tail) - 1) + tail


def piece_text_inner(piece: str) -> str:
    """The text of a piece that follows another piece directly (its marks are spaces)."""
    return piece.replace(MARK, " ")


class PieceCache:
    """piece -> token ids, filled only from the tokenizer's own output.

    Pieces learnt in this process sit in a dict; a snapshot's are kept as it saved them (a sorted
    list searched by bisection, ids in one array): at 30,000 pieces about 2 MB instead of 6.
    """

    def __init__(self) -> None:
        self.ids: dict[str, tuple[int, ...]] = {}
        self.specials: tuple[str, ...] = ()
        self.punct: frozenset[str] | None = None  # None until a tokenizer has been read
        self.isolated: frozenset[str] = frozenset()
        self._split: re.Pattern[str] | None = None
        self._saved: list[str] = []  # sorted
        self.fresh: set[str] = set()  # learnt from queries since start (`learn_query`), not yet saved
        self._saved_ends: Any = None  # numpy int64: end of each saved piece's ids in _saved_ids
        self._saved_ids: Any = None
        self._lock = threading.Lock()  # learning and saving; lookups read without it

    def __len__(self) -> int:
        return len(self.ids) + len(self._saved)

    def __contains__(self, piece: str) -> bool:
        return self._get(piece) is not None

    def split(self, text: str) -> list[str]:
        """The pieces the tokenizer works on independently (none for the empty text)."""
        if not text or self._split is None:
            return []
        return self._split.findall(MARK + text.replace(" ", MARK))

    def _get(self, piece: str) -> Sequence[int] | None:
        ids = self.ids.get(piece)
        if ids is not None:
            return ids
        i = bisect_left(self._saved, piece)
        if i == len(self._saved) or self._saved[i] != piece:
            return None
        start = int(self._saved_ends[i - 1]) if i else 0
        return self._saved_ids[start : int(self._saved_ends[i])].tolist()

    def lookup(self, text: str) -> list[int] | None:
        """The ids of `text` when every piece of it is known, else None."""
        if self._split is None or any(s in text for s in self.specials):
            return None
        out: list[int] = []
        for piece in self.split(text):
            ids = self._get(piece)
            if ids is None:
                return None
            out.extend(ids)
        return out

    def _read(self, tokenizer: Any) -> bool:
        if self._split is None:
            normalizer = tokenizer.normalizer
            config = json.loads(normalizer.__getstate__()) if normalizer is not None else None
            vocab = list(tokenizer.get_vocab())
            if not decomposable(config, tokenizer.pre_tokenizer, type(tokenizer.model).__name__, vocab):
                return False  # another tokenizer: every text goes to it
            self.specials = tuple(t.content for t in tokenizer.get_added_tokens_decoder().values())
            self._set_classes(punct_class(vocab, self.specials), isolated_chars(vocab, self.specials))
        return True

    def _set_classes(self, punct: frozenset[str], isolated: frozenset[str]) -> None:
        self.punct, self.isolated = punct, isolated
        self._split = _splitter(punct, isolated)

    def learn(self, tokenizer: Any, texts: Iterable[str], vocab_words: bool = True) -> list[str]:
        """Remember the pieces of `texts` (and the vocabulary's whole words, where most query words
        are, at a word's start and after punctuation) with the ids the tokenizer gives them; the
        pieces that were new. Thread-safe: the gateway's queries may teach it concurrently."""
        with self._lock:
            return self._learn(tokenizer, texts, vocab_words)

    def _learn(self, tokenizer: Any, texts: Iterable[str], vocab_words: bool) -> list[str]:
        if not self._read(tokenizer):
            return []
        assert self.punct is not None
        texts = list(texts)
        if self.isolated:
            # one pass over all the texts at once, joined by a character that is a piece of its own
            # and a space: "a  " + "0 " + "b" splits as "▁a", "▁▁", "0", "▁b", the pieces of each alone
            wanted = set(self.split(f"{min(self.isolated)} ".join(texts)))
        else:
            wanted = {piece for text in texts for piece in self.split(text)}
        if vocab_words:
            for token in tokenizer.get_vocab():
                if _WORD_TOKEN.fullmatch(token) or (token.strip(MARK) and set(token.lstrip(MARK)) <= self.punct):
                    wanted.update((token, token.lstrip(MARK)))
            wanted.update(self.isolated)
            wanted.add(MARK)
        todo = sorted(p for p in wanted if p not in self and _SEP not in p and not any(s in p for s in self.specials))
        starts = [p for p in todo if p.startswith(MARK) and p.strip(MARK)]
        self._encode(tokenizer, starts, [piece_text(p) for p in starts], 0)
        # A piece with no text of its own (one inside a word, or trailing spaces) is encoded after a
        # one-character piece that cannot merge with it ("." + "draft", "a" + ")", "a" + "  "), whose
        # ids are then dropped.
        rest = [p for p in todo if not (p.startswith(MARK) and p.strip(MARK))]
        groups: dict[str, list[str]] = {".": [], "a": []}
        for piece in rest:
            groups["a" if piece[0] in self.punct or piece[0] == MARK else "."].append(piece)
        for prefix, after in groups.items():
            if after and (prefix == ".") == (prefix in self.punct):  # "a" must not be punctuation
                skip = len(tokenizer.encode(prefix, add_special_tokens=False).ids)
                self._encode(tokenizer, after, [prefix + piece_text_inner(p) for p in after], skip)
        return todo

    def learn_query(self, tokenizer: Any, texts: Sequence[str]) -> None:
        """Remember the pieces of queries the cache did not know, so their words cost the tokenizer once
        (`coffer search` saves them beside the index). Only once the cache has its classes (from a
        snapshot or a build), and at most `MAX_FRESH` per process."""
        if self._split is None or len(self.fresh) >= MAX_FRESH:
            return
        self.fresh.update(self.learn(tokenizer, texts, vocab_words=False))

    def _encode(self, tokenizer: Any, pieces: Sequence[str], texts: Sequence[str], skip: int) -> None:
        for start in range(0, len(pieces), 4096):
            encodings = tokenizer.encode_batch(list(texts[start : start + 4096]), add_special_tokens=False)
            for piece, enc in zip(pieces[start : start + 4096], encodings, strict=True):
                self.ids[piece] = tuple(enc.ids[skip:])

    def to_arrays(self, only: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """What a snapshot keeps (nothing when no tokenizer taught this cache); `only` some pieces."""
        with self._lock:
            return self._to_arrays(only)

    def _to_arrays(self, only: Iterable[str] | None) -> dict[str, np.ndarray]:
        if self.punct is None:
            return {}
        if only is not None:
            return self._arrays({p: tuple(ids) for p in only if (ids := self._get(p)) is not None})
        merged = dict(self.ids)
        for i, piece in enumerate(self._saved):
            start = int(self._saved_ends[i - 1]) if i else 0
            merged.setdefault(piece, tuple(self._saved_ids[start : int(self._saved_ends[i])].tolist()))
        return self._arrays(merged)

    def _arrays(self, merged: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
        import numpy as np

        assert self.punct is not None
        pieces = sorted(merged)
        lengths = np.fromiter((len(merged[p]) for p in pieces), dtype=np.int64, count=len(pieces))
        flat = np.fromiter((i for p in pieces for i in merged[p]), dtype=np.int32, count=int(lengths.sum()))
        return {
            "piece_text": _pack(pieces),
            "piece_ends": np.cumsum(lengths),
            "piece_ids": flat,
            "piece_specials": _pack(self.specials),
            "piece_punct": _pack(sorted(self.punct)),
            "piece_isolated": _pack(sorted(self.isolated)),
        }

    def update_from_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Take the pieces a snapshot saved, if it holds any (ValueError when they are inconsistent)."""
        with self._lock:
            self._update_from_arrays(arrays)

    def _update_from_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        if "piece_text" not in arrays:
            return
        pieces = _unpack(arrays["piece_text"])
        ends, flat = arrays["piece_ends"], arrays["piece_ids"]
        if len(pieces) != len(ends) or (len(ends) and int(ends[-1]) != len(flat)) or pieces != sorted(pieces):
            raise ValueError("piece arrays do not agree")
        specials = tuple(_unpack(arrays["piece_specials"]))
        punct, isolated = frozenset(_unpack(arrays["piece_punct"])), frozenset(_unpack(arrays["piece_isolated"]))
        if self.punct is None:
            self.specials = specials
            self._set_classes(punct, isolated)
        elif (self.specials, self.punct, self.isolated) != (specials, punct, isolated):
            raise ValueError("pieces of another tokenizer")
        if not self._saved:
            self._saved, self._saved_ends, self._saved_ids = pieces, ends, flat
            return
        for i, piece in enumerate(pieces):  # a second catalogue's snapshot in one process: rare
            if piece not in self:
                start = int(ends[i - 1]) if i else 0
                self.ids[piece] = tuple(flat[start : int(ends[i])].tolist())


def _pack(strings: Sequence[str]) -> np.ndarray:
    from coffer.ranking.derived import pack_strings

    return pack_strings(strings, _SEP)  # a piece may hold a newline: joined by NUL, which none holds


def _unpack(packed: np.ndarray) -> list[str]:
    from coffer.ranking.derived import unpack_strings

    return unpack_strings(packed, _SEP)


MAX_SAVED = 50_000  # query pieces kept on disk per model
KEEP_FILES = 4  # files in the pieces folder: two per model (`vocab_file`, `learnt_file`)


def vocab_file(cache_dir: Path, model_id: str) -> Path:
    """Where a model's vocabulary pieces are kept: the same for every catalogue (`EmbeddingModel.learn_pieces`)."""
    from coffer.ranking.derived import SUFFIX

    return cache_dir / "pieces" / f"{model_id}.vocab{SUFFIX}"


def learnt_file(cache_dir: Path, model_id: str) -> Path:
    """Where the pieces `coffer search` queries taught a model are kept (`save_learnt`)."""
    from coffer.ranking.derived import SUFFIX

    return cache_dir / "pieces" / f"{model_id}{SUFFIX}"


# words only (letters, at most 24): what is kept of queries is a sorted bag of word pieces, never a
# digit run or a long token a secret typed into a query would leave
_SAVED_WORD = re.compile(f"{MARK}?[A-Za-z]{{1,24}}")


def load_learnt(cache: PieceCache, path: Path) -> None:
    """Add the pieces earlier queries taught (`save_learnt`); a missing or bad file is ignored."""
    from coffer.ranking.derived import load_derived

    saved = load_derived(path)
    if saved:
        with contextlib.suppress(KeyError, ValueError, IndexError):
            cache.update_from_arrays(saved)


def save_learnt(cache: PieceCache, path: Path) -> None:
    """Add the word pieces this process's queries taught to those kept at `path` (at most MAX_SAVED);
    errors are ignored (derived data)."""
    from coffer.ranking.derived import load_derived, save_arrays

    if not cache.fresh:
        return
    kept: list[str] = []
    old = load_derived(path)
    if old and "piece_text" in old:
        with contextlib.suppress(UnicodeDecodeError):
            kept = _unpack(old["piece_text"])
    fresh = sorted(p for p in cache.fresh if _SAVED_WORD.fullmatch(p))
    arrays = cache.to_arrays(only=list(dict.fromkeys([*kept, *fresh]))[:MAX_SAVED])
    if arrays:
        save_arrays(path, arrays, KEEP_FILES)
    cache.fresh.clear()
