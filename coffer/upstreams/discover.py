"""Listing an upstream: every kind it declares, page by page, as raw JSON (a tool with a broken schema
is repaired or dropped on its own, not with the rest), with a cap on pages and on repeated cursors.
(The gateway's own merged lists are paged for hosts by coffer.gateway.paging.)"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import mcp_types as types
from mcp import ClientSession, MCPError

from coffer.upstreams import outbound
from coffer.upstreams.faults import checked_tools
from coffer.vault.catalogue import KINDS, Listing

MAX_PAGES = 50
_LIST_REQUESTS: dict[str, Any] = {
    "tools": types.ListToolsRequest,
    "prompts": types.ListPromptsRequest,
    "resources": types.ListResourcesRequest,
    "resource_templates": types.ListResourceTemplatesRequest,
}
_WIRE_KEY = dict(zip(KINDS, ("tools", "prompts", "resources", "resourceTemplates"), strict=True))


async def list_kinds(
    session: ClientSession, kinds: Iterable[str], before: Listing | None, timeout: float, note: Callable[[str], None]
) -> Listing:
    """A full listing of `kinds` (every page) on top of the one `before`; a kind the server does not
    declare (or answers "method not found" for, tools apart) is empty. `note`: a listing problem."""
    caps = session.server_capabilities
    listing = Listing() if before is None else Listing(**before.as_dict())
    for kind in kinds:
        cap = None if caps is None else getattr(caps, "resources" if kind == "resource_templates" else kind)
        if caps is not None and cap is None:
            setattr(listing, kind, [])
            continue
        try:
            setattr(listing, kind, await _pages(session, kind, timeout, note))
        except MCPError as exc:
            if exc.code != types.METHOD_NOT_FOUND or kind == "tools":
                raise
            setattr(listing, kind, [])
    return listing


async def _pages(
    session: ClientSession, kind: str, timeout: float, note: Callable[[str], None]
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        # raw, not the SDK's validated models: one tool with a broken schema must not sink the others
        page = await outbound.send(session, _LIST_REQUESTS[kind](params=params), timeout=timeout)
        found = [item for item in page.get(_WIRE_KEY[kind]) or [] if isinstance(item, dict)]
        items += checked_tools(found, note) if kind == "tools" else found
        cursor = page.get("nextCursor")
        if not cursor or cursor in seen:  # a server repeating its cursor must not loop forever
            break
        seen.add(cursor)
    else:
        note(f"its {kind} listing was cut after {MAX_PAGES} pages (more were offered)")
    return items
