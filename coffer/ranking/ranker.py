"""`Ranker`: build the indexes for one doc list once, then answer queries in about a millisecond.

A query goes: the glossary (another language read in English) -> the vocabulary's rewrite (weighted
BM25 terms, the embedder's text, the action) -> index scores (coffer.ranking.index), fused -> the
rerank passes (coffer.ranking.rerank) -> the top k.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coffer.errors import UsageError
from coffer.ranking.bm25 import BM25Params, FieldSpec
from coffer.ranking.docs import Doc, SavedDocs
from coffer.ranking.embed import ModelUnavailable
from coffer.ranking.fuse import BM25_WEIGHT, max_normalise, minmax_normalise, top_k, weighted_shares
from coffer.ranking.implied import implied_queries
from coffer.ranking.index import CHUNK_WEIGHT, Indexes
from coffer.ranking.languages import translate
from coffer.ranking.rerank import IMPLIED_SLOT, NameFit, place_implied
from coffer.ranking.rules import Rules, current
from coffer.ranking.vocabulary import rewrite

if TYPE_CHECKING:
    import numpy as np

    from coffer.ranking.embed import Embedder

MODES: tuple[str, ...] = ("hybrid", "bm25", "semantic")
# With the optional MiniLM model: hybrid = 0.2 BM25 + 0.3 wordllama + 0.5 MiniLM (each normalised as in
# fuse.py), chosen on the metatool dev split only (see evals/README.md); "semantic" drops the BM25 part.
MINILM_BM25_WEIGHT = 0.2
MINILM_SHARE = 0.625  # of the semantic part: 0.5 / (0.3 + 0.5)


@dataclass(frozen=True)
class RankResult:
    """Ranked hits, best first; `ranker` says what really ran ("bm25" when the model was missing)."""

    hits: list[tuple[Doc, float]]
    ranker: str
    total: int
    note: str | None = None
    # per hit, what its score is made of (`Ranker.parts` at the doc; "implied": 1.0 when the hit was
    # placed for a need the query implies and took the score of the place it was given)
    parts: list[dict[str, float]] | None = None
    # matches an agent may not see, counted, never named: [{"server", "count", "why", "fix"}]
    hidden: list[dict[str, object]] = dataclasses.field(default_factory=list)


def _unweighted(params: BM25Params | None) -> BM25Params:
    """The same BM25F with every field weighing 1.0 (the `field_weights` rule off)."""
    base = params or BM25Params()
    return dataclasses.replace(base, fields={k: FieldSpec(1.0, f.b) for k, f in base.fields.items()})


@dataclass(frozen=True)
class Coverage:
    """What docs hold of a query's words: per doc, the share of the words the docs know (`shares`) and
    whether it holds the most specific of them (`key_held`: "postgres" in "query a postgres database");
    and the share of the query's weight in words no doc holds (`unknown_share`)."""

    shares: list[float]
    key_held: list[bool]
    unknown_share: float


