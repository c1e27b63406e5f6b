"""Cursor pagination of the gateway's merged lists (tools, prompts, resources, templates).

By default a list is one page: Claude Code and Codex keep the list they get at session start, and a
host that did not follow `nextCursor` would silently miss tools. `[settings] page_size = N` pages
every list N items at a time. Either way a cursor is opaque and Coffer's own; one it did not give out
(or one past the end of a list that has since shrunk) is an Invalid params error, never the first page
again, so a host that echoes a stale or foreign cursor learns it instead of looping.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import mcp_types as types
from mcp import MCPError

T = TypeVar("T")
_PREFIX = "coffer-page:"


def page_size(settings: Mapping[str, Any]) -> int:
    """`[settings] page_size`: 0 (one page) unless a positive integer is set; anything else is 0."""
    value = settings.get("page_size", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _encode(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_PREFIX}{offset}".encode()).decode().rstrip("=")


def _decode(cursor: str, total: int) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    offset = raw.removeprefix(_PREFIX)
    if not raw.startswith(_PREFIX) or not offset.isdigit() or int(offset) > total:
        raise MCPError(code=types.INVALID_PARAMS, message=f"invalid cursor {cursor[:64]!r}: list again without one")
    return int(offset)


def page(items: Sequence[T], params: Any, size: int) -> tuple[list[T], str | None]:
    """The page `params.cursor` asks for, and the cursor of the next one (None at the end).

    Raises MCPError (INVALID_PARAMS) for a cursor Coffer did not give out.
    """
    cursor = getattr(params, "cursor", None)
    start = 0 if cursor is None else _decode(cursor, len(items))
    if size <= 0:
        if start:
            raise MCPError(code=types.INVALID_PARAMS, message="invalid cursor: this list has one page")
        return list(items), None
    end = start + size
    return list(items[start:end]), (_encode(end) if end < len(items) else None)


def paged(key: str, items: Sequence[Any], params: Any, size: int) -> dict[str, Any]:
    """A list result (`{key: [...], "nextCursor"?: ...}`) for one page."""
    chunk, next_cursor = page(items, params, size)
    result: dict[str, Any] = {key: chunk}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result
