"""`python -m evals.ablate`: every tuned ranking rule switched off in turn, on every eval set.

Each rule of `coffer.ranking.rules.Rules` is switched off alone (`rules.ablated`), and the tool_search
suite (every data set in evals/data, the livemcpbench step view included) and the ask suite are run
as the product runs them. The table gives the change in Recall@5 and MRR@10 when the rule is *off*:
a negative number is what the rule earns. The verdict follows the rule of issue #25: a rule is kept
when it earns at least 0.5 point somewhere without costing 0.5 point anywhere; evals/README.md says
which verdicts were overruled, and why (the BM25 fallback, a cost of one query).

  python -m evals.ablate                 # hybrid (the default path), markdown table on stdout
  python -m evals.ablate --ranker bm25   # the same for BM25 alone
  python -m evals.ablate --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from coffer.ranking.rules import Rules, ablated
from evals import datasets
from evals import run as tool_search

METRICS = ("recall@5", "mrr@10")
THRESHOLD = 0.5


def measure(ranker: str) -> dict[tuple[str, str], float]:
    """(set, metric) -> value for one full run of both suites under the rules now in force."""
    import evals.ask

    out: dict[tuple[str, str], float] = {}
    names = list(datasets.DATASETS + datasets.EXTRA_DATASETS)
    with tempfile.TemporaryDirectory(prefix="coffer-ablate-") as tmp:
        for row in tool_search.run(names, [ranker], cache_dir=Path(tmp), abstention=False):  # rules: ranking only
            for metric in METRICS:
                if row.get(metric) is not None:
                    out[(row["dataset"], metric)] = float(row[metric])
    for row in evals.ask.run((ranker,))["results"]:
        for metric in METRICS:
            out[("ask", metric)] = round(100.0 * float(row[metric]), 1)
    return out


def verdict(deltas: dict[tuple[str, str], float]) -> str:
    """Deltas are (off - on): a rule earns where its removal loses. Judged on the data sets and the ask
    suite; the livemcpbench step view is shown, not judged (the same 94 tasks, queried per sub-goal)."""
    judged = {k: d for k, d in deltas.items() if not k[0].endswith("/steps")}
    earns = [k for k, d in judged.items() if d <= -THRESHOLD]
    costs = [k for k, d in judged.items() if d >= THRESHOLD]
    if earns and not costs:
        return "keep"
    if not earns and not costs:
        return "remove (no effect of 0.5)"
    if not earns:
        return "remove (only costs)"
    return "remove (earns and costs)"


def ablate(ranker: str) -> dict[str, Any]:
    base = measure(ranker)
    rows = []
    for rule in Rules.names():
        with ablated(rule):
            off = measure(ranker)
        deltas = {k: round(off[k] - base[k], 1) for k in base}
        rows.append({"rule": rule, "deltas": deltas, "verdict": verdict(deltas)})
    return {"ranker": ranker, "base": base, "rows": rows}


def markdown(report: dict[str, Any]) -> str:
    sets = list(dict.fromkeys(s for s, _ in report["base"]))
    head = [
        "rule off",
        *(f"{s} R@5 / MRR" if any(m == "mrr@10" for t, m in report["base"] if t == s) else f"{s} R@5" for s in sets),
        "verdict",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = report["base"]
    cells = ["all on"] + [" / ".join(f"{base[(s, m)]:.1f}" for m in METRICS if (s, m) in base) for s in sets] + [""]
    lines.append("| " + " | ".join(cells) + " |")
    for row in report["rows"]:
        d = row["deltas"]
        cells = [row["rule"]] + [" / ".join(f"{d[(s, m)]:+.1f}" for m in METRICS if (s, m) in d) for s in sets]
        lines.append("| " + " | ".join([*cells, row["verdict"]]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.ablate", description=__doc__.splitlines()[0])
    parser.add_argument("--ranker", choices=tool_search.RANKERS, default="hybrid")
    parser.add_argument("--json", dest="json_path", type=Path, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    report = ablate(args.ranker)
    print(f"ranker: {args.ranker}; each cell: the change when the rule is off (R@5 / MRR@10, points)")
    print(markdown(report))
    if args.json_path:
        serial = {
            "ranker": report["ranker"],
            "base": {f"{s}:{m}": v for (s, m), v in report["base"].items()},
            "rows": [
                {
                    "rule": r["rule"],
                    "verdict": r["verdict"],
                    "deltas": {f"{s}:{m}": v for (s, m), v in r["deltas"].items()},
                }
                for r in report["rows"]
            ],
        }
        args.json_path.write_text(json.dumps(serial, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
