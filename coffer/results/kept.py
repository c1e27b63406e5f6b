"""The use cases over kept results: keep one (store, sweep, index for coffer__ask), list, show, remove.

The gateway keeps results through `keep`; `coffer results` lists and removes through the rest. The
text of a kept result is indexed for coffer__ask (its first `INDEX_CHARS`), and its passages go when it
does (expired, over budget, or removed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from coffer.memory import store as memory
from coffer.results import store
from coffer.results.preview import Measure
from coffer.results.store import Kept
from coffer.results.text import text_of

WINDOW_CHARS = 256 * 1024  # indexed a piece at a time
INDEX_CHARS = 8 * 1024 * 1024  # text of one kept result searchable by coffer__ask (a 50 MB log: its first 8 MB)


def keep(result: Mapping[str, Any], server: str, tool: str, measure: Measure, settings: Mapping[str, Any]) -> Kept:
    """Keep `result` whole, sweep what expired or overflows the budget, index its text."""
    kept = store.keep(result, server, tool, measure.tokens, measure.kind, settings)
    _, budget_mb = store.settings_of(settings)
    gone = store.sweep(budget_mb, spare=kept.id)
    if gone:
        memory.forget_results(store.URI_PREFIX + rid for rid in gone)
    text = text_of(result)
    if text.strip():
        memory.index_result(kept.uri, f"{server}__{tool} result", _windows(text, INDEX_CHARS))
    return kept


def _windows(text: str, limit: int, size: int = WINDOW_CHARS) -> Iterator[str]:
    """The first `limit` characters of `text` in pieces of about `size`, cut after a line where one ends."""
    start, end = 0, min(len(text), limit)
    while start < end:
        stop = min(start + size, end)
        if stop < end:
            newline = text.rfind("\n", start, stop)
            stop = newline + 1 if newline > start else stop
        yield text[start:stop]
        start = stop


def listing() -> list[Kept]:
    return store.listing()


def show(value: str) -> tuple[Kept, dict[str, Any]]:
    return store.open_kept(value)


def remove(value: str) -> Kept:
    kept = store.remove(value)
    memory.forget_results([kept.uri])
    return kept


def remove_all() -> int:
    """Every kept result, file, index row and coffer__ask passage."""
    count = store.remove_all()
    memory.forget_results(None)
    return count
