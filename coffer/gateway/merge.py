"""The merged catalogue `coffer serve` advertises: every upstream's listing under exposed names.

Pure: built from the per-server listings and the gateway's `refusal()` (curation and trust), so the
same rule decides what is listed, searchable and callable. Rebuilt only when something changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
    templates: list[tuple[str, Any]] = field(default_factory=list)
    key: str = ""  # hash of the visible tools: the ranker is rebuilt only when it changes


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
    the same URI the first server by name owns it.
    """
    from mcp.shared.uri_template import UriTemplate

    m = Merged(tools_result=list(builtins))
    reserved = {str(b.get("name")) for b in builtins}
    for server in sorted(lists):
        kinds = lists[server]
        shown = refusal(server) is None
        prefix = (prefixes or {}).get(server)
        for t in build_tools(server, kinds.get("tools", []), prefix):
            if t.name in m.tools or t.name in reserved:
                continue
            m.tools[t.name] = t
            if shown and refusal(server, t.tool, t.name) is None:
                m.visible_tools.append(t)
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
            if uri and uri not in m.uri_owner:
                m.uri_owner[uri] = server
                m.resources_result.append(res)
        for tpl in kinds.get("resource_templates", []):
            try:
                m.templates.append((server, UriTemplate.parse(str(tpl.get("uriTemplate", "")))))
            except ValueError:
                continue
            m.templates_result.append(tpl)
    m.visible_tools.sort(key=lambda t: t.name)
    digest = hashlib.sha256()
    for t in m.visible_tools:
        m.tools_result.append(t.wire)
        digest.update(json.dumps([t.name, t.description, t.input_schema], sort_keys=True).encode())
    m.key = digest.hexdigest()[:16]
    return m
