"""What an agent gets instead of a result over the cap: a preview that fits, and a link to the whole.

The preview is the head of the text; for JSON, its shape first (keys, array lengths, the first items)
then the head of the text; for images, audio and blobs, what they are and their size. It always says
how big the original is, where it is kept, and how to read a part of it (`coffer__read_result`) or all
of it (`resources/read` of the `coffer://results/<id>` link that follows it).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coffer.results import tokens
from coffer.results.archive import Kept
from coffer.results.spill import Text, head, pieces, size
from coffer.results.text import parts

NOTE_TOKENS = 300  # the notice and the link, taken off the cap before the preview is cut
JSON_PARSE_LIMIT = 16 * 1024 * 1024  # larger JSON is previewed by its head only (parsing costs ~10x its size)
SHAPE_ITEMS = 3
SHAPE_KEYS = 25
SHAPE_STRING = 80
READ_TOOL = "coffer__read_result"
HEAD_CHARS_PER_TOKEN = 16  # the longest token of the vocabulary (coffer.results.tokens) spans 16 characters


@dataclass(frozen=True)
class Measure:
    over: bool
    tokens: int  # a floor when over: counting stops a little past the cap
    kind: str  # text, json, binary or mixed


def surely_under(result: Mapping[str, Any], cap: int) -> bool:
    """Under the cap for certain, without a tokenizer: ASCII text (and links) no longer than the cap, a
    token being at least one byte. Anything else (binary, non-ASCII, longer) has to be measured."""
    size = 0
    for item in result.get("content") or []:
        if not isinstance(item, dict):
            return False
        if item.get("type") == "text" and isinstance(item.get("text"), str):
            if not item["text"].isascii():
                return False
            size += len(item["text"])
        elif item.get("type") == "resource_link":
            size += 100
        else:
            return False
        if size > cap:
            return False
    structured = result.get("structuredContent")
    if structured is not None:
        size += len(json.dumps(structured))
    return size <= cap


def measure(result: Mapping[str, Any], cap: int) -> Measure:
    """Whether `result` is over `cap` tokens. Binary content counts by size (4 base64 characters a token,
    what the host would otherwise carry); structured content by its JSON."""
    texts, binary = parts(result)
    structured = result.get("structuredContent")
    kind = "binary" if binary and not texts else "mixed" if binary else "text"
    if texts and len(texts) == 1 and _lead(texts[0]) in ("{", "["):
        kind = "json"
    total = binary // 4
    if structured is not None:
        texts = [*texts, json.dumps(structured, ensure_ascii=False)]
        kind = kind if texts[:-1] else "json"
    if surely_under(result, cap):
        return Measure(False, sum(size(t) for t in texts), kind)
    for piece in (p for text in texts for p in pieces(text)):  # a spilled text a slice at a time
        if total > cap:
            break
        total += tokens.count(piece, stop_after=cap - total)
    return Measure(total > cap, total, kind)


def _lead(text: Text) -> str:
    """The first character that is not white space (what tells JSON from text)."""
    return head(text, 4096).lstrip()[:1]


def build(result: Mapping[str, Any], kept: Kept, cap: int, keep_days: float, schema: bool = False) -> dict[str, Any]:
    """The result the host gets in place of `result` (kept whole as `kept`). `schema`: the tool declares
    an output schema, so its structured content goes through whole (a client validates it against the
    schema and would refuse the result without it); only the content is previewed."""
    texts, _ = parts(result)
    budget = max(200, cap - NOTE_TOKENS)
    body = _body(result, texts, budget)
    out: dict[str, Any] = {
        "content": [
            {"type": "text", "text": _notice(kept, cap, keep_days) + "\n\n" + body},
            {
                "type": "resource_link",
                "uri": kept.uri,
                "name": f"{kept.server}__{kept.tool} result",
                "description": f"The whole result, {human(kept.bytes)}, kept by Coffer",
                "mimeType": "application/json",
                "size": kept.bytes,
            },
        ]
    }
    structured = result.get("structuredContent")
    if structured is not None and (schema or tokens.fits(json.dumps(structured, ensure_ascii=False), budget // 2)):
        out["structuredContent"] = structured  # passed as it is: small enough, or its output schema needs it
    if result.get("isError"):
        out["isError"] = True
    return out


def _notice(kept: Kept, cap: int, keep_days: float) -> str:
    days = f"{keep_days:g} day" + ("" if keep_days == 1 else "s")
    return (
        f"[coffer] This result is {human(kept.bytes)} (over {kept.tokens:,} tokens), more than the {cap:,}-token "
        f"cap, so Coffer kept it whole for {days} as {kept.uri} and shows a preview below. Read a part with "
        f'{READ_TOOL} {{"id": "{kept.id}", "offset": 0, "length": 20000}}, search it with '
        f'{READ_TOOL} {{"id": "{kept.id}", "pattern": "regex"}}, or all of it with resources/read {kept.uri}.'
    )


def _body(result: Mapping[str, Any], texts: list[Text], budget: int) -> str:
    lines = [_binary_line(item) for item in result.get("content") or [] if isinstance(item, dict)]
    lines = [line for line in lines if line]
    structured = result.get("structuredContent")
    if not texts and structured is not None:
        lines.append("Structured content, shape:\n" + shape(structured))
    first = texts[0] if texts else ""
    if first:
        if size(first) <= JSON_PARSE_LIMIT and _lead(first) in ("{", "["):
            with contextlib.suppress(ValueError):
                lines.append("JSON, shape:\n" + shape(json.loads(first if isinstance(first, str) else first.whole())))
        more = f" (and {len(texts) - 1} more text parts)" if len(texts) > 1 else ""
        lines.append(f"Text, {size(first):,} characters{more}; the start:")
    lead = "\n\n".join(lines)
    if not first:
        return tokens.head(lead, budget)
    room = budget - tokens.count(lead, stop_after=budget)
    if room < budget // 3:  # a huge outline leaves the text too little: both get a share
        lead = tokens.head(lead, budget * 2 // 3)
        room = budget - tokens.count(lead)
    start = head(first, HEAD_CHARS_PER_TOKEN * room + 4096)  # what `room` tokens can be, read and no more
    return lead + "\n" + tokens.head(start, room) + "\n[… cut here by coffer]"


def _binary_line(item: Mapping[str, Any]) -> str:
    if item.get("type") in ("image", "audio"):
        data = item.get("data") or ""
        return f"{item['type']} ({item.get('mimeType', '?')}), {human(size(data) * 3 // 4)}: kept, not shown"
    res = item.get("resource") or {}
    if isinstance(res, dict) and isinstance(res.get("blob"), Text):
        return f"blob {res.get('uri', '')} ({res.get('mimeType', '?')}), {human(size(res['blob']) * 3 // 4)}: kept"
    return ""


def shape(value: Any, depth: int = 0) -> str:
    """A JSON value's outline: keys, array lengths, the first items, long strings cut."""
    pad = "  " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        if depth >= 4:
            return f"{{… {len(value)} keys}}"
        keys = list(value)[:SHAPE_KEYS]
        lines = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {shape(value[k], depth + 1)}" for k in keys]
        if len(value) > SHAPE_KEYS:
            lines.append(f"{pad}… {len(value) - SHAPE_KEYS} more keys")
        return "{\n" + ",\n".join(lines) + "\n" + "  " * depth + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if depth >= 4:
            return f"[… {len(value)} items]"
        shown = [f"{pad}{shape(v, depth + 1)}" for v in value[:SHAPE_ITEMS]]
        more = [f"{pad}… {len(value) - SHAPE_ITEMS} more items"] if len(value) > SHAPE_ITEMS else []
        return f"[  // {len(value)} items\n" + ",\n".join(shown + more) + "\n" + "  " * depth + "]"
    if isinstance(value, str) and len(value) > SHAPE_STRING:
        return json.dumps(value[:SHAPE_STRING], ensure_ascii=False)[:-1] + f'…" ({len(value):,} chars)'
    return json.dumps(value, ensure_ascii=False)


def human(size: int) -> str:
    if size < 1024:
        return f"{size:,} bytes"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:,.1f} {unit}"
