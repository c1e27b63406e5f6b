"""`python -m evals.run --suite find`: `coffer find` over the recorded official MCP Registry.

The registry (../shared/data/registry/registry.jsonl, 11,978 servers as recorded on 2026-06-12) is
test data kept outside the project: it is read into a registry cache in a temporary COFFER_HOME, and
the asks of data/find-asks run through `coffer.manage.discover.find` as the CLI runs it (offline).
Where the file is absent the suite says so and reports nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evals.datasets import DATA_DIR

REGISTRY_FILE = Path(__file__).resolve().parents[2] / "shared" / "data" / "registry" / "registry.jsonl"
RECORDED_URL = "https://registry.modelcontextprotocol.io"  # the recording's registry: the vault's default
K = 10


def available() -> bool:
    return REGISTRY_FILE.exists()


@contextmanager
def recorded_cache(path: Path = REGISTRY_FILE) -> Iterator[int]:
    """A temporary COFFER_HOME whose registry cache holds the recorded registry; yields its size."""
    from coffer.discovery import cache
    from coffer.discovery.entries import DiscoveryError, parse_item

    old = os.environ.get("COFFER_HOME")
    with tempfile.TemporaryDirectory(prefix="coffer-evals-find-") as tmp:
        os.environ["COFFER_HOME"] = tmp
        try:
            entries = []
            for line in path.open(encoding="utf-8"):
                try:
                    entries.append(parse_item(json.loads(line), RECORDED_URL))
                except DiscoveryError:
                    continue
            cache.store(entries, RECORDED_URL)
            yield len(entries)
        finally:
            if old is None:
                os.environ.pop("COFFER_HOME", None)
            else:
                os.environ["COFFER_HOME"] = old


_WORDS: list[Any] = []


def recorded_words() -> Any:
    """coffer.discovery.world's counts over the recorded registry, as a cache of it would give them;
    None where the recording is absent."""
    if not available():
        return None
    if not _WORDS:
        from coffer.discovery import world
        from coffer.discovery.entries import DiscoveryError, parse_item

        rows = []
        for line in REGISTRY_FILE.open(encoding="utf-8"):
            try:
                e = parse_item(json.loads(line), RECORDED_URL)
            except DiscoveryError:
                continue
            rows.append((e.name, e.short, e.title, e.text()))
        _WORDS.append(world.count(rows))
    return _WORDS[0]


def asks(heldout: bool = False) -> list[dict[str, Any]]:
    """find-asks' asks; `heldout`: those written after `find`'s ranking was tuned, never used to tune it."""
    with (DATA_DIR / "find-asks" / ("heldout.jsonl" if heldout else "queries.jsonl")).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _fits(hit: dict[str, Any], about: list[str]) -> bool:
    text = " ".join(str(hit.get(f) or "") for f in ("name", "title", "description")).lower()
    return any(word in text for word in about)


def evaluate(verbose: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tuned asks' row and the held-out asks' row, over one read of the recording into a cache."""
    from coffer.manage.discover import find

    with recorded_cache() as size:
        find("warm the index", mode="offline", k=K)  # the first find builds the saved index
        return _judge("find-asks", asks(), size, verbose), _judge("find-asks/held-out", asks(True), size, verbose)


def _judge(dataset: str, rows: list[dict[str, Any]], size: int, verbose: bool) -> dict[str, Any]:
    """vendor@3 and vendor MRR@10 over the asks with a vendor's own server, fit@3 over those with
    `about` words, and the share of made-up asks answered with nothing; ms per find."""
    from coffer.manage.discover import find

    vendor_hits = vendor_rr = fit = 0.0
    n_vendor = n_about = n_none = none_right = 0
    shown = 0
    took = 0.0
    misses: list[str] = []
    for ask in rows:
        t0 = time.perf_counter()
        hits = find(ask["query"], mode="offline", k=K).hits
        took += time.perf_counter() - t0
        names = [h["name"] for h in hits]
        shown += len(hits)
        if ask.get("none"):
            n_none += 1
            none_right += not hits
            if hits:
                misses.append(f"{ask['query']!r}: {len(hits)} shown, none expected")
            continue
        if ask.get("vendor"):
            n_vendor += 1
            rank = names.index(ask["vendor"]) + 1 if ask["vendor"] in names else 0
            vendor_hits += 0 < rank <= 3
            vendor_rr += 1.0 / rank if rank else 0.0
            if not 0 < rank <= 3:
                misses.append(f"{ask['query']!r}: {ask['vendor']} at {rank or '-'}; top: {', '.join(names[:3])}")
        if ask.get("about"):
            n_about += 1
            top = hits[:3]
            fit += sum(_fits(h, ask["about"]) for h in top) / len(top) if top else 0.0
    out = {
        "dataset": dataset,
        "registry": size,
        "asks": len(rows),
        "vendor@3": round(100.0 * vendor_hits / max(n_vendor, 1), 1),
        "vendor_mrr@10": round(100.0 * vendor_rr / max(n_vendor, 1), 1),
        "vendor_asks": n_vendor,
        "fit@3": round(100.0 * fit / max(n_about, 1), 1),
        "none_right": round(100.0 * none_right / max(n_none, 1), 1),
        "none_asks": n_none,
        "shown_per_ask": round(shown / max(len(rows), 1), 1),
        "ms_per_find": round(1000.0 * took / max(len(rows), 1), 1),
    }
    if verbose:
        out["misses"] = misses
    return out


def print_report(*rows: dict[str, Any]) -> None:
    from coffer.cli import render

    render.table(
        ["data set", "registry", "asks", "vendor@3", "vendor MRR@10", "fit@3", "nothing, rightly", "shown", "ms/find"],
        [
            [
                row["dataset"],
                row["registry"],
                row["asks"],
                f"{row['vendor@3']:.1f} of {row['vendor_asks']}",
                f"{row['vendor_mrr@10']:.1f}",
                f"{row['fit@3']:.1f}",
                f"{row['none_right']:.1f} of {row['none_asks']}",
                f"{row['shown_per_ask']:.1f}",
                f"{row['ms_per_find']:.0f}",
            ]
            for row in rows
        ],
        title="find: the recorded official registry, percent",
    )
    for row in rows:
        for miss in row.get("misses", []):
            render.say(f"  miss ({row['dataset']}): {miss}")


if __name__ == "__main__":
    print_report(*evaluate(verbose=True))
