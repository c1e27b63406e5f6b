"""Retrieval quality must not silently regress: every ranker on every set against evals/baseline.json.

The default eval run (metatool's fixed 1,000-query sample, livemcpbench, coffer-real) takes a few
seconds. Update the baseline only on purpose: `python -m evals.run --write-baseline`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals import datasets, metrics
from evals.run import BASELINE, RANKERS, run

TOLERANCE = 1.0  # points


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict]:
    rows = run(list(datasets.DATASETS), list(RANKERS), cache_dir=tmp_path_factory.mktemp("vectors"))
    return {(r["dataset"], r["ranker"]): r for r in rows}


def _baseline() -> list[dict]:
    return json.loads(BASELINE.read_text())["results"]


def test_baseline_covers_every_set_and_ranker() -> None:
    assert {(r["dataset"], r["ranker"]) for r in _baseline()} == {(d, m) for d in datasets.DATASETS for m in RANKERS}


@pytest.mark.parametrize("metric", ["mrr@10", "recall@5"])
def test_no_ranker_regresses_below_baseline(results: dict[tuple[str, str], dict], metric: str) -> None:
    drops = []
    for base in _baseline():
        now = results[(base["dataset"], base["ranker"])]
        assert now["queries"] == base["queries"], "the eval data changed: update the baseline on purpose"
        assert now["ran"] == base["ranker"], now.get("ranker_note")
        if now[metric] < base[metric] - TOLERANCE:
            drops.append(f"{base['dataset']}/{base['ranker']} {metric}: {base[metric]} -> {now[metric]}")
    assert not drops, "; ".join(drops)


def test_hybrid_beats_bm25_on_every_set(results: dict[tuple[str, str], dict]) -> None:
    for name in datasets.DATASETS:
        hybrid, bm25 = results[(name, "hybrid")], results[(name, "bm25")]
        assert hybrid["mrr@10"] > bm25["mrr@10"] and hybrid["recall@5"] > bm25["recall@5"], name


def test_metatool_sample_is_fixed_and_disjoint_from_the_dev_split() -> None:
    sample = datasets.load("metatool")
    dev = datasets.load("metatool", part="dev")
    assert len(sample.queries) == datasets.METATOOL_SAMPLE and len(dev.queries) == 2000
    assert not {q.id for q in sample.queries} & {q.id for q in dev.queries}
    assert [q.id for q in sample.queries] == [q.id for q in datasets.load("metatool").queries]


def test_coffer_real_set_is_well_formed() -> None:
    ds = datasets.load("coffer-real")
    names = {t.name for t in ds.tools}
    assert len(names) == 222 and len(ds.queries) >= 150
    assert all(q.groups and all(g <= names for g in q.groups) for q in ds.queries)
    assert len({q.text for q in ds.queries}) == len(ds.queries)


def test_metrics_count_each_gold_group_once() -> None:
    groups = (frozenset({"a", "a2"}), frozenset({"b"}))
    ranked = ["x", "a", "a2", "b"]
    assert metrics.recall_at(ranked, groups, 1) == 0.0
    assert metrics.recall_at(ranked, groups, 3) == 0.5  # a2 repeats a satisfied group
    assert metrics.recall_at(ranked, groups, 10) == 1.0
    assert metrics.hit_at(ranked, groups, 5) == 1.0
    assert metrics.mrr_at(ranked, groups, 10) == 0.5
    ideal = 1 + 1 / 1.584962500721156
    assert metrics.ndcg_at(ranked, groups, 10) == pytest.approx((1 / 1.584962500721156 + 1 / 2.321928094887362) / ideal)


def test_cli_writes_json(tmp_path: Path) -> None:
    from evals.run import main

    out = tmp_path / "r.json"
    assert main(["--suite", "tool_search", "--dataset", "coffer-real", "--ranker", "bm25", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    (row,) = data["results"]
    assert row["dataset"] == "coffer-real" and row["ranker"] == "bm25" and row["queries"] >= 150
    assert set(metrics.METRICS) <= set(row) and row["ms_per_query"] > 0


def test_the_shipped_abstention_is_wrong_on_at_most_2_percent_of_every_set(
    results: dict[tuple[str, str], dict],
) -> None:
    """Issue 51's bound, with the recorded registry as the cache: never more than 2% of a set's own asks
    answered with nothing; and the out-of-vault asks, tuned and held out, do abstain."""
    from evals.find import available

    if not available():
        pytest.skip("needs the recorded registry in ../shared/data/registry")
    for name in datasets.DATASETS:
        row = results[(name, "hybrid")]
        assert row["wrong_abstain"] <= 2.0, (name, row["wrong_abstain"])
        # 2026-12-08, with the brand list: 81-83% tuned, 72-74% held out, 74-83% of the second held-out file
        held = (row["abstain"], row["abstain_heldout"], row["abstain_heldout2"])
        assert held[0] >= 78.0 and held[1] >= 68.0 and held[2] >= 70.0, (name, held)


def test_the_asks_the_recording_can_answer_are_told_from_the_rest(results: dict[tuple[str, str], dict]) -> None:
    """The abstention's reach over the recorded registry: asks for services it names a server for are
    fewer than all (Smartsheet, Typeform are not in it), and they abstain more often than all asks do."""
    from evals.find import available
    from evals.run import answerable

    if not available():
        pytest.skip("needs the recorded registry in ../shared/data/registry")
    rows = {(r["dataset"], r["asks"]): r for r in answerable(["coffer-real"], None)}
    held = rows[("coffer-real", "held-out")]
    assert 0 < held["named"] < held["out_of"] and held["ceiling"] < 100.0
    assert held["abstain"] > results[("coffer-real", "hybrid")]["abstain_heldout"]
