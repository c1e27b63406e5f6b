"""Reading a kept result a part at a time: a range of its text, or the lines that match a pattern.

Both answer within the same token cap as any other result, and say where to go on from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from coffer.errors import UsageError
from coffer.results import archive, tokens
from coffer.results.spill import Text, pieces, size

MAX_MATCHES = 100
MAX_PATTERN = 500


def parts(result: Mapping[str, Any]) -> tuple[list[Text], int]:
    """The text parts of a result (text items, embedded text resources) and its binary size (base64);
    a long one may be in a file still (coffer.results.spill)."""
    texts: list[Text] = []
    binary = 0
    for item in result.get("content") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), Text):
            texts.append(item["text"])
        elif kind in ("image", "audio") and isinstance(item.get("data"), Text):
            binary += size(item["data"])
        elif kind == "resource" and isinstance(item.get("resource"), dict):
            res = item["resource"]
            if isinstance(res.get("text"), Text):
                texts.append(res["text"])
            elif isinstance(res.get("blob"), Text):
                binary += size(res["blob"])
    return texts, binary


def text_of(result: Mapping[str, Any]) -> str:
    """The readable text of a result as the store holds it: its text parts in order, else its
    structured content as JSON."""
    return "".join(text_pieces(result))


def text_pieces(result: Mapping[str, Any]) -> Iterator[str]:
    """`text_of` a slice at a time (a spilled part is read from its file, never whole)."""
    texts, _ = parts(result)
    if not texts and result.get("structuredContent") is not None:
        texts.append(json.dumps(result["structuredContent"], ensure_ascii=False, indent=1))
    for n, text in enumerate(texts):
        if n:
            yield "\n\n"
        yield from pieces(text)


def read_range(value: str, offset: int, length: int, cap: int) -> str:
    """Characters [offset, offset+length) of a kept result's text, cut to `cap` tokens."""
    if offset < 0 or length < 1:
        raise UsageError("offset must be >= 0 and length >= 1")
    kept, original = archive.open_kept(value)
    text = text_of(original)
    piece = tokens.head(text[offset : offset + length], cap)
    end = offset + len(piece)
    more = f"; next: offset {end}" if end < len(text) else "; that is the end"
    return f"[coffer] {kept.uri}: characters {offset:,}-{end:,} of {len(text):,}{more}\n{piece}"


def grep(value: str, pattern: str, cap: int, context: int = 0, ignore_case: bool = False) -> str:
    """The lines of a kept result's text that match `pattern` (a Python regex), numbered, with `context`
    lines around each, at most MAX_MATCHES matches and `cap` tokens."""
    if not pattern or len(pattern) > MAX_PATTERN:
        raise UsageError(f"pattern must be 1-{MAX_PATTERN} characters")
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise UsageError(f"invalid pattern {pattern!r}: {exc}") from None
    context = max(0, min(context, 10))
    kept, original = archive.open_kept(value)
    lines = text_of(original).splitlines()
    hits = [n for n, line in enumerate(lines) if regex.search(line)]
    shown: list[str] = []
    last = -1
    for n in hits[:MAX_MATCHES]:
        lo, hi = max(0, n - context, last + 1), min(len(lines), n + context + 1)
        if shown and lo > last + 1:
            shown.append("--")
        shown += [f"{i + 1}{':' if i == n else '-'} {lines[i]}" for i in range(lo, hi)]
        last = hi - 1
    capped = "" if len(hits) <= MAX_MATCHES else f" (the first {MAX_MATCHES} shown)"
    head = f"[coffer] {kept.uri}: {len(hits):,} matching lines of {len(lines):,}{capped}"
    body = tokens.head("\n".join(shown), cap)
    return head + "\n" + body
