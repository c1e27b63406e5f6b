"""The MCP Registry API v0.1, read: every latest entry page by page (only those changed since the last
read, with `updated_since`), and one server's versions. Any registry that speaks the API works: the
official one, a company's own, the test suite's on 127.0.0.1.

Every failure (unreachable, an HTTP error, a body that is not the API's JSON) is one DiscoveryError line
naming the registry; an entry that does not parse is skipped and counted, never fatal to a page.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from coffer.discovery.entries import DiscoveryError, Entry, parse_item

PAGE = 100  # the API's largest page
TIMEOUT_S = 20.0
MAX_PAGES = 2000  # 200,000 entries: a registry that never stops paging is broken, not big


@dataclass
class Page:
    entries: list[Entry] = field(default_factory=list)
    skipped: int = 0  # items that were not a usable server.json
    cursor: str | None = None


class RegistryClient:
    """One registry's base URL (`https://registry.modelcontextprotocol.io`), over one HTTP connection."""

    def __init__(self, base: str, timeout: float = TIMEOUT_S) -> None:
        import httpx2

        self.base = base.rstrip("/")
        self._http = httpx2.Client(timeout=timeout, follow_redirects=True, headers={"Accept": "application/json"})

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def _get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        import httpx2

        url = f"{self.base}{path}"
        try:
            answer = self._http.get(url, params=params)
        except httpx2.HTTPError as exc:
            raise DiscoveryError(f"registry {self.base} cannot be reached: {type(exc).__name__}") from None
        if answer.status_code == 404:
            raise LookupError(path)
        if answer.status_code != 200:
            raise DiscoveryError(f"registry {self.base} answered HTTP {answer.status_code} for {path}")
        try:
            body = answer.json()
        except ValueError:
            raise DiscoveryError(f"registry {self.base} did not answer JSON for {path}") from None
        if not isinstance(body, dict):
            raise DiscoveryError(f"registry {self.base} answered something other than the Registry API for {path}")
        return body

    def pages(self, updated_since: str | None = None) -> Iterator[Page]:
        """Every latest server version, a page at a time; with `updated_since`, only those changed since."""
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params = {"limit": str(PAGE), "version": "latest"}
            if cursor:
                params["cursor"] = cursor
            if updated_since:
                params["updated_since"] = updated_since
            body = self._get("/v0.1/servers", params)
            items = body.get("servers")
            if not isinstance(items, list):
                raise DiscoveryError(f"registry {self.base} answered a page without a 'servers' list")
            page = _page(items, self.base)
            meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
            nxt = meta.get("nextCursor") if isinstance(meta, dict) else None
            page.cursor = nxt if isinstance(nxt, str) and nxt else None
            yield page
            if page.cursor is None or page.cursor == cursor:
                return
            cursor = page.cursor
        raise DiscoveryError(f"registry {self.base} kept paging past {MAX_PAGES * PAGE} entries")

    def version(self, name: str, version: str = "latest") -> Entry:
        """One server version (`latest` by default); NotFound as a DiscoveryError naming the name."""
        path = f"/v0.1/servers/{quote(name, safe='')}/versions/{quote(version, safe='')}"
        try:
            body = self._get(path)
        except LookupError:
            what = name if version == "latest" else f"{name} version {version}"
            raise DiscoveryError(f"registry {self.base} has no server {what}") from None
        return parse_item(body, self.base)


def _page(items: list[Any], base: str) -> Page:
    page = Page()
    for item in items:
        try:
            page.entries.append(parse_item(item, base))
        except DiscoveryError:
            page.skipped += 1
    return page
