"""`Ranker`: build the indexes for one doc list once, then answer queries in about a millisecond."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from coffer.errors import UsageError
from coffer.ranking.bm25 import BM25Index, BM25Params
from coffer.ranking.docs import Doc, doc_fields, docs_hash, embed_chunks, embed_text
from coffer.ranking.embed import MODEL_ID as WORDLLAMA_ID
from coffer.ranking.embed import EmbeddingModel, ModelUnavailable
from coffer.ranking.fuse import BM25_WEIGHT, max_normalise, minmax_normalise, top_k, weighted_fusion
from coffer.ranking.implied import implied_queries
from coffer.ranking.languages import translate
from coffer.ranking.pieces import PieceCache, learnt_file, load_learnt, save_learnt
from coffer.ranking.snapshot import load as snapshot_load
from coffer.ranking.snapshot import save as snapshot_save
from coffer.ranking.snapshot import snapshot_path
from coffer.ranking.tokenize import expand_abbreviations, save_stem_cache, tokenize, use_stem_cache
from coffer.ranking.vocabulary import Rewrite, name_families, rewrite, split_steps

if TYPE_CHECKING:
    import numpy as np

    from coffer.ranking.embed import Embedder

MODES: tuple[str, ...] = ("hybrid", "bm25", "semantic")
# Weight of a doc's best single sentence against its whole-text vector in the semantic score.
CHUNK_WEIGHT = 0.5
# With the optional MiniLM model: hybrid = 0.2 BM25 + 0.3 wordllama + 0.5 MiniLM (each normalised as in
# fuse.py), chosen on the metatool dev split only (see evals/README.md); "semantic" drops the BM25 part.
MINILM_BM25_WEIGHT = 0.2
MINILM_SHARE = 0.625  # of the semantic part: 0.5 / (0.3 + 0.5)
# Where the best tool for an implied need goes when it is not already above that place (0-based).
IMPLIED_SLOT = 2
NAME_COVER_BONUS = 0.05
NAME_COVER_CANDIDATES = 30
# ... and one whose name starts with an action of another family than the query's loses this much
# (vocabulary.VERB_FAMILIES); chosen between 0.06 and 0.1 on every set, see evals/README.md
OTHER_ACTION_PENALTY = 0.1


def release_freed_memory() -> None:
    """Hand the build's freed scratch memory back to the OS (glibc keeps it otherwise: at 10,000 tools
    about a quarter of the process's growth is tokenizer and postings scratch that is already free)."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):  # musl and other libcs have no malloc_trim
        import ctypes  # here, not at import: 14 ms of every `coffer search` start

        ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass(frozen=True)
class RankResult:
    """Ranked hits, best first; `ranker` says what really ran ("bm25" when the model was missing)."""

    hits: list[tuple[Doc, float]]
    ranker: str
    total: int
    note: str | None = None


@dataclass
class _SemanticIndex:
    model: Embedder
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


