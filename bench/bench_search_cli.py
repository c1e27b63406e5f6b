"""`coffer search` as a whole process, the way a user's shell runs it, over the 222 real tools.

Each row is the median (and min) wall time of N fresh processes, after one warm-up run that builds
the index snapshot. Rows, all in this process's run so they share the machine's state:
  floor          python importing only numpy and rich (what any table of ranked tools costs here)
  coffer search  the entry point (`coffer.cli.main`: the Typer-free path, coffer.cli.quick)
  via Typer      the same command through the Typer app (what every run cost before)
  new word       each run a word the index has never seen (the tokenizer loads, the word is kept)
  kept word      a word an earlier search taught (no tokenizer)
  Spanish        a query in another language (the glossary and its stemmers load, coffer.ranking.languages)
The issue's goal is < 400 ms on a quiet machine. Prints figures only.

  python bench/bench_search_cli.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENTRY = "from coffer.cli import main; main()"
TYPER = "from coffer.cli.commands import app; app()"
FLOOR = "import numpy, rich.console, rich.table"


def seed_vault(home: str) -> dict[str, int]:
    """Registry entries and a catalogue snapshot of the 16 real servers in `home` (nothing is started);
    how many tools each server has. bench_profiles.py seeds its vault the same way."""
    os.environ["COFFER_HOME"] = home
    from coffer.manage import servers
    from coffer.vault import catalogue, registry

    by_server: dict[str, list[dict[str, object]]] = {}
    for tool in json.loads((ROOT / "tests" / "data" / "real-servers.json").read_text()):
        by_server.setdefault(tool.pop("server"), []).append(tool)
    for name, tools in by_server.items():
        servers.add_server(registry.ServerConfig(name=name, command="true"))
        catalogue.save_server(name, tools=tools)
    return {name: len(tools) for name, tools in by_server.items()}


Argv = list[str] | Callable[[int], list[str]]  # fixed, or made per run


def timed(code: str, argv: Argv, env: dict[str, str], runs: int) -> tuple[float, float]:
    samples = []
    for i in range(runs):
        args = argv(i) if callable(argv) else argv
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, timeout=120)
        samples.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"failed: {args}: {proc.stderr.decode()[-400:]}")
    return statistics.median(samples), min(samples)


def new_word(i: int) -> list[str]:
    """A query with a made-up word no earlier run used ("zorbaalax", "zorbablax", ...)."""
    return ["search", f"open a PR for the zorb{chr(97 + i // 26)}{chr(97 + i % 26)}lax branch"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    opts = parser.parse_args(argv)
    home = tempfile.mkdtemp(prefix="coffer-bench-search-")
    seed_vault(home)
    env = dict(os.environ, COFFER_HOME=home, COFFER_EMBEDDINGS=os.environ.get("COFFER_EMBEDDINGS", "wordllama"))
    query = ["search", "open a PR"]
    timed(ENTRY, query, env, 1)  # builds the index snapshot once, as the first search after a refresh does
    rows = [
        ("floor (numpy + rich)", FLOOR, []),
        ("coffer search", ENTRY, query),
        ("via Typer", TYPER, query),
        ("new word", ENTRY, new_word),
        ("Spanish", ENTRY, ["search", "abre un PR para mi rama"]),
        ("kept word", ENTRY, ["search", "open a PR for the quuxfrob branch"]),
    ]
    timed(ENTRY, rows[-1][2], env, 1)  # teaches "quuxfrob"
    results = {label: timed(code, args, env, opts.runs) for label, code, args in rows}
    base = results["coffer search"][0]
    print(f"`coffer search` over 222 tools, {opts.runs} fresh processes per row (median / min seconds)")
    for label, (median, low) in results.items():
        print(f"  {label:22} {median:6.3f}  {low:6.3f}   {median / base:4.2f}x coffer search")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
