"""`python -m evals.ask`: Recall@1, Recall@5 and MRR@10 of `coffer__ask` retrieval per ranker mode."""

from __future__ import annotations

import argparse
import json

from evals.ask import MODES, run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.ask", description=__doc__)
    parser.add_argument("--mode", action="append", choices=MODES, help="ranker mode (repeatable; default all)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--misses", action="store_true", help="list the questions missed at 5")
    args = parser.parse_args()
    report = run(tuple(args.mode or MODES))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"coffer__ask eval: {report['questions']} questions over {report['passages']} passages")
    print(f"{'mode':10} {'ranker':10} {'R@1':>6} {'R@5':>6} {'MRR@10':>7}")
    for r in report["results"]:
        print(f"{r['mode']:10} {r['ranker']:10} {r['recall@1']:6.3f} {r['recall@5']:6.3f} {r['mrr@10']:7.3f}")
        if args.misses:
            for q in r["misses@5"]:
                print(f"    miss: {q}")


if __name__ == "__main__":
    main()