@dataclass
class _DenseIndex:
    """Whole-text vectors from the optional heavier model (no sentence vectors: no gain on the dev split)."""

    model: Embedder
    matrix: np.ndarray

    def scores(self, query: str) -> np.ndarray:
        import numpy as np

        qv = self.model.embed([expand_abbreviations(query)])[0]
        return np.einsum("ij,j->i", self.matrix, qv)


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
    author writes) the English is added to it.
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
        split_steps: bool = True,
        model: Embedder | None = None,
        docs_key: str | None = None,
    ):
        from coffer.ranking.minilm import requested_backend

        if mode not in MODES:
            raise UsageError(f"unknown ranker {mode!r}: choose one of {', '.join(MODES)}")
        backend = requested_backend(embeddings)
        self.docs: list[Doc] = list(docs)
        self.mode = mode
        self.implied_needs = implied_needs
        self.english_docs = english_docs
        self.split_steps = split_steps
        self.note: str | None = None
        self._model = model  # the semantic model; None: the bundled wordllama one (embed.get_model)
        self.cache_dir = cache_dir
        if cache_dir is not None:
            use_stem_cache(cache_dir / "stems.json")
        # a name's terms and its leading action's families, filled on use (only leading candidates need them)
        self._name_terms: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self._semantic: _SemanticIndex | None = None
        self._dense: _DenseIndex | None = None
        snap_path = None
        if cache_dir is not None:
            sem_id = model.model_id if model is not None else WORDLLAMA_ID
            content = docs_key or docs_hash(self.docs)  # `docs_key`: that hash, when the caller has it already
            parts = [content, mode, backend, sem_id, repr(bm25_params or BM25Params())]
            snap_path = snapshot_path(cache_dir, parts)
        saved = snapshot_load(snap_path) if snap_path is not None else None
        # True when the indexes came from a snapshot (coffer.ranking.snapshot) rather than a build
        self.from_snapshot = saved is not None and self._restore(saved, mode, backend, bm25_params)
        if not self.from_snapshot:
            self._bm25 = BM25Index([doc_fields(d) for d in self.docs], bm25_params)
            if cache_dir is not None:
                save_stem_cache()
            if mode != "bm25":
                self._semantic = self._build_semantic(cache_dir)
                if self._semantic is not None and backend != "wordllama":
                    self._dense = self._build_dense(cache_dir, required=backend == "minilm")
            if snap_path is not None:
                snapshot_save(snap_path, self._arrays())
            release_freed_memory()
        default_weight = MINILM_BM25_WEIGHT if self._dense is not None else BM25_WEIGHT
        self.bm25_weight = default_weight if bm25_weight is None else bm25_weight
        self.ranker = mode if self._semantic is not None else "bm25"
        if self._dense is not None:
            self.ranker = f"{mode}-minilm"

    def _arrays(self) -> dict[str, np.ndarray]:
        """What a snapshot holds: the BM25 index, and the vectors of whichever models ran."""
        import numpy as np

        arrays = self._bm25.to_arrays()
        if self._semantic is not None:
            arrays.update(
                sem_matrix=self._semantic.matrix,
                sem_owners=self._semantic.owners,
                sem_starts=self._semantic.starts,
                sem_model=np.frombuffer(self._semantic.model.model_id.encode(), dtype=np.uint8),
            )
            pieces = getattr(self._semantic.model, "pieces", None)
            if pieces is not None:
                arrays.update(pieces.to_arrays())
        if self._dense is not None:
            arrays.update(
                dense_matrix=self._dense.matrix,
                dense_model=np.frombuffer(self._dense.model.model_id.encode(), dtype=np.uint8),
            )
        return arrays

    def _restore(self, saved: dict[str, np.ndarray], mode: str, backend: str, params: BM25Params | None) -> bool:
        """Take a snapshot's indexes; False (build afresh) when it lacks a part this ranker would build,
        holds vectors of another model, or does not fit the docs."""
        from coffer.ranking.embed import get_model
        from coffer.ranking.minilm import get_minilm, installed

        n = len(self.docs)
        try:
            bm25 = BM25Index.from_arrays(saved, params)
            if bm25.n_docs != n:
                return False
            semantic = dense = None
            if mode != "bm25":
                if "sem_matrix" not in saved:
                    return False  # the model was missing when it was saved: try it again
                model = self._model or get_model()
                if saved["sem_model"].tobytes().decode() != model.model_id or saved["sem_matrix"].shape[1] != model.dim:
                    return False
                pieces = getattr(model, "pieces", None)
                if pieces is not None:
                    pieces.update_from_arrays(saved)
                    self._load_query_pieces(pieces, model.model_id)
                semantic = _SemanticIndex(
                    model=model,
                    matrix=saved["sem_matrix"],
                    n_docs=n,
                    owners=saved["sem_owners"],
                    starts=saved["sem_starts"],
                )
                wants_dense = backend == "minilm" or (backend == "auto" and installed())
                if wants_dense:
                    if "dense_matrix" not in saved:
                        return False
                    dense_model = get_minilm()
                    if saved["dense_model"].tobytes().decode() != dense_model.model_id:
                        return False
                    dense = _DenseIndex(model=dense_model, matrix=saved["dense_matrix"])
        except (KeyError, ValueError, IndexError, ModelUnavailable):
            return False
        self._bm25, self._semantic, self._dense = bm25, semantic, dense
        return True

    def _build_semantic(self, cache_dir: Path | None) -> _SemanticIndex | None:
        import numpy as np

        from coffer.ranking.embed import cached_vectors, get_model

        texts = [embed_text(d) for d in self.docs]
        owners: list[int] = []
        for i, doc in enumerate(self.docs):
            extra = embed_chunks(doc)
            texts.extend(extra)
            owners.extend([i] * len(extra))
        try:  # the weights load first; the tokenizer when a text first needs it (either may fail)
            model = self._model or get_model()
            vectors = cached_vectors(model, texts, cache_dir)
            if cache_dir is not None and isinstance(model, EmbeddingModel):
                model.learn_pieces(texts, cache_dir)  # a restart's queries need no tokenizer (coffer.ranking.pieces)
                self._load_query_pieces(model.pieces, model.model_id)
        except ModelUnavailable as exc:
            self.note = f"semantic model unavailable, ranked with BM25 only: {exc}"
            return None
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

    def _build_dense(self, cache_dir: Path | None, required: bool) -> _DenseIndex | None:
        import numpy as np

        from coffer.ranking.embed import cached_vectors
        from coffer.ranking.minilm import get_minilm, installed

        if not required and not installed():
            return None
        try:
            model = get_minilm()
        except ModelUnavailable as exc:
            self.note = f"MiniLM unavailable, ranked with the bundled wordllama model: {exc}"
            return None
        vectors = cached_vectors(model, [embed_text(d) for d in self.docs], cache_dir)
        return _DenseIndex(model=model, matrix=np.ascontiguousarray(vectors))

    def _query_pieces_path(self, model_id: str) -> Path | None:
        return learnt_file(self.cache_dir, model_id) if self.cache_dir is not None else None

    def _load_query_pieces(self, pieces: PieceCache, model_id: str) -> None:
        path = self._query_pieces_path(model_id)
        if path is not None:
            load_learnt(pieces, path)

    def save_query_words(self) -> None:
        """Keep what this process's queries taught, for the next process: their word stems (Snowball
        loads 40 language modules for one unknown word) and word pieces (the tokenizer). `coffer
        search` calls this, so a new word costs those once per vault, not once per run."""
        if self.cache_dir is None:
            return
        save_stem_cache()
        semantic = self._semantic
        pieces: PieceCache | None = getattr(semantic.model, "pieces", None) if semantic is not None else None
        path = self._query_pieces_path(semantic.model.model_id) if semantic is not None else None
        if pieces is not None and path is not None:
            save_learnt(pieces, path)

    @property
    def total(self) -> int:
        return len(self.docs)

    def scores(self, query: str) -> np.ndarray:
        """Score of every doc for `query` under the ranker that runs (higher is better, 0 = no match)."""
        import numpy as np

        if not self.docs:
            return np.zeros(0, dtype=np.float32)
        rw = rewrite(query)  # developer vocabulary, action weight (coffer.ranking.vocabulary)
        sem_index, dense_index = self._semantic, self._dense  # read once: a failure below drops them
        if sem_index is not None:
            try:
                semantic = sem_index.scores(rw.text)
                dense = dense_index.scores(rw.text) if dense_index is not None else None
            except ModelUnavailable as exc:  # the tokenizer, loaded on first need, failed: BM25 from now on
                self._semantic = self._dense = sem_index = None
                self.ranker = "bm25"
                self.note = f"semantic model unavailable, ranked with BM25 only: {exc}"
        if sem_index is None:
            return self._bm25.scores(rw.terms, rw.weights)
        if dense is not None:
            semantic = (1.0 - MINILM_SHARE) * minmax_normalise(semantic) + MINILM_SHARE * minmax_normalise(dense)
            if self.mode == "semantic":
                return semantic
            bm25 = max_normalise(self._bm25.scores(rw.terms, rw.weights))
            return self._name_fit(self.bm25_weight * bm25 + (1.0 - self.bm25_weight) * semantic, rw)
        if self.mode == "semantic":
            return semantic
        return self._name_fit(weighted_fusion(self._bm25.scores(rw.terms, rw.weights), semantic, self.bm25_weight), rw)

    def _name_fit(self, scores: np.ndarray, rw: Rewrite) -> np.ndarray:
        """Among the leading candidates, a tool whose whole name the query explains ("open a PR" covers
        create_pull_request, not create_pull_request_review) gets `NAME_COVER_BONUS`, and one whose name
        starts with an action of another family than the query's (update_pull_request_branch for "open
        a PR for my branch") loses `OTHER_ACTION_PENALTY`."""
        if not len(scores):
            return scores
        wanted = set(rw.terms)
        out = scores.copy()
        for i in top_k(scores, NAME_COVER_CANDIDATES):
            fit = self._name_terms.get(i)
            if fit is None:
                name = self.docs[i].name
                fit = self._name_terms[i] = (frozenset(tokenize(name)), name_families(name))
            terms, verb_families = fit
            if terms and terms <= wanted:
                out[i] += NAME_COVER_BONUS
            if rw.families and verb_families and not verb_families & rw.families:
                out[i] -= OTHER_ACTION_PENALTY
        return out

    def search(self, query: str, k: int = 5) -> RankResult:
        """The k best docs for `query`, best first, never a zero-score doc.

        A request of several actions ("find X, then write a report to out.pdf") is ranked per action
        and the lists are merged turn by turn, so every action gets a place in the k
        (`coffer.ranking.vocabulary.split_steps`); a query in another language is read through the
        glossary first (`coffer.ranking.languages`). Raises UsageError when k < 1.
        """
        if k < 1:
            raise UsageError(f"top_k must be at least 1, got {k}")
        query = translate(query, keep_original=not self.english_docs)  # another language, read in English
        needs = implied_queries(query) if self.implied_needs and k > 1 else []
        steps = split_steps(query) if self.split_steps else [query]
        if len(steps) > 1:
            order, values = self._merged_steps(query, steps, k)
        else:
            scores = self.scores(query)
            order = top_k(scores, k + len(needs))
            values = {i: float(scores[i]) for i in order}
        for n, need in enumerate(needs):
            self._place_implied(need, min(IMPLIED_SLOT + n, k - 1), order, values)
        hits = [(self.docs[i], round(values[i], 6)) for i in order[:k]]
        return RankResult(hits=hits, ranker=self.ranker, total=self.total, note=self.note)

    def _merged_steps(self, query: str, steps: list[str], k: int) -> tuple[list[int], dict[int, float]]:
        """Round robin over the steps' own rankings (each normalised to its best), duplicates skipped;
        a score never rises down the list."""
        import numpy as np

        lists: list[list[tuple[int, float]]] = []
        for step in [query, *steps]:  # the whole request first: it keeps the context a step may lack
            scores = self.scores(step)
            best = float(np.max(scores)) if len(scores) else 0.0
            lists.append([(i, float(scores[i]) / best if best > 0 else 0.0) for i in top_k(scores, k)])
        taken: dict[int, float] = {}
        depth = 0
        while len(taken) < k and any(depth < len(items) for items in lists):
            for items in lists:
                if depth < len(items) and items[depth][0] not in taken and len(taken) < k:
                    taken[items[depth][0]] = items[depth][1]
            depth += 1
        order, values, ceiling = [], {}, 1.0
        for i, value in taken.items():
            ceiling = min(ceiling, value)
            order.append(i)
            values[i] = ceiling
        return order, values

    def _place_implied(self, need: str, slot: int, order: list[int], values: dict[int, float]) -> None:
        """Move the best doc for `need` up to `slot` unless it already ranks there or higher.

        It takes the place, and the score, of the hit it moves down, so scores stay sorted.
        """
        need_scores = self.scores(need)
        best = top_k(need_scores, 1)
        if not best or best[0] in order[: slot + 1]:
            return
        doc = best[0]
        if doc in order:
            order.remove(doc)
        slot = min(slot, len(order))
        if slot < len(order):
            values[doc] = values[order[slot]]
        else:  # fewer hits than the slot: goes last, never above the hit before it
            values[doc] = min(values[order[-1]], float(need_scores[doc])) if order else float(need_scores[doc])
        order.insert(slot, doc)
