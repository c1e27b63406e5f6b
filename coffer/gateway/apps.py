"""MCP Apps (ext-apps): `ui://` resources, kept apart when two servers use the same URI.

A tool opens its app through `_meta.ui.resourceUri` (and the older flat key `_meta["ui/resourceUri"]`);
servers built from the same template name their app alike (`ui://get-time/mcp-app.html`). Merged as
they are, the second server's tool would open the first server's HTML. So a `ui://` URI another
server already uses (listed as a resource or named by a tool, first server by name keeps it) is
exposed as `ui://<server>/<the rest>`, stable while the registry is; that server's tool `_meta` and
resource list say the new URI, and a read of it reaches that server with its own URI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCHEME = "ui://"
FLAT_KEY = "ui/resourceUri"


def tool_ui_uris(tool: Mapping[str, Any]) -> list[str]:
    """The `ui://` URIs a tool definition (or a call result) names in its `_meta`."""
    meta = tool.get("_meta")
    if not isinstance(meta, dict):
        return []
    found = []
    nested = meta.get("ui")
    if isinstance(nested, dict) and isinstance(nested.get("resourceUri"), str):
        found.append(nested["resourceUri"])
    if isinstance(meta.get(FLAT_KEY), str):
        found.append(meta[FLAT_KEY])
    return [u for u in found if u.startswith(SCHEME)]


def server_ui_uris(kinds: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """Every `ui://` URI a server uses: its listed resources and its tools' `_meta`, in order, once."""
    uris = [str(r.get("uri", "")) for r in kinds.get("resources", []) if str(r.get("uri", "")).startswith(SCHEME)]
    for tool in kinds.get("tools", []):
        uris += tool_ui_uris(tool)
    return list(dict.fromkeys(uris))


def aliases(lists: Mapping[str, Mapping[str, list[dict[str, Any]]]], servers: list[str]) -> dict[str, dict[str, str]]:
    """server -> {its URI: the URI exposed for it}, for the `ui://` URIs an earlier server in `servers` uses."""
    taken: set[str] = set()
    out: dict[str, dict[str, str]] = {}
    for server in servers:
        mine = server_ui_uris(lists[server])
        clashing = [u for u in mine if u in taken]
        taken.update(u for u in mine if u not in clashing)
        for uri in clashing:
            exposed = f"{SCHEME}{server}/{uri.removeprefix(SCHEME)}"
            n = 2
            while exposed in taken:
                exposed, n = f"{SCHEME}{server}/{uri.removeprefix(SCHEME)}~{n}", n + 1
            taken.add(exposed)
            out.setdefault(server, {})[uri] = exposed
    return out


def rewrite_meta(item: dict[str, Any], renamed: Mapping[str, str]) -> dict[str, Any]:
    """`item` (a tool definition or call result) with its `_meta` UI URIs renamed; `item` itself when
    nothing changes (never modified in place: listings are shared)."""
    meta = item.get("_meta")
    if not renamed or not isinstance(meta, dict) or not any(u in renamed for u in tool_ui_uris(item)):
        return item
    meta = dict(meta)
    nested = meta.get("ui")
    if isinstance(nested, dict) and nested.get("resourceUri") in renamed:
        meta["ui"] = {**nested, "resourceUri": renamed[nested["resourceUri"]]}
    if meta.get(FLAT_KEY) in renamed:
        meta[FLAT_KEY] = renamed[meta[FLAT_KEY]]
    return {**item, "_meta": meta}


def rewrite_contents(result: dict[str, Any], upstream_uri: str, exposed_uri: str) -> dict[str, Any]:
    """A resources/read result with the upstream's URI given back as the one the host asked for."""
    if upstream_uri == exposed_uri or not isinstance(result.get("contents"), list):
        return result
    contents = [
        {**c, "uri": exposed_uri} if isinstance(c, dict) and c.get("uri") == upstream_uri else c
        for c in result["contents"]
    ]
    return {**result, "contents": contents}
