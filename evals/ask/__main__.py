"""`python -m evals.ask`: Recall@1, Recall@5 and MRR@10 of `coffer__ask` retrieval per ranker mode."""

from __future__ import annotations

import argparse
import json

from evals.ask import MODES, print_report, run


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
    print_report(report, args.misses)


if __name__ == "__main__":
    main()
