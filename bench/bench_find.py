"""`coffer find` as a whole process over a registry cache of 30,000 entries (the official registry held
about 32,800 in September 2026), the way a user's shell runs it.

The entries: the 33 recorded real server.json files (tests/data/registry), each repeated under new
names with the description of a real tool from the eval sets and the catalogue, so the cache has the
size and the vocabulary of a real one. They are read over HTTP from the test registry on 127.0.0.1
(100 per page, as the official API serves them). Timed once: the full read, the index a read builds
at once (`coffer find --refresh` and a gateway's background refresh do both), the first find after
it, and a find that must build the index itself (one whose snapshot was removed); then N finds, each
a fresh process:

  floor            python importing numpy and rich (what any ranked table costs here)
  coffer --help    the CLI's own start (Typer), no search
  find (offline)   `coffer find QUERY --offline`, the cache only
  find (auto)      `coffer find QUERY`, which checks the cache's age first (fresh here: no network)

Issue 51's targets, whole process on 2 cores: a warm find <= 0.3 s, the first after a full read <= 3 s.
Prints figures only.

  python bench/bench_find.py [--entries 30000] [--runs 9]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERIES = ["open a pull request", "query a postgres database", "read a figma design", "search the web"]


def synthetic(n: int) -> list[dict[str, object]]:
    from tests.fixtures.registry_server import recorded

    shared = ROOT.parent / "shared" / "data"
    texts = []
    for path in (shared / "evals" / "livemcpbench" / "tools.jsonl", shared / "evals" / "metatool" / "tools.jsonl"):
        if path.exists():
            texts += [json.loads(line).get("description", "")[:300] for line in path.open()]
    texts += [t["description"][:300] for t in json.loads((ROOT / "tests" / "data" / "real-servers.json").read_text())]
    texts = [t for t in texts if t]
    real = recorded()
    out = list(real)
    for i in range(n - len(real)):
        server = copy.deepcopy(real[i % len(real)])
        owner, _, tail = str(server["name"]).partition("/")
        server["name"] = f"{owner}{i}/{tail}-{i}"
        server["description"] = texts[i % len(texts)]
        out.append(server)
    return out


def timed(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    from tests.fixtures.registry_server import RecordedRegistry

    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, COFFER_HOME=home, COFFER_EMBEDDINGS="wordllama")
        os.environ.update(env)
        with RecordedRegistry(synthetic(args.entries), page_limit=100) as reg:
            from coffer.discovery import cache
            from coffer.discovery.rank import index

            t0 = time.perf_counter()
            changed, _ = cache.refresh(reg.url)
            read_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            index([reg.url])
            index_s = time.perf_counter() - t0
            (Path(home) / "coffer.toml").write_text(f'[registries]\nbench = "{reg.url}"\n')
        coffer = [sys.executable, "-m", "coffer"]
        first_s = timed([*coffer, "find", QUERIES[0], "--offline"], env, 1)[0]
        print(f"full read: {changed} entries over HTTP in {read_s:.2f} s, then indexed in {index_s:.2f} s")
        print(f"first find after the read: {first_s:.2f} s")
        for snapshot in (Path(home) / "cache" / "index").iterdir():
            snapshot.unlink()
        rebuilt_s = timed([*coffer, "find", QUERIES[0], "--offline"], env, 1)[0]
        print(f"a find that builds the index (its snapshot removed, the vectors kept): {rebuilt_s:.2f} s")
        rows = [
            ("floor", [sys.executable, "-c", "import numpy, rich.console, rich.table"]),
            ("coffer --help", [*coffer, "--help"]),
        ]
        for q in QUERIES:
            rows.append((f"find (offline) '{q}'", [*coffer, "find", q, "--offline"]))
        rows.append((f"find (auto) '{QUERIES[1]}'", [*coffer, "find", QUERIES[1]]))
        base = None
        for label, argv in rows:
            med, low = timed(argv, env, args.runs)
            base = base or med
            print(f"{label:46} median {med * 1000:6.0f} ms  min {low * 1000:6.0f} ms  {med / base:4.1f}x floor")
        argv = [*coffer, "find", QUERIES[0], "--offline", "--json", "-n", "3"]
        top = subprocess.run(argv, env=env, capture_output=True)
        names = [s["name"] for s in json.loads(top.stdout)["servers"]]
        print(f"'{QUERIES[0]}' over {args.entries}: {', '.join(names)}")


if __name__ == "__main__":
    main()
