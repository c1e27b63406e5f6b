"""BM25F-lite: one inverted index over a few weighted fields, scored with numpy.

Each field (name, server, description, parameters) is length-normalised on its own and its term
frequency weighted before saturation (BM25F), so a word in a tool's name outweighs the same word deep
in a long description. Idf is the non-negative Lucene form, which stays sane on tiny catalogues.
Impacts (the per-document score of each term) are precomputed at build time, so a query is a few
vectorised adds: well under a millisecond at 10,000 tools.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def idf(df: int, n_docs: int) -> float:
    """Lucene idf: `log(1 + (N - df + 0.5) / (df + 0.5))`, never negative."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def length_norm(length: int, avg_length: float, b: float) -> float:
    """The BM25 length factor `1 - b + b * len / avg` (1.0 for an empty field set)."""
    if avg_length <= 0:
        return 1.0
    return 1.0 - b + b * length / avg_length


def saturate(tf: float, k1: float) -> float:
    """BM25 term-frequency saturation `tf * (k1 + 1) / (tf + k1)`."""
    return tf * (k1 + 1.0) / (tf + k1)


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
    """Inverted index of term -> (doc ids, impacts) over tokenised fields."""

    def __init__(self, docs_fields: Sequence[dict[str, list[str]]], params: BM25Params | None = None):
        import numpy as np

        self.params = params or BM25Params()
        self.n_docs = len(docs_fields)
        specs = self.params.fields
        avg = {
            name: (sum(len(d.get(name, ())) for d in docs_fields) / self.n_docs if self.n_docs else 0.0)
            for name in specs
        }
        # pseudo term frequency per doc: sum over fields of weight * tf / length factor (BM25F)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for doc_id, fields in enumerate(docs_fields):
            pseudo: dict[str, float] = {}
            for name, spec in specs.items():
                terms = fields.get(name, ())
                if not terms or spec.weight <= 0:
                    continue
                scale = spec.weight / length_norm(len(terms), avg[name], spec.b)
                for term, tf in Counter(terms).items():
                    pseudo[term] = pseudo.get(term, 0.0) + tf * scale
            for term, tf in pseudo.items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(doc_id)
                tfs.append(tf)
        k1 = self.params.k1
        self._index: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, (ids, tfs) in postings.items():
            weight = idf(len(ids), self.n_docs)
            tf_arr = np.asarray(tfs, dtype=np.float64)
            impacts = weight * tf_arr * (k1 + 1.0) / (tf_arr + k1)
            self._index[term] = (np.asarray(ids, dtype=np.int32), impacts.astype(np.float32))

    @property
    def vocabulary_size(self) -> int:
        return len(self._index)

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """Score of every doc for the query (0.0 where no query term occurs); repeats count once."""
        import numpy as np

        out = np.zeros(self.n_docs, dtype=np.float32)
        for term in dict.fromkeys(query_terms):
            hit = self._index.get(term)
            if hit is not None:
                ids, impacts = hit
                out[ids] += impacts  # ids are unique within a posting list, so fancy += is exact
        return out
