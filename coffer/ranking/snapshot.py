"""A built index saved whole, so a restart over an unchanged catalogue is ready without rebuilding.

Tokenising 10,000 tools for BM25 and deriving the texts whose vectors the embedding cache holds
costs about 1.5 s of Python; reading the finished arrays back costs milliseconds. A snapshot is keyed
by the docs' content hash, the ranker's settings and the models' ids, so any change is a new key.
It is derived data, like the vector cache: an unreadable or stale file is rebuilt, a failed write
is ignored, and only the newest few are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Bump when what a snapshot holds, or how the ranker derives it from docs, changes.
# 2: the tokenizer's word pieces (coffer.ranking.pieces); 3: mapped records, doc names; 4: the words docs open with
FORMAT = "coffer-index-4"
_KEEP = 4
_FOLDER = "index"


def snapshot_path(cache_dir: Path, parts: Sequence[str]) -> Path:
    """Where the snapshot for these key parts (docs hash, mode, settings, model ids) lives."""
    from coffer.ranking.derived import SUFFIX
    from coffer.ranking.embed import texts_hash

    return cache_dir / _FOLDER / f"{texts_hash(FORMAT, parts)[:40]}{SUFFIX}"


def load(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays saved at `path`, or None when there is no readable snapshot there."""
    from coffer.ranking.derived import load_derived

    return load_derived(path)  # the same reader as every derived cache file


def save(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write the snapshot atomically and keep the newest few; errors are ignored."""
    from coffer.ranking.derived import save_arrays

    save_arrays(path, arrays, _KEEP)
