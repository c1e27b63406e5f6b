"""Every tuned ranking rule keeps earning its place: switched off alone, it costs at least 0.5 point
(Recall@5 or MRR@10) on some eval set, on the default ranker or on the BM25 fallback.

A rule that stops earning fails here: remove it (evals/README.md, "Ablation") rather than keep a
switch that moves nothing. About 35 s: both suites, every set, once per rule and ranker.
"""

from __future__ import annotations

from typing import Any

import pytest

from coffer.ranking.rules import Rules, ablated, current
from evals.ablate import THRESHOLD, ablate, verdict


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    return {ranker: ablate(ranker) for ranker in ("hybrid", "bm25")}


def test_every_rule_earns_somewhere(reports: dict[str, dict[str, Any]]) -> None:
    idle = []
    for rule in Rules.names():
        best = min(
            d
            for report in reports.values()
            for row in report["rows"]
            if row["rule"] == rule
            for (where, _), d in row["deltas"].items()
            if not where.endswith("/steps")
        )
        if best > -THRESHOLD:
            idle.append(f"{rule} (at most {-best:.1f} point)")
    assert not idle, "rules that earn less than 0.5 point on every set and ranker: " + ", ".join(idle)


def test_the_switches_really_switch() -> None:
    assert current() == Rules()
    with ablated("glossary", "implied_needs") as rules:
        assert current() is rules and not rules.glossary and not rules.implied_needs and rules.vocabulary
    assert current() == Rules()


def test_verdicts_follow_the_rule() -> None:
    assert verdict({("a", "recall@5"): -0.5, ("b", "recall@5"): 0.4}) == "keep"
    assert verdict({("a", "recall@5"): -0.4, ("b", "mrr@10"): 0.4}) == "remove (no effect of 0.5)"
    assert verdict({("a", "recall@5"): -0.9, ("b", "mrr@10"): 0.6}) == "remove (earns and costs)"
    assert verdict({("a", "recall@5"): 0.7}) == "remove (only costs)"
    assert verdict({("a", "recall@5"): -0.9, ("a/steps", "recall@5"): 1.1}) == "keep"  # the step view is not judged
