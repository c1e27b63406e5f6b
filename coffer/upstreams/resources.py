"""Knowledge from upstreams: the text resources coffer__ask indexes, read through the upstream's session."""

from __future__ import annotations

import mcp_types as types
from mcp.shared.exceptions import MCPError

from coffer.upstreams.upstream import Upstream, UpstreamUnavailable

_BINARY_MIME = ("image/", "audio/", "video/", "font/", "application/octet-stream", "application/pdf", "application/zip")


async def text_resources(up: Upstream, limit: int = 100, max_bytes: int = 256 * 1024) -> list[tuple[str, str, str]]:
    """(uri, name, text) of this server's text resources, for coffer__ask; binary or big ones skipped."""
    out: list[tuple[str, str, str]] = []
    for res in (up.listing.resources if up.listing else [])[:limit]:
        uri, mime, size = res.get("uri"), str(res.get("mimeType") or ""), res.get("size")
        if not isinstance(uri, str) or mime.startswith(_BINARY_MIME) or (isinstance(size, int) and size > max_bytes):
            continue
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
        try:
            result = await up.request(request, timeout=min(up.cfg.timeout, 10.0))
        except (MCPError, UpstreamUnavailable):
            continue
        texts = [
            c["text"] for c in result.get("contents") or [] if isinstance(c, dict) and isinstance(c.get("text"), str)
        ]
        text = "\n\n".join(texts)
        if text.strip() and len(text.encode("utf-8", "replace")) <= max_bytes:
            out.append((uri, str(res.get("title") or res.get("name") or uri), text))
    return out
