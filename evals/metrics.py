"""Retrieval metrics over gold *groups*: a group is a set of tools any one of which satisfies a need.

Most queries have one group per gold tool. livemcpbench adds groups with several equivalent tools
(the same bare tool on several servers). A group counts once, at its first hit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _first_hits(ranked: Sequence[str], groups: Sequence[frozenset[str]], k: int) -> list[int]:
    """0-based ranks (within the top k) where a not-yet-satisfied group is first hit."""
    open_groups = list(range(len(groups)))
    hits: list[int] = []
    for rank, name in enumerate(ranked[:k]):
        for g in open_groups:
            if name in groups[g]:
                hits.append(rank)
                open_groups.remove(g)
                break
    return hits


def recall_at(ranked: Sequence[str], groups: Sequence[frozenset[str]], k: int) -> float:
    return len(_first_hits(ranked, groups, k)) / len(groups) if groups else 0.0


def hit_at(ranked: Sequence[str], groups: Sequence[frozenset[str]], k: int) -> float:
    return 1.0 if _first_hits(ranked, groups, k) else 0.0


def mrr_at(ranked: Sequence[str], groups: Sequence[frozenset[str]], k: int) -> float:
    hits = _first_hits(ranked, groups, k)
    return 1.0 / (hits[0] + 1) if hits else 0.0


def ndcg_at(ranked: Sequence[str], groups: Sequence[frozenset[str]], k: int) -> float:
    dcg = sum(1.0 / math.log2(r + 2) for r in _first_hits(ranked, groups, k))
    ideal = sum(1.0 / math.log2(r + 2) for r in range(min(len(groups), k)))
    return dcg / ideal if ideal else 0.0


METRICS = ("recall@1", "recall@5", "recall@10", "hit@5", "mrr@10", "ndcg@10")


def score_query(ranked: Sequence[str], groups: Sequence[frozenset[str]]) -> dict[str, float]:
    return {
        "recall@1": recall_at(ranked, groups, 1),
        "recall@5": recall_at(ranked, groups, 5),
        "recall@10": recall_at(ranked, groups, 10),
        "hit@5": hit_at(ranked, groups, 5),
        "mrr@10": mrr_at(ranked, groups, 10),
        "ndcg@10": ndcg_at(ranked, groups, 10),
    }
