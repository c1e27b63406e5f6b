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
    lines around each, at most MAX_MATCHES matches and `cap` tokens. In a line longer than LONG_LINE
    (minified JSON is one line) each match is shown in a window of characters around it, with its
    offset for `read_range`, since the line's start says nothing about the match."""
    if not pattern or len(pattern) > MAX_PATTERN:
        raise UsageError(f"pattern must be 1-{MAX_PATTERN} characters")
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise UsageError(f"invalid pattern {pattern!r}: {exc}") from None
    context = max(0, min(context, 10))
    kept, original = archive.open_kept(value)
    text = text_of(original)
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    lines = [line.rstrip("\r\n") for line in lines]
    hits = [n for n, line in enumerate(lines) if regex.search(line)]
    shown: list[str] = []
    last, count = -1, 0
    for n in hits:
        if count >= MAX_MATCHES:
            break
        if len(lines[n]) > LONG_LINE:
            if shown:
                shown.append("--")
            for match in regex.finditer(lines[n]):
                if count >= MAX_MATCHES:
                    break
                shown.append(_window(lines[n], n, match, starts[n], WINDOW * (1 + context)))
                count += 1
            last = n
            continue
        lo, hi = max(0, n - context, last + 1), min(len(lines), n + context + 1)
        if shown and lo > last + 1:
            shown.append("--")
        shown += [f"{i + 1}{':' if i == n else '-'} {_short(lines[i])}" for i in range(lo, hi)]
        last, count = hi - 1, count + 1
    capped = "" if count < MAX_MATCHES else f" (the first {MAX_MATCHES} matches shown)"
    head = f"[coffer] {kept.uri}: {len(hits):,} matching lines of {len(lines):,}{capped}"
    body = tokens.head("\n".join(shown), cap)
    return head + "\n" + body


LONG_LINE = 500  # characters; a longer matching line is shown as windows around its matches
WINDOW = 120  # characters shown on each side of a match in a long line (times 1 + context)


def _window(line: str, n: int, match: re.Match[str], start: int, width: int) -> str:
    lo, hi = max(0, match.start() - width), min(len(line), match.end() + width)
    before = "…" if lo else ""
    after = "…" if hi < len(line) else ""
    return f"{n + 1}:{match.start() + 1}: (offset {start + match.start():,}) {before}{line[lo:hi]}{after}"


def _short(line: str) -> str:
    """A context line, not itself matching, cut to LONG_LINE characters."""
    return line if len(line) <= LONG_LINE else line[:LONG_LINE] + "…"
