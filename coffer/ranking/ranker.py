"""`Ranker`: build the indexes for one doc list once, then answer queries in about a millisecond."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from coffer.errors import UsageError
from coffer.ranking.bm25 import BM25Index, BM25Params
from coffer.ranking.docs import Doc, doc_fields, docs_hash, embed_chunks, embed_text
from coffer.ranking.fuse import BM25_WEIGHT, top_k, weighted_fusion
from coffer.ranking.tokenize import expand_abbreviations, tokenize

if TYPE_CHECKING:
    import numpy as np

    from coffer.ranking.embed import EmbeddingModel

Mode = Literal["hybrid", "bm25", "semantic"]
MODES: tuple[str, ...] = ("hybrid", "bm25", "semantic")
# Weight of a doc's best single sentence against its whole-text vector in the semantic score.
CHUNK_WEIGHT = 0.5


@dataclass(frozen=True)
class RankResult:
    """Ranked hits, best first; `ranker` says what really ran ("bm25" when the model was missing)."""

    hits: list[tuple[Doc, float]]
    ranker: str
    total: int
    note: str | None = None


@dataclass
class _SemanticIndex:
    model: EmbeddingModel
    matrix: np.ndarray  # one unit vector per doc, then the extra sentence vectors of long docs
    n_docs: int
    owners: np.ndarray  # doc index of each run of sentence rows
    starts: np.ndarray  # first sentence row (relative) of each run, for maximum.reduceat

    def scores(self, query: str) -> np.ndarray:
        import numpy as np

        qv = self.model.embed([expand_abbreviations(query)])[0]
        # einsum, not BLAS: a single-threaded mat-vec is faster and steadier on a busy machine than
        # BLAS threads, and its result does not depend on the thread count.
        sims = np.einsum("ij,j->i", self.matrix, qv)
        full = sims[: self.n_docs]
        if not self.owners.size:
            return full
        best = full.copy()
        per_doc = np.maximum.reduceat(sims[self.n_docs :], self.starts)
        best[self.owners] = np.maximum(best[self.owners], per_doc)
        return (1.0 - CHUNK_WEIGHT) * full + CHUNK_WEIGHT * best


class Ranker:
    """Ranks a fixed list of docs. Build once per catalogue; `search` is read-only and thread-safe.

    `mode` "semantic" and "hybrid" need the bundled embedding model; when it cannot be loaded the
    ranker runs BM25 alone and says so in `RankResult.ranker` and `.note`. Doc vectors are cached in
    `cache_dir` (keyed by content hash) so a restart does not re-embed an unchanged catalogue.
    """

    def __init__(
        self,
        docs: Sequence[Doc],
        mode: str = "hybrid",
        cache_dir: Path | None = None,
        *,
        bm25_params: BM25Params | None = None,
        bm25_weight: float = BM25_WEIGHT,
    ):
        if mode not in MODES:
            raise UsageError(f"unknown ranker {mode!r}: choose one of {', '.join(MODES)}")
        self.docs: list[Doc] = list(docs)
        self.mode = mode
        self.bm25_weight = bm25_weight
        self.note: str | None = None
        self._bm25 = BM25Index([doc_fields(d) for d in self.docs], bm25_params)
        self._semantic: _SemanticIndex | None = None
        if mode != "bm25":
            self._semantic = self._build_semantic(cache_dir)
        self.ranker = mode if self._semantic is not None else "bm25"

    def _build_semantic(self, cache_dir: Path | None) -> _SemanticIndex | None:
        import numpy as np

        from coffer.ranking.embed import ModelUnavailable, cached_vectors, get_model

        try:
            model = get_model()
        except ModelUnavailable as exc:
            self.note = f"semantic model unavailable, ranked with BM25 only: {exc}"
            return None
        texts = [embed_text(d) for d in self.docs]
        owners: list[int] = []
        for i, doc in enumerate(self.docs):
            extra = embed_chunks(doc)
            texts.extend(extra)
            owners.extend([i] * len(extra))
        vectors = cached_vectors(model, texts, cache_dir)
        n = len(self.docs)
        owner_arr = np.asarray(owners, dtype=np.int64)
        if owner_arr.size:
            run_starts = np.flatnonzero(np.r_[True, owner_arr[1:] != owner_arr[:-1]])
        else:
            run_starts = np.zeros(0, dtype=np.int64)
        return _SemanticIndex(
            model=model,
            matrix=np.ascontiguousarray(vectors),
            n_docs=n,
            owners=owner_arr[run_starts],
            starts=run_starts,
        )

    @property
    def total(self) -> int:
        return len(self.docs)

    def scores(self, query: str) -> np.ndarray:
        """Score of every doc for `query` under the ranker that runs (higher is better, 0 = no match)."""
        import numpy as np

        if not self.docs:
            return np.zeros(0, dtype=np.float32)
        if self._semantic is None:
            return self._bm25.scores(tokenize(query))
        semantic = self._semantic.scores(query)
        if self.mode == "semantic":
            return semantic
        return weighted_fusion(self._bm25.scores(tokenize(query)), semantic, self.bm25_weight)

    def search(self, query: str, k: int = 5) -> RankResult:
        """The k best docs for `query`, best first, never a zero-score doc.

        Raises UsageError when k < 1.
        """
        if k < 1:
            raise UsageError(f"top_k must be at least 1, got {k}")
        scores = self.scores(query)
        hits = [(self.docs[i], round(float(scores[i]), 6)) for i in top_k(scores, k)]
        return RankResult(hits=hits, ranker=self.ranker, total=self.total, note=self.note)


_cache_lock = threading.Lock()
_rankers: OrderedDict[tuple[str, str, str], Ranker] = OrderedDict()
_MAX_RANKERS = 4


def cached_ranker(
    docs: Sequence[Doc], mode: str = "hybrid", cache_dir: Path | None = None, *, key: str | None = None
) -> Ranker:
    """A Ranker for `docs`, reused while the docs are unchanged (the gateway calls this per request).

    `key` may be a catalogue hash the caller already has; otherwise the docs' content is hashed.
    """
    cache_key = (key or docs_hash(docs), mode, str(cache_dir) if cache_dir else "")
    with _cache_lock:
        ranker = _rankers.get(cache_key)
        if ranker is not None:
            _rankers.move_to_end(cache_key)
            return ranker
    ranker = Ranker(docs, mode=mode, cache_dir=cache_dir)  # built outside the lock: may take a while
    with _cache_lock:
        _rankers[cache_key] = ranker
        while len(_rankers) > _MAX_RANKERS:
            _rankers.popitem(last=False)
    return ranker
