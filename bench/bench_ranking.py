"""Ranking speed: index build and query latency, Coffer's ranker beside bm25s and rank_bm25.

    python bench/bench_ranking.py [--queries N]

Catalogues: the 222 real tools (evals/data/coffer-real) and a synthetic 10,000-tool catalogue (the
222 real tools plus 9,778 tools recombined deterministically from real names and descriptions of
all three eval sets). Queries: the coffer-real queries, cycled. Every query timing includes
tokenising the query. Targets: p50 under 1 ms for BM25, under 5 ms hybrid at 10,000 tools; a ready index in
under 1 s with at most 100 MiB kept at 10,000 tools when its snapshot is cached.
Figures are printed, never asserted: they depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coffer.ranking import Doc, Ranker, docs_from_tools
from coffer.ranking.tokenize import tokenize
from evals import datasets

SYNTHETIC_SIZE = 10_000


def synthetic_docs(real: list[Doc], pool: list[Doc], size: int, seed: int = 7) -> list[Doc]:
    """`real` plus made-up tools: a server, a name joined from real name parts, two real sentences."""
    rng = random.Random(seed)
    name_parts = sorted({p for d in pool for p in d.name.replace("-", "_").split("_") if p.isalpha()})
    sentences = sorted({s.strip() for d in pool for s in d.text.split(". ") if len(s.split()) >= 4})
    params = sorted({d.params for d in pool if d.params})
    docs = list(real)
    for i in range(size - len(real)):
        server = f"srv{i // 25:03d}"
        name = "_".join(rng.sample(name_parts, 2)) + f"_{i}"
        text = ". ".join(rng.sample(sentences, 2)) + "."
        docs.append(Doc(id=f"{server}__{name}", name=name, text=text, params=rng.choice(params), server=server))
    return docs


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed_queries(fn: Callable[[str], object], queries: list[str]) -> tuple[float, float]:
    for q in queries[:5]:  # warm caches (stemmer memo, BLAS threads)
        fn(q)
    samples = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        samples.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(samples), pct(samples, 0.95)


def bench_catalogue(label: str, docs: list[Doc], queries: list[str], with_minilm: bool = False) -> list[tuple]:
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        modes = ["bm25", "semantic", "hybrid"]
        if with_minilm:
            modes.append("hybrid-minilm")
        for name in modes:
            mode, _, backend = name.partition("-")
            # as the gateway ranks tools: implied needs on; the default (CI) path unless -minilm
            opts = {"embeddings": backend or "wordllama", "implied_needs": True}
            t0 = time.perf_counter()
            ranker = Ranker(docs, mode=mode, cache_dir=cache, **opts)
            build = time.perf_counter() - t0
            if mode != "bm25":  # second build reads the vectors from the cache
                t0 = time.perf_counter()
                Ranker(docs, mode=mode, cache_dir=cache, **opts)
                build_cached = time.perf_counter() - t0
            else:
                build_cached = None
            p50, p95 = timed_queries(lambda q, r=ranker: r.search(q, 5), queries)
            rows.append((label, f"coffer {ranker.ranker}", build, build_cached, p50, p95))

    corpus_text = [f"{d.name} {d.text}" for d in docs]
    try:
        import bm25s

        t0 = time.perf_counter()
        ret = bm25s.BM25(method="lucene")
        ret.index(bm25s.tokenize(corpus_text, stopwords="en", show_progress=False), show_progress=False)
        build = time.perf_counter() - t0
        k = min(5, len(docs))

        def bm25s_query(q: str) -> object:
            return ret.retrieve(bm25s.tokenize([q], stopwords="en", show_progress=False), k=k, show_progress=False)

        p50, p95 = timed_queries(bm25s_query, queries)
        rows.append((label, "bm25s (lucene)", build, None, p50, p95))
    except ImportError:
        rows.append((label, "bm25s: not installed (pip install .[bench])", None, None, None, None))
    try:
        from rank_bm25 import BM25Okapi

        t0 = time.perf_counter()
        okapi = BM25Okapi([tokenize(t) for t in corpus_text])
        build = time.perf_counter() - t0
        p50, p95 = timed_queries(lambda q: okapi.get_top_n(tokenize(q), docs, n=5), queries)
        rows.append((label, "rank_bm25 (Okapi)", build, None, p50, p95))
    except ImportError:
        rows.append((label, "rank_bm25: not installed (pip install .[bench])", None, None, None, None))
    return rows


def _pool() -> tuple[list[Doc], list[Doc]]:
    real = docs_from_tools(datasets.load("coffer-real").tools)
    pool = list(real)
    for name in ("livemcpbench", "metatool"):
        pool += docs_from_tools(datasets.load(name).tools)
    return real, pool


def measure_ready(size: int, cache: Path) -> dict[str, float]:
    """In this (fresh) process: seconds to a ready hybrid index of `size` tools (first query answered)
    and how much the process grew, model load included; with `cache` empty (cold) or not (snapshot)."""
    import numpy  # noqa: F401  (imported before the baseline: every Coffer process has numpy)
    import tokenizers  # noqa: F401

    real, pool = _pool()
    docs = synthetic_docs(real, pool, size)
    del pool
    with open("/proc/self/statm") as handle:
        before = int(handle.read().split()[1])
    t0 = time.perf_counter()
    ranker = Ranker(docs, mode="hybrid", cache_dir=cache, embeddings="wordllama", implied_needs=True)
    ranker.search("open a pull request for my branch", 5)
    ready = time.perf_counter() - t0
    with open("/proc/self/statm") as handle:
        after = int(handle.read().split()[1])
    return {"ready_s": ready, "kept_mib": (after - before) * 4096 / 2**20, "snapshot": ranker.from_snapshot}


def ready_rows(sizes: list[int]) -> list[tuple]:
    """Cold and snapshot-warm starts of the hybrid index, each in a fresh process."""
    import json
    import subprocess

    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            for label in ("cold (no cache)", "warm (snapshot)"):
                cmd = [sys.executable, __file__, "--measure-ready", str(size), "--cache", tmp]
                out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
                rows.append((f"{size:,} tools", label, out["ready_s"], out["kept_mib"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200, help="timed queries per ranker (default 200)")
    parser.add_argument("--sizes", default="10000,50000", help="catalogue sizes for the ready/memory table")
    parser.add_argument("--measure-ready", type=int, help=argparse.SUPPRESS)  # internal: one fresh process
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure_ready:
        import json

        print(json.dumps(measure_ready(args.measure_ready, args.cache)))
        return 0

    real_set = datasets.load("coffer-real")
    real, pool = _pool()
    texts = [q.text for q in real_set.queries]
    queries = [texts[i % len(texts)] for i in range(args.queries)]

    from coffer.ranking.minilm import installed

    # the optional MiniLM model only on the real catalogue: embedding 10,000 tools with it takes minutes
    rows = bench_catalogue(f"{len(real)} real tools", real, queries, with_minilm=installed())
    rows += bench_catalogue(f"{SYNTHETIC_SIZE:,} tools", synthetic_docs(real, pool, SYNTHETIC_SIZE), queries)

    from coffer.cli import render

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    def sec(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    render.table(
        ["catalogue", "ranker", "build s", "build s (snapshot cached)", "query p50 ms", "query p95 ms"],
        [(c, r, sec(b), sec(bc), ms(p50), ms(p95)) for c, r, b, bc, p50, p95 in rows],
        title=f"ranking speed, {args.queries} queries, top 5",
    )
    render.table(
        ["catalogue", "start", "ready s (first query answered)", "process grew MiB (model included)"],
        [(c, label, f"{s:.2f}", f"{m:.0f}") for c, label, s, m in ready_rows([int(x) for x in args.sizes.split(",")])],
        title="hybrid index start, each in a fresh process",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
