"""BM25F-lite: one inverted index over a few weighted fields, scored with numpy.

Each field (name, server, description, parameters) is length-normalised on its own and its term
frequency weighted before saturation (BM25F), so a word in a tool's name outweighs the same word deep
in a long description. Idf is the non-negative Lucene form, which stays sane on tiny catalogues.
Impacts (the per-document score of each term) are precomputed at build time, so a query is a few
vectorised adds: well under a millisecond at 10,000 tools.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def length_norm(length: int, avg_length: float, b: float) -> float:
    """The BM25 length factor `1 - b + b * len / avg` (1.0 for an empty field set)."""
    if avg_length <= 0:
        return 1.0
    return 1.0 - b + b * length / avg_length


@dataclass(frozen=True)
class FieldSpec:
    weight: float
    b: float


@dataclass(frozen=True)
class BM25Params:
    """Scoring knobs. Defaults were chosen on a metatool dev split (see evals/README.md)."""

    k1: float = 1.2
    fields: dict[str, FieldSpec] = field(
        default_factory=lambda: {
            "name": FieldSpec(weight=2.5, b=0.3),
            "server": FieldSpec(weight=1.0, b=0.0),
            "text": FieldSpec(weight=1.0, b=0.75),
            "params": FieldSpec(weight=0.3, b=0.75),
        }
    )


class BM25Index:
    """Inverted index over tokenised fields: term -> a slice of (doc ids, impacts) arrays."""

    def __init__(self, docs_fields: Sequence[dict[str, list[str]]], params: BM25Params | None = None):
        import numpy as np

        self.params = params or BM25Params()
        self.n_docs = n = len(docs_fields)
        vocab: dict[str, int] = {}
        # typed arrays, not lists: 700,000 postings at 10,000 tools would be as many Python objects
        term_ids = array("q")
        doc_ids = array("q")
        weights = array("d")
        for name, spec in self.params.fields.items():
            lengths = [len(d.get(name, ())) for d in docs_fields]
            avg = sum(lengths) / n if n else 0.0
            if spec.weight <= 0 or avg == 0:
                continue
            for doc_id, fields in enumerate(docs_fields):
                terms = fields.get(name, ())
                if not terms:
                    continue
                # BM25F: each occurrence adds weight / length factor to the doc's pseudo term frequency
                scale = spec.weight / length_norm(lengths[doc_id], avg, spec.b)
                term_ids.extend(vocab.setdefault(t, len(vocab)) for t in terms)
                doc_ids.extend(array("q", [doc_id]) * len(terms))
                weights.extend(array("d", [scale]) * len(terms))
        self.terms = vocab
        if not term_ids:
            self._docs = np.zeros(0, dtype=np.int32)
            self._impacts = np.zeros(0, dtype=np.float32)
            self._bounds: list[int] = [0] * (len(vocab) + 1)
            return
        keys = np.frombuffer(term_ids, dtype=np.int64) * max(n, 1) + np.frombuffer(doc_ids, dtype=np.int64)
        pairs, inverse = np.unique(keys, return_inverse=True)  # sorted by term, then doc
        tf = np.bincount(inverse, weights=np.frombuffer(weights, dtype=np.float64))
        pair_terms = pairs // max(n, 1)
        df = np.bincount(pair_terms, minlength=len(vocab))
        k1 = self.params.k1
        idfs = np.log1p((n - df + 0.5) / (df + 0.5))  # Lucene idf, never negative: log(1 + (N - df + 0.5) / (df + 0.5))
        self._docs = (pairs % max(n, 1)).astype(np.int32)
        self._impacts = (idfs[pair_terms] * tf * (k1 + 1.0) / (tf + k1)).astype(np.float32)
        self._bounds = np.searchsorted(pair_terms, np.arange(len(vocab) + 1)).tolist()  # term i: [i], [i + 1]

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The built index as arrays (coffer.ranking.snapshot saves them)."""
        import numpy as np

        from coffer.ranking.derived import pack_strings

        return {
            "bm25_terms": pack_strings(list(self.terms)),  # in id order: a dict keeps insertion order
            "bm25_bounds": np.asarray(self._bounds, dtype=np.int64),
            "bm25_docs": self._docs,
            "bm25_impacts": self._impacts,
            "bm25_n": np.asarray([self.n_docs], dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], params: BM25Params | None = None) -> BM25Index:
        """An index from `to_arrays` output. Raises ValueError when the arrays do not fit together."""
        from coffer.ranking.derived import unpack_strings

        terms = unpack_strings(arrays["bm25_terms"])
        bounds = arrays["bm25_bounds"].tolist()
        docs, impacts = arrays["bm25_docs"], arrays["bm25_impacts"]
        if len(bounds) != len(terms) + 1 or len(docs) != len(impacts) or (bounds and bounds[-1] != len(docs)):
            raise ValueError("BM25 snapshot arrays do not fit together")
        index = cls.__new__(cls)
        index.params = params or BM25Params()
        index.n_docs = int(arrays["bm25_n"][0])
        index.terms = dict(zip(terms, range(len(terms)), strict=True))
        index._docs, index._impacts, index._bounds = docs, impacts, bounds
        return index

    def _span(self, term: str) -> tuple[int, int]:
        """Where `term`'s postings are in the doc and impact arrays ((0, 0) for an unknown term)."""
        i = self.terms.get(term)
        return (0, 0) if i is None else (self._bounds[i], self._bounds[i + 1])

    def knows(self, term: str) -> bool:
        """Whether any doc holds `term`."""
        return term in self.terms

    def holding(self, term: str) -> np.ndarray:
        """The ids of the docs that hold `term` (none for an unknown term)."""
        lo, hi = self._span(term)
        return self._docs[lo:hi]

    def idf(self, term: str) -> float:
        """The term's Lucene idf; an unknown term weighs as one held by no doc (the most)."""
        import math

        lo, hi = self._span(term)
        df = hi - lo
        return math.log1p((self.n_docs - df + 0.5) / (df + 0.5))

    def scores(self, query_terms: Sequence[str], weights: dict[str, float] | None = None) -> np.ndarray:
        """Score of every doc for the query (0.0 where no query term occurs); repeats count once, and
        `weights` scales a term's contribution (the query's action, a mapped synonym)."""
        import numpy as np

        out = np.zeros(self.n_docs, dtype=np.float32)
        for term in dict.fromkeys(query_terms):
            lo, hi = self._span(term)
            if hi > lo:
                weight = 1.0 if weights is None else weights.get(term, 1.0)
                out[self._docs[lo:hi]] += self._impacts[lo:hi] * weight  # doc ids are unique within a term
        return out
