"""Counting tokens the way a model would, without tokenizing 50 MB to learn that it is over 25,000.

The vocabulary is Llama 2's (32,000 SentencePiece BPE tokens), the tokenizer file wordllama ships with
its embeddings (already a dependency of the ranking stack): no hosted model's tokenizer is public, and on
English and code Llama 2 counts within a few percent of them, slightly high, which errs on the side of a
smaller preview. Text is counted in slices and the count stops as soon as it passes the limit.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SLICE_CHARS = 32_768


@functools.cache
def _tokenizer() -> Any:
    from importlib.util import find_spec

    from tokenizers import Tokenizer

    # wordllama's file, found without importing wordllama (0.56 s: a cold engine's first tools/list counts
    # the vault's holdings in tokens, coffer.gateway.builtins)
    spec = find_spec("wordllama")
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if not places:
        raise ModuleNotFoundError("wordllama is not installed: its tokenizer counts tokens")
    path = Path(places[0]) / "tokenizers" / "l2_supercat_tokenizer_config.json"
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def fits(text: str, limit: int) -> bool:
    """Whether `text` is at most `limit` tokens. A token is at least one UTF-8 byte, so ASCII text no
    longer than the limit is never tokenized."""
    if len(text) <= limit and text.isascii():
        return True
    return count(text, limit) <= limit


def count(text: str, stop_after: int | None = None) -> int:
    """Tokens in `text`; once past `stop_after` the rest is not counted (the figure is then a floor)."""
    total = 0
    tokenizer = _tokenizer()
    for start in range(0, len(text), SLICE_CHARS):
        total += len(tokenizer.encode(text[start : start + SLICE_CHARS], add_special_tokens=False).ids)
        if stop_after is not None and total > stop_after:
            break
    return total


def head(text: str, limit: int) -> str:
    """The longest start of `text` that is at most `limit` tokens, cut at a token boundary (tokenized once:
    the slices are counted as they are cut)."""
    if len(text) <= limit and text.isascii():  # a token is at least one byte
        return text
    tokenizer = _tokenizer()
    kept, used = 0, 0
    for start in range(0, len(text), SLICE_CHARS):
        piece = text[start : start + SLICE_CHARS]
        offsets = tokenizer.encode(piece, add_special_tokens=False).offsets
        if used + len(offsets) <= limit:
            used += len(offsets)
            kept = start + len(piece)
            continue
        room = limit - used
        return text[: start + (offsets[room][0] if room < len(offsets) else len(piece))]
    return text[:kept]


def tool_tokens(tools_list: Sequence[Mapping[str, Any]]) -> list[int]:
    """What advertising each tool costs a client per request: the tokens of the tool as tools/list sends
    it (compact JSON, every field). The one count `doctor`, `list`, profiles and the console show. Counts
    are kept by a hash of the tool's JSON (no text) in the cache dir, so a command loads the tokenizer
    only for tools it has not counted before."""
    import hashlib

    texts = [json.dumps(t, separators=(",", ":"), ensure_ascii=False) for t in tools_list]
    keys = [hashlib.sha256(text.encode()).hexdigest()[:20] for text in texts]
    known = _counted()
    missing = [i for i, key in enumerate(keys) if key not in known]
    if missing:
        for i in missing:
            known[keys[i]] = count(texts[i])
        _save_counted(known)
    return [known[key] for key in keys]


_COUNTED: dict[str, int] = {}
COUNTED_MAX = 20_000  # counts kept on disk (a vault's tools, several versions of each)


def _counted_path() -> Path:
    from coffer.vault import paths

    return paths.cache_dir() / "tokens.json"


def _counted() -> dict[str, int]:
    if not _COUNTED:
        with contextlib.suppress(OSError, ValueError, TypeError):
            data = json.loads(_counted_path().read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("version") == 1 and isinstance(data.get("counts"), dict):
                _COUNTED.update({k: v for k, v in data["counts"].items() if isinstance(v, int)})
    return _COUNTED


def _save_counted(known: dict[str, int]) -> None:
    """Best effort: a cache."""
    from coffer.vault.fsutil import atomic_write

    keep = dict(list(known.items())[-COUNTED_MAX:])
    with contextlib.suppress(OSError):
        atomic_write(_counted_path(), json.dumps({"version": 1, "counts": keep}))
