"""The indexes a Ranker searches: built once per doc list, restored from a snapshot, saved as one.

`Indexes` holds the BM25F index, the semantic index (the bundled wordllama model: one vector per doc
plus its long docs' sentence vectors) and, when the optional MiniLM model runs, a second dense index.
It answers raw scores per doc; what a query means (coffer.ranking.vocabulary, .languages) and how the
scores are fused and reranked (coffer.ranking.ranker, .rerank) are not its business.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from coffer.ranking.bm25 import BM25Index, BM25Params
from coffer.ranking.docs import Doc, SavedDocs, doc_fields, docs_hash, embed_chunks, embed_text, lead_word
from coffer.ranking.embed import MODEL_ID as WORDLLAMA_ID
from coffer.ranking.embed import EmbeddingModel, ModelUnavailable
from coffer.ranking.pieces import PieceCache, learnt_file, load_learnt, save_learnt
from coffer.ranking.snapshot import load as snapshot_load
from coffer.ranking.snapshot import save as snapshot_save
from coffer.ranking.snapshot import snapshot_path
from coffer.ranking.tokenize import expand_abbreviations, forget_stems, save_stem_cache, use_stem_cache

if TYPE_CHECKING:
    import numpy as np

    from coffer.ranking.embed import Embedder

# Weight of a doc's best single sentence against its whole-text vector in the semantic score.
CHUNK_WEIGHT = 0.5
DEPRECATED = 0.8  # the share of its score a doc that says it is deprecated keeps
_DEPRECATED_RE = re.compile(r"\bdeprecated\b", re.IGNORECASE)
_NAME_SEP = "\0"  # between the doc ids and names a snapshot keeps (`Ranker.saved` reads them back)


def standing_of(docs: Sequence[Doc]) -> np.ndarray | None:
    """Per doc, the factor on its score: DEPRECATED where its own text says it is deprecated (a server
    keeps an old tool beside its replacement: filesystem's read_file beside read_text_file); None when
    no doc says so. Kept in the snapshot: a restored index needs no texts."""
    import numpy as np

    marks = [bool(_DEPRECATED_RE.search(d.text[:300])) for d in docs]
    if not any(marks):
        return None
    return np.where(np.asarray(marks), DEPRECATED, 1.0).astype(np.float32)


def saved_docs(saved: dict[str, np.ndarray]) -> SavedDocs | None:
    """The docs (ids, names and the words their texts open with; no texts) a snapshot was built over;
    None when it kept none."""
    from coffer.ranking.derived import unpack_strings

    if any(key not in saved for key in ("doc_ids", "doc_names", "doc_leads")):
        return None
    ids, names, leads = (unpack_strings(saved[key], _NAME_SEP) for key in ("doc_ids", "doc_names", "doc_leads"))
    return SavedDocs(ids, names, leads) if len(ids) == len(names) == len(leads) else None


def release_freed_memory() -> None:
    """Hand the build's freed scratch memory back to the OS (glibc keeps it otherwise: at 10,000 tools
    about a quarter of the process's growth is tokenizer and postings scratch that is already free)."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):  # musl and other libcs have no malloc_trim
        import ctypes  # here, not at import: 14 ms of every `coffer search` start

        ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass
class SemanticIndex:
    model: Embedder
    matrix: np.ndarray  # one unit vector per doc, then the extra sentence vectors of long docs
    n_docs: int
    owners: np.ndarray  # doc index of each run of sentence rows
    starts: np.ndarray  # first sentence row (relative) of each run, for maximum.reduceat
    chunk_weight: float = CHUNK_WEIGHT

    def scores(self, query: str) -> np.ndarray:
        import numpy as np

        qv = self.model.embed([expand_abbreviations(query)])[0]
        # einsum, not BLAS: a single-threaded mat-vec is faster and steadier on a busy machine than
        # BLAS threads, and its result does not depend on the thread count.
        sims = np.einsum("ij,j->i", self.matrix, qv)
        full = sims[: self.n_docs]
        if not self.owners.size or not self.chunk_weight:
            return full
        best = full.copy()
        per_doc = np.maximum.reduceat(sims[self.n_docs :], self.starts)
        best[self.owners] = np.maximum(best[self.owners], per_doc)
        return (1.0 - self.chunk_weight) * full + self.chunk_weight * best


@dataclass
class DenseIndex:
    """Whole-text vectors from the optional heavier model (no sentence vectors: no gain on the dev split)."""

    model: Embedder
    matrix: np.ndarray

    def scores(self, query: str) -> np.ndarray:
        import numpy as np

        qv = self.model.embed([expand_abbreviations(query)])[0]
        return np.einsum("ij,j->i", self.matrix, qv)


def saved_index(
    cache_dir: Path,
    docs_key: str,
    mode: str,
    backend: str,
    model: Embedder | None = None,
    bm25_params: BM25Params | None = None,
) -> Path:
    """Where the snapshot of these docs' indexes (keyed by `docs_key`) under these settings is kept."""
    sem_id = model.model_id if model is not None else WORDLLAMA_ID
    return snapshot_path(cache_dir, [docs_key, mode, backend, sem_id, repr(bm25_params or BM25Params())])


class Indexes:
    """BM25 always; the semantic index unless `mode` is "bm25" (None when the model cannot load, with
    `note` saying why); the MiniLM index when `backend` asks for it. With `cache_dir`, doc vectors are
    cached by content and the whole set is snapshotted (`from_snapshot` says it was restored)."""

    def __init__(
        self,
        docs: Sequence[Doc],
        mode: str,
        backend: str,
        cache_dir: Path | None,
        bm25_params: BM25Params | None = None,
        model: Embedder | None = None,
        docs_key: str | None = None,
        chunk_weight: float = CHUNK_WEIGHT,
    ) -> None:
        self.docs = docs
        self.cache_dir = cache_dir
        self.note: str | None = None
        self.chunk_weight = chunk_weight
        self._model = model  # the semantic model; None: the bundled wordllama one (embed.get_model)
        self.semantic: SemanticIndex | None = None
        self.dense: DenseIndex | None = None
        self.standing: np.ndarray | None = None  # `standing_of` the docs
        if cache_dir is not None:
            use_stem_cache(cache_dir / "stems.json")
        snap_path = None
        if cache_dir is not None:
            content = docs_key or docs_hash(docs)  # `docs_key`: that hash, when the caller has it already
            snap_path = saved_index(cache_dir, content, mode, backend, model, bm25_params)
        saved = snapshot_load(snap_path) if snap_path is not None else None
        self.from_snapshot = saved is not None and self._restore(saved, mode, backend, bm25_params)
        if not self.from_snapshot:
            self.standing = standing_of(docs)
            self.bm25 = BM25Index([doc_fields(d) for d in docs], bm25_params)
            if cache_dir is not None:
                save_stem_cache()
            if mode != "bm25":
                self.semantic = self._build_semantic()
                if self.semantic is not None and backend != "wordllama":
                    self.dense = self._build_dense(required=backend == "minilm")
            if snap_path is not None:
                snapshot_save(snap_path, self.arrays())
            release_freed_memory()

    def drop_models(self, why: str) -> None:
        """The tokenizer, loaded on first need, failed: BM25 alone from now on."""
        self.semantic = self.dense = None
        self.note = f"semantic model unavailable, ranked with BM25 only: {why}"

    def arrays(self) -> dict[str, np.ndarray]:
        """What a snapshot holds: the BM25 index, and the vectors of whichever models ran."""
        import numpy as np

        from coffer.ranking.derived import pack_strings

        arrays = self.bm25.to_arrays()
        ids, names = [d.id for d in self.docs], [d.name for d in self.docs]
        leads = self.docs.leads if isinstance(self.docs, SavedDocs) else [lead_word(d.text) for d in self.docs]
        if not any(_NAME_SEP in s for s in (*ids, *names)):
            arrays.update(
                doc_ids=pack_strings(ids, _NAME_SEP),
                doc_names=pack_strings(names, _NAME_SEP),
                doc_leads=pack_strings(leads, _NAME_SEP),
            )
        if self.standing is not None:
            arrays["standing"] = self.standing
        if self.semantic is not None:
            arrays.update(
                sem_matrix=self.semantic.matrix,
                sem_owners=self.semantic.owners,
                sem_starts=self.semantic.starts,
                sem_model=np.frombuffer(self.semantic.model.model_id.encode(), dtype=np.uint8),
            )
            if isinstance(self.semantic.model, EmbeddingModel):
                arrays.update(self.semantic.model.pieces.to_arrays())
        if self.dense is not None:
            arrays.update(
                dense_matrix=self.dense.matrix,
                dense_model=np.frombuffer(self.dense.model.model_id.encode(), dtype=np.uint8),
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
                if isinstance(model, EmbeddingModel):
                    model.pieces.update_from_arrays(saved)
                    self._load_query_pieces(model.pieces, model.model_id)
                semantic = SemanticIndex(
                    model, saved["sem_matrix"], n, saved["sem_owners"], saved["sem_starts"], self.chunk_weight
                )
                if backend == "minilm" or (backend == "auto" and installed()):
                    if "dense_matrix" not in saved:
                        return False
                    dense_model = get_minilm()
                    if saved["dense_model"].tobytes().decode() != dense_model.model_id:
                        return False
                    dense = DenseIndex(model=dense_model, matrix=saved["dense_matrix"])
        except (KeyError, ValueError, IndexError, ModelUnavailable):
            return False
        standing = saved.get("standing")
        if standing is not None and standing.shape != (n,):
            return False
        self.bm25, self.semantic, self.dense, self.standing = bm25, semantic, dense, standing
        return True

    def _build_semantic(self) -> SemanticIndex | None:
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
            vectors = cached_vectors(model, texts, self.cache_dir)
            if self.cache_dir is not None and isinstance(model, EmbeddingModel):
                model.learn_pieces(texts, self.cache_dir)  # a restart's queries need no tokenizer (.pieces)
                self._load_query_pieces(model.pieces, model.model_id)
        except ModelUnavailable as exc:
            self.note = f"semantic model unavailable, ranked with BM25 only: {exc}"
            return None
        owner_arr = np.asarray(owners, dtype=np.int64)
        if owner_arr.size:
            run_starts = np.flatnonzero(np.r_[True, owner_arr[1:] != owner_arr[:-1]])
        else:
            run_starts = np.zeros(0, dtype=np.int64)
        matrix = np.ascontiguousarray(vectors)
        return SemanticIndex(model, matrix, len(self.docs), owner_arr[run_starts], run_starts, self.chunk_weight)

    def _build_dense(self, required: bool) -> DenseIndex | None:
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
        vectors = cached_vectors(model, [embed_text(d) for d in self.docs], self.cache_dir)
        return DenseIndex(model=model, matrix=np.ascontiguousarray(vectors))

    def _load_query_pieces(self, pieces: PieceCache, model_id: str) -> None:
        if self.cache_dir is not None:
            load_learnt(pieces, learnt_file(self.cache_dir, model_id))

    def save_query_words(self) -> None:
        """Keep what this process's queries taught, for the next process: their word stems (Snowball
        loads 40 language modules for one unknown word) and word pieces (the tokenizer)."""
        if self.cache_dir is None:
            return
        save_stem_cache()
        model = self.semantic.model if self.semantic is not None else None
        if isinstance(model, EmbeddingModel):
            save_learnt(model.pieces, learnt_file(self.cache_dir, model.model_id))


DERIVED_FROM_TEXT = ("index", "vectors", "stems.json")  # under the cache dir (pieces: the model's and queries')


def forget_derived(cache_dir: Path) -> None:
    """Remove every cache built from texts (ranker snapshots, vectors, learned word pieces, stems), so
    nothing of a text that was removed stays on disk; each is rebuilt on demand from what remains."""
    import shutil

    forget_stems()
    for name in DERIVED_FROM_TEXT:
        path = cache_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
