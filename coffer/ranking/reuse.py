"""Built rankers kept per catalogue, so the gateway does not rebuild one per request."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from coffer.ranking.docs import Doc, docs_hash
from coffer.ranking.ranker import Ranker
from coffer.ranking.rules import current

_cache_lock = threading.Lock()
_rankers: OrderedDict[tuple[str, ...], Ranker] = OrderedDict()
_MAX_RANKERS = 4


def cached_ranker(
    docs: Sequence[Doc],
    mode: str = "hybrid",
    cache_dir: Path | None = None,
    *,
    key: str | None = None,
    implied_needs: bool = False,
    english_docs: bool = False,
    acting: bool = True,
) -> Ranker:
    """A Ranker for `docs`, reused while the docs are unchanged (the gateway calls this per request).

    `key` may be a catalogue hash the caller already has; otherwise the docs' content is hashed.
    The embedding backend comes from $COFFER_EMBEDDINGS, read once per build.
    """
    from coffer.ranking.minilm import requested_backend

    backend = requested_backend()
    content = docs_hash(docs) if key is None else None  # hashed once: the Ranker's snapshot key reuses it
    cache_key = (
        key or content or "",
        mode,
        str(cache_dir) if cache_dir else "",
        backend,
        str(implied_needs),
        str(english_docs),
        str(acting),
        repr(current()),  # the ablation's rules (coffer.ranking.rules), all on outside it
    )
    with _cache_lock:
        ranker = _rankers.get(cache_key)
        if ranker is not None:
            _rankers.move_to_end(cache_key)
            return ranker
    # built outside the lock: may take a while
    ranker = Ranker(
        docs,
        mode=mode,
        cache_dir=cache_dir,
        embeddings=backend,
        implied_needs=implied_needs,
        english_docs=english_docs,
        docs_key=content,
        acting=acting,
    )
    with _cache_lock:
        _rankers[cache_key] = ranker
        while len(_rankers) > _MAX_RANKERS:
            _rankers.popitem(last=False)
    return ranker
