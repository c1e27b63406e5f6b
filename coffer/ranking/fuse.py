"""Score normalisation, weighted fusion and a deterministic top-k.

BM25 and cosine scores live on different scales, and unweighted fusion loses to embeddings alone on
vague queries, so each is normalised per query and mixed with a weight: BM25 by its maximum (0 stays
0, so "no lexical match" means no lexical credit), cosine by min-max over the catalogue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Weight of BM25 in hybrid scores; chosen on the eval sets (see evals/README.md), not per query.
BM25_WEIGHT = 0.4


def max_normalise(scores: np.ndarray) -> np.ndarray:
    """Scale non-negative scores into [0, 1] by their maximum; all-zero stays all-zero."""
    top = float(scores.max()) if scores.size else 0.0
    return scores / top if top > 0 else scores * 0.0


def minmax_normalise(scores: np.ndarray) -> np.ndarray:
    """Map scores onto [0, 1], from the lowest (at most 0: a cosine of 0 is unrelated) to the highest. A
    small vault whose every tool is near the query (the time server's two) keeps their differences as
    they are instead of stretching them over the whole range. With no spread (one doc, or identical docs)
    keep the positive raw scores, so a lone relevant doc is still found and an empty query scores nothing."""
    import numpy as np

    if not scores.size:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    if hi - lo > 1e-6:
        lo = min(lo, 0.0)
        return (scores - lo) / (hi - lo)
    return np.clip(scores, 0.0, 1.0)


def weighted_shares(
    bm25: np.ndarray, semantic: np.ndarray, bm25_weight: float = BM25_WEIGHT
) -> tuple[np.ndarray, np.ndarray]:
    """The two terms of the hybrid score, a convex mix of max-normalised BM25 and min-max-normalised
    cosine scores, kept apart (the console shows them as a result's score parts)."""
    return bm25_weight * max_normalise(bm25), (1.0 - bm25_weight) * minmax_normalise(semantic)


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k best positive scores, best first; ties broken by index (stable, deterministic).

    Zero and negative scores are never returned: a tool that matched nothing is not a match.
    """
    import numpy as np

    if k <= 0 or not scores.size:
        return []
    positive = np.flatnonzero(scores > 0)
    if positive.size > k:
        # everything tied with the k-th best is kept, so the cut does not depend on partition order
        kth = np.partition(scores[positive], positive.size - k)[positive.size - k]
        positive = positive[scores[positive] >= kth]
    order = np.lexsort((positive, -scores[positive]))
    return [int(i) for i in positive[order][:k]]
