"""The use cases over kept results: keep one (store, sweep, index for coffer__ask), list, show, remove.

The gateway keeps results through `keep`; `coffer results` lists and removes through the rest. The
text of a kept result is indexed for coffer__ask (its first `INDEX_CHARS`), and its passages go when it
does (expired, over budget, or removed).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from coffer.memory import knowledge as memory
from coffer.ranking.index import forget_derived
from coffer.results import archive
from coffer.results.archive import Kept
from coffer.results.preview import Measure
from coffer.results.text import text_pieces
from coffer.vault import paths

WINDOW_CHARS = 256 * 1024  # indexed a piece at a time
INDEX_CHARS = 8 * 1024 * 1024  # text of one kept result searchable by coffer__ask (a 50 MB log: its first 8 MB)


def keep(result: Mapping[str, Any], server: str, tool: str, measure: Measure, settings: Mapping[str, Any]) -> Kept:
    """Keep `result` whole, sweep what expired or overflows the budget, index its text."""
    kept = archive.keep(result, server, tool, measure.tokens, measure.kind, settings)
    _, budget_mb = archive.settings_of(settings)
    gone = archive.sweep(budget_mb, spare=kept.id)
    if gone:
        memory.forget_results(archive.URI_PREFIX + rid for rid in gone)
    windows = _windows(text_pieces(result), INDEX_CHARS)
    first = next((w for w in windows if w.strip()), None)  # blank text has nothing to index
    if first is not None:
        memory.index_result(kept.uri, f"{server}__{tool} result", itertools.chain([first], windows))
    return kept


def _windows(pieces: Iterable[str], limit: int, size: int = WINDOW_CHARS) -> Iterator[str]:
    """The first `limit` characters of the text `pieces` make, in windows of about `size` characters,
    cut after a line where one ends (the text is read a piece at a time, never whole)."""
    buffer, left = "", limit
    for piece in pieces:
        buffer += piece[: max(0, left - len(buffer))]
        while len(buffer) >= size:
            newline = buffer.rfind("\n", 0, size)
            stop = newline + 1 if newline > 0 else size
            yield buffer[:stop]
            buffer, left = buffer[stop:], left - stop
        if len(buffer) >= left:
            break
    if buffer:
        yield buffer


def listing() -> list[Kept]:
    return archive.listing()


def show(value: str) -> tuple[Kept, dict[str, Any]]:
    return archive.open_kept(value)


def remove(value: str) -> Kept:
    """One kept result, and everything derived from it (see `remove_all`)."""
    kept = archive.remove(value)
    memory.forget_results([kept.uri])
    forget_derived(paths.cache_dir())
    return kept


def remove_all() -> int:
    """Every kept result, file, index row and coffer__ask passage, with nothing of their words left
    behind: the passages' pages zeroed and the database's log emptied, and the caches built from
    texts (ranker snapshots, stems) dropped, to be rebuilt from what remains."""
    count = archive.remove_all()
    memory.forget_results(None)
    forget_derived(paths.cache_dir())
    return count