class Ranker:
    """Ranks a fixed list of docs. Build once per catalogue; `search` is read-only and thread-safe.

    `mode` "semantic" and "hybrid" need the bundled embedding model; when it cannot be loaded the
    ranker runs BM25 alone and says so in `RankResult.ranker` and `.note`. Doc vectors are cached in
    `cache_dir` (keyed by content hash) so a restart does not re-embed an unchanged catalogue.

    `embeddings` ("auto", "wordllama", "minilm"; default $COFFER_EMBEDDINGS, else "auto") adds the
    optional MiniLM model when it is installed ("auto") or asked for; the ranker is then named
    "hybrid-minilm" / "semantic-minilm". `implied_needs` (tools only, not memory passages) makes sure
    the best tool for each need the query implies (coffer.ranking.implied) is among the results.
    A query in another language is read through `coffer.ranking.languages`: with `english_docs` (tool
    catalogues) it is replaced by its English reading, otherwise (notes, in whatever language their
    author writes) the English is added to it. `rules` switches tuned rules off, for the ablation
    (coffer.ranking.rules). `acting`: the docs are things that act (tools), so what each does is weighed
    against what the query asks to do (coffer.ranking.rerank); not for notes, whose titles and first
    words say what they are about ("Create releases from main" answers "what branch do releases come
    from"), nor for registry servers.

    The indexes are `coffer.ranking.index`'s; this class reads the query (vocabulary, glossary), fuses
    the index scores and hands them to the passes of `coffer.ranking.rerank`.
    """

    def __init__(
        self,
        docs: Sequence[Doc],
        mode: str = "hybrid",
        cache_dir: Path | None = None,
        *,
        bm25_params: BM25Params | None = None,
        bm25_weight: float | None = None,
        embeddings: str | None = None,
        implied_needs: bool = False,
        english_docs: bool = False,
        model: Embedder | None = None,
        docs_key: str | None = None,
        rules: Rules | None = None,
        acting: bool = True,
    ):
        from coffer.ranking.minilm import requested_backend

        if mode not in MODES:
            raise UsageError(f"unknown ranker {mode!r}: choose one of {', '.join(MODES)}")
        backend = requested_backend(embeddings)
        self.docs: Sequence[Doc] = docs if isinstance(docs, SavedDocs) else list(docs)
        self.mode = mode
        self.rules = rules = rules if rules is not None else current()
        self.implied_needs = implied_needs and rules.implied_needs
        self.english_docs = english_docs
        self.cache_dir = cache_dir
        params = bm25_params if rules.field_weights else _unweighted(bm25_params)
        chunk_weight = CHUNK_WEIGHT if rules.sentence_vectors else 0.0
        self.index = Indexes(self.docs, mode, backend, cache_dir, params, model, docs_key, chunk_weight)
        self.from_snapshot = self.index.from_snapshot  # the indexes came from a snapshot, not a build
        self._fit = NameFit(self.docs, cover=rules.name_cover, families=rules.action_families and acting)
        self._standing = self.index.standing if rules.deprecated else None
        self._positions: dict[str, int] | None = None
        default_weight = MINILM_BM25_WEIGHT if self.index.dense is not None else BM25_WEIGHT
        self.bm25_weight = default_weight if bm25_weight is None else bm25_weight

    @classmethod
    def saved(
        cls, cache_dir: Path, docs_key: str, mode: str = "hybrid", embeddings: str | None = None, **options: Any
    ) -> Ranker | None:
        """The Ranker(docs, mode, cache_dir, docs_key=...) a snapshot holds, without the docs: a caller
        over 30,000 docs need not read them to search (`coffer find`). Its hits carry ids and names,
        no texts. None when there is no such snapshot."""
        from coffer.ranking.index import saved_docs, saved_index
        from coffer.ranking.minilm import requested_backend
        from coffer.ranking.snapshot import load

        rules = options.get("rules") or current()
        params = options.get("bm25_params") if rules.field_weights else _unweighted(options.get("bm25_params"))
        path = saved_index(cache_dir, docs_key, mode, requested_backend(embeddings), options.get("model"), params)
        snapshot = load(path)
        docs = saved_docs(snapshot) if snapshot is not None else None
        if docs is None:
            return None
        ranker = cls(docs, mode, cache_dir, embeddings=embeddings, docs_key=docs_key, **options)
        return ranker if ranker.from_snapshot else None

    def position(self, doc_id: str) -> int | None:
        """Where the doc with this id is in `docs` (the index `scores_of` and `coverage` take)."""
        if self._positions is None:
            ids = self.docs.ids if isinstance(self.docs, SavedDocs) else [d.id for d in self.docs]
            self._positions = {doc_id: n for n, doc_id in enumerate(ids)}
        return self._positions.get(doc_id)

    @property
    def ranker(self) -> str:
        """What runs: the mode, "-minilm" with the optional model, "bm25" when the model is missing."""
        if self.index.semantic is None:
            return "bm25"
        return f"{self.mode}-minilm" if self.index.dense is not None else self.mode

    @property
    def note(self) -> str | None:
        return self.index.note

    def save_query_words(self) -> None:
        """Keep what this process's queries taught (stems, word pieces) for the next process; `coffer
        search` calls this, so a new word costs the tokenizer once per vault, not once per run."""
        self.index.save_query_words()

    @property
    def total(self) -> int:
        return len(self.docs)

    def scores(self, query: str) -> np.ndarray:
        """Score of every doc for `query` under the ranker that runs (higher is better, 0 = no match)."""
        return self.parts(query)["total"]

    def parts(self, query: str) -> dict[str, np.ndarray]:
        """Every doc's score for `query` and what it is made of: the weighted "lexical" (BM25) and
        "semantic" shares, and "name" (the name-fit pass: total minus the two), so the console can show
        why a tool ranks where it does. The bm25 ranker has only "lexical", the semantic one only "semantic"."""
        import numpy as np

        if not self.docs:
            empty = np.zeros(0, dtype=np.float32)
            return {"total": empty, "lexical": empty}
        # the developer vocabulary, and a question read as one (coffer.ranking.vocabulary)
        rw = rewrite(query, vocabulary=self.rules.vocabulary, questions=self.rules.questions)
        sem_index, dense_index = self.index.semantic, self.index.dense  # read once: a failure below drops them
        if sem_index is not None:
            try:
                semantic = sem_index.scores(rw.text)
                dense = dense_index.scores(rw.text) if dense_index is not None else None
            except ModelUnavailable as exc:  # the tokenizer, loaded on first need, failed
                self.index.drop_models(str(exc))
                sem_index = None
        if sem_index is None:
            lexical_only = self._stand(self.index.bm25.scores(rw.terms, rw.weights))
            return {"total": lexical_only, "lexical": lexical_only}
        if dense is not None:
            semantic = (1.0 - MINILM_SHARE) * minmax_normalise(semantic) + MINILM_SHARE * minmax_normalise(dense)
        if self.mode == "semantic":
            semantic = self._stand(semantic)
            return {"total": semantic, "semantic": semantic}
        lexical = self.index.bm25.scores(rw.terms, rw.weights)
        if dense is not None:
            lex, sem = self.bm25_weight * max_normalise(lexical), (1.0 - self.bm25_weight) * semantic
        else:
            lex, sem = weighted_shares(lexical, semantic, self.bm25_weight)
        fused = lex + sem
        total = self._stand(self._fit(fused, rw))
        return {"total": total, "lexical": lex, "semantic": sem, "name": total - fused}

    def _stand(self, scores: np.ndarray) -> np.ndarray:
        return scores if self._standing is None else scores * self._standing

    def unmatched(self, query: str) -> list[str]:
        """The query's own words (as BM25 terms, its action aside) that no doc holds: what the docs know
        nothing of ("slack" in a vault without Slack). Mapped synonyms and implied words do not count."""
        if self.rules.glossary:
            query = translate(query, keep_original=not self.english_docs)
        from coffer.ranking.tokenize import tokenize

        rw = rewrite(query, vocabulary=self.rules.vocabulary, questions=self.rules.questions)
        action = set(tokenize(rw.action)) if rw.action else set()
        return [
            t
            for t in rw.terms
            if rw.weights.get(t, 1.0) >= 1.0 and t not in action and len(t) >= 3 and not self.index.bm25.knows(t)
        ]

    def knows_word(self, word: str) -> bool:
        """Whether the docs hold `word` as the index reads words (its stems, all of them)."""
        from coffer.ranking.tokenize import tokenize

        terms = tokenize(word)
        return bool(terms) and all(self.index.bm25.knows(t) for t in terms)

    def scores_of(self, query: str, ids: list[int]) -> list[float]:
        """The scores `search` gives the docs at `ids` (implied needs aside), wherever they rank."""
        if self.rules.glossary:
            query = translate(query, keep_original=not self.english_docs)
        total = self.parts(query)["total"]
        return [float(total[i]) for i in ids]

    def coverage(self, query: str, ids: list[int]) -> Coverage:
        """How much of the query the docs at `ids` hold, by the words' idf (the action's weight applied):
        what `coffer find` calls a fit, where a score alone only orders."""
        import numpy as np

        if self.rules.glossary:
            query = translate(query, keep_original=not self.english_docs)
        rw = rewrite(query, vocabulary=self.rules.vocabulary, questions=self.rules.questions)
        bm25 = self.index.bm25
        own = [t for t in dict.fromkeys(rw.terms) if rw.weights.get(t, 1.0) >= 0.5 and len(t) >= 2]
        weights = {t: bm25.idf(t) * min(rw.weights.get(t, 1.0), 1.0) for t in own}
        known = {t: w for t, w in weights.items() if bm25.knows(t)}
        total, known_total = sum(weights.values()), sum(known.values())
        wanted = np.asarray(ids, dtype=np.int64)
        held = np.zeros(len(ids), dtype=np.float64)
        for term, weight in known.items():
            held += weight * np.isin(wanted, bm25.holding(term))
        key = max(known, key=known.__getitem__) if known else None
        return Coverage(
            shares=[float(v) / known_total if known_total else 0.0 for v in held],
            key_held=[bool(v) for v in np.isin(wanted, bm25.holding(key))] if key else [False] * len(ids),
            unknown_share=1.0 - known_total / total if total else 0.0,
        )

    def search(self, query: str, k: int = 5, explain: bool = False) -> RankResult:
        """The k best docs for `query`, best first, never a zero-score doc; `explain` adds each hit's
        score parts.

        A query in another language is read through the glossary first (`coffer.ranking.languages`);
        the best tool for each need the query implies gets a place (`implied_needs`). Raises UsageError
        when k < 1.
        """
        if k < 1:
            raise UsageError(f"top_k must be at least 1, got {k}")
        if self.rules.glossary:  # another language, read in English
            query = translate(query, keep_original=not self.english_docs)
        needs = implied_queries(query) if self.implied_needs and k > 1 else []
        parts = self.parts(query)
        scores = parts["total"]
        order = top_k(scores, k + len(needs))
        values = {i: float(scores[i]) for i in order}
        for n, need in enumerate(needs):
            place_implied(self.scores, need, min(IMPLIED_SLOT + n, k - 1), order, values)
        hits = [(self.docs[i], round(values[i], 6)) for i in order[:k]]
        explained = None
        if explain:
            explained = [
                {name: round(float(v[i]), 6) for name, v in parts.items() if name != "total"}
                | {"implied": float(abs(values[i] - float(scores[i])) > 1e-9)}
                for i in order[:k]
            ]
        return RankResult(hits=hits, ranker=self.ranker, total=self.total, note=self.note, parts=explained)
