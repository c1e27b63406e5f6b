"""The merged catalogue `coffer serve` advertises: every upstream's listing under exposed names.

Pure: built from the per-server listings and the gateway's `refusal()` (curation and trust), so the
same rule decides what is listed, searchable and callable. Rebuilt only when something changed.

MCP Apps (ext-apps): `ui://` resources, kept apart when two servers use the same URI.

A tool opens its app through `_meta.ui.resourceUri` (and the older flat key `_meta["ui/resourceUri"]`);
servers built from the same template name their app alike (`ui://get-time/mcp-app.html`). Merged as
they are, the second server's tool would open the first server's HTML. So a `ui://` URI another
server already uses (listed as a resource or named by a tool, first server by name keeps it) is
exposed as `ui://<server>/<the rest>`, stable while the registry is; that server's tool `_meta` and
resource list say the new URI, and a read of it reaches that server with its own URI.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coffer.gateway.builtins import described
from coffer.vault.catalogue import CatalogueTool, build_tools

Refusal = Callable[..., str | None]


@dataclass
class Merged:
    """Every listed name (for routing and clear refusals) and the curated view hosts see."""

    tools: dict[str, CatalogueTool] = field(default_factory=dict)
    prompts: dict[str, CatalogueTool] = field(default_factory=dict)
    visible_tools: list[CatalogueTool] = field(default_factory=list)
    tools_result: list[dict[str, Any]] = field(default_factory=list)
    prompts_result: list[dict[str, Any]] = field(default_factory=list)
    resources_result: list[dict[str, Any]] = field(default_factory=list)
    templates_result: list[dict[str, Any]] = field(default_factory=list)
    uri_owner: dict[str, str] = field(default_factory=dict)
    # an exposed `ui://` URI renamed because another server uses it -> (server, the server's own URI)
    ui_aliases: dict[str, tuple[str, str]] = field(default_factory=dict)
    ui_renamed: dict[str, dict[str, str]] = field(default_factory=dict)  # server -> {own URI: exposed URI}
    templates: list[tuple[str, Any]] = field(default_factory=list)
    key: str = ""  # hash of the visible tools: the ranker is rebuilt only when it changes
    builtins: list[dict[str, Any]] = field(default_factory=list)  # as advertised: search says what is here


def merge(
    lists: Mapping[str, Mapping[str, list[dict[str, Any]]]],
    refusal: Refusal,
    builtins: list[dict[str, Any]],
    prefixes: Mapping[str, str] | None = None,
) -> Merged:
    """Merge per-server listings (wire dicts); built-ins first, then tools sorted by exposed name.

    `prefixes` gives a server's exposed-name prefix when it is not the server's name ("" for bare
    names). A name two servers would both expose (possible only with prefixes) goes to the first
    server by name, and never shadows a built-in. Resources keep their URIs; when two servers list
    the same URI the first server by name owns it, except MCP Apps' `ui://` URIs, which are renamed
    for the later server (`aliases`), so each tool opens its own server's app.
    """
    from mcp.shared.uri_template import UriTemplate

    m = Merged(tools_result=list(builtins))
    reserved = {str(b.get("name")) for b in builtins}
    shown_servers = [s for s in sorted(lists) if refusal(s) is None]
    m.ui_renamed = aliases(lists, shown_servers)
    for server, renamed in m.ui_renamed.items():
        m.ui_aliases.update({exposed: (server, own) for own, exposed in renamed.items()})
    wire_of: dict[str, dict[str, Any]] = {}
    listed: set[str] = set()
    for server in sorted(lists):
        kinds = lists[server]
        shown = refusal(server) is None
        prefix = (prefixes or {}).get(server)
        renamed = m.ui_renamed.get(server, {})
        for uri in server_ui_uris(kinds) if shown else []:  # an app a tool names but no resource lists
            m.uri_owner.setdefault(renamed.get(uri, uri), server)
        for t in build_tools(server, kinds.get("tools", []), prefix):
            if t.name in m.tools or t.name in reserved:
                continue
            m.tools[t.name] = t
            if shown and refusal(server, t.tool, t.name) is None:
                m.visible_tools.append(t)
                if renamed:
                    wire_of[t.name] = rewrite_meta(t.wire, renamed)
        for p in build_tools(server, kinds.get("prompts", []), prefix):
            if p.name in m.prompts:
                continue
            m.prompts[p.name] = p
            if shown:
                m.prompts_result.append(p.wire)
        if not shown:
            continue
        for res in kinds.get("resources", []):
            uri = str(res.get("uri", ""))
            exposed = renamed.get(uri, uri)
            if exposed and m.uri_owner.get(exposed) in (None, server) and exposed not in listed:
                m.uri_owner[exposed] = server
                listed.add(exposed)
                m.resources_result.append({**res, "uri": exposed} if exposed != uri else res)
        for tpl in kinds.get("resource_templates", []):
            try:
                m.templates.append((server, UriTemplate.parse(str(tpl.get("uriTemplate", "")))))
            except ValueError:
                continue
            m.templates_result.append(tpl)
    m.visible_tools.sort(key=lambda t: t.name)
    m.builtins = described(list(builtins), m.visible_tools)
    m.tools_result = list(m.builtins)
    digest = hashlib.sha256()
    for t in m.visible_tools:
        m.tools_result.append(wire_of.get(t.name) or t.wire)
        digest.update(json.dumps([t.name, t.description, t.input_schema], sort_keys=True).encode())
    m.key = digest.hexdigest()[:16]
    return m


# ------------------------------------------------------------------ MCP Apps' ui:// URIs

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
