"""`coffer find` over a company's own registry of ten servers (recorded real entries served over HTTP on
127.0.0.1): the cut-off for words no server holds scales with the registry, so what fits best in a small
one is still offered, and made-up words still find nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer.discovery.rank import _absent_share
from coffer.manage.discover import find
from tests.fixtures.registry_server import DATA, RecordedRegistry

TEN = ("time", "github", "filesystem", "fetch", "git", "memory", "postgres", "playwright", "brave-search", "figma")
TIME = "io.github.modelcontextprotocol/server-time"


@pytest.fixture
def ten(coffer_home: Path) -> Iterator[str]:
    servers = [json.loads((DATA / f"{name}.json").read_text()) for name in TEN]
    with RecordedRegistry(servers) as registry:
        find("read it once", url=registry.url, mode="refresh")
        yield registry.url


def _names(query: str, url: str) -> list[str]:
    return [hit["name"] for hit in find(query, url=url, mode="offline").hits]


def test_a_small_registry_offers_what_fits_best(ten: str) -> None:
    for ask in ("what time is it in another city", "time in another city", "current time"):
        assert _names(ask, ten)[:1] == [TIME], ask
    assert _names("open a pull request xqzvt", ten)[:1] == ["io.github.github/github-mcp-server"]


def test_made_up_words_find_nothing_in_a_small_registry(ten: str) -> None:
    for ask in ("glorp the snazzle frindex", "xqzvt blorfing glimbart", "vorpal quuxing of blimflarks"):
        assert _names(ask, ten) == [], ask


def test_absence_counts_as_much_as_the_registry_reaches() -> None:
    assert _absent_share(0.8, 1.0) == pytest.approx(0.8)  # the official registry: absence says it all
    assert _absent_share(0.8, 0.12) < 0.5  # ten servers: most everyday words are simply not there
    assert _absent_share(1.0, 0.12) == pytest.approx(1.0) and _absent_share(0.0, 1.0) == 0.0


def _remote(name: str, description: str, url: str) -> dict[str, object]:
    return {
        "name": name,
        "description": description,
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": url}],
    }


def test_a_product_names_its_makers_own_server_though_the_server_does_not_name_it(coffer_home: Path) -> None:
    """Jira is Atlassian's (the maker list, coffer.discovery.brands): Atlassian's own server, whose entry
    says only "Atlassian Rovo MCP Server", leads third parties' Jira servers."""
    servers = [
        _remote("com.atlassian/atlassian-mcp-server", "Atlassian Rovo MCP Server", "https://mcp.atlassian.com/v1/mcp"),
        _remote("io.github.someone/jira-mcp", "Create and search Jira tickets", "https://jira.example.com/mcp"),
        _remote("io.github.other/jira-tools", "Jira ticket tools for agents", "https://tools.example.com/mcp"),
        *(json.loads((DATA / f"{name}.json").read_text()) for name in TEN[:4]),
    ]
    with RecordedRegistry(servers) as registry:
        find("read it once", url=registry.url, mode="refresh")
        hits = find("create a Jira ticket", url=registry.url, mode="offline").hits
    assert hits[0]["name"] == "com.atlassian/atlassian-mcp-server" and hits[0]["makers_own"], hits[:3]
    assert {"io.github.someone/jira-mcp", "io.github.other/jira-tools"} <= {h["name"] for h in hits}
