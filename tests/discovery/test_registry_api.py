"""The registry cache against a real HTTP registry on 127.0.0.1 (tests/fixtures/registry_server.py):
a full read pages through, a later read asks only for what changed (`updated_since`), a deletion
leaves, and a registry that is down or answers garbage is one line naming it, the cache kept."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.discovery import cache
from coffer.discovery.client import RegistryClient
from coffer.discovery.entries import DiscoveryError
from tests.conftest import run_cli
from tests.fixtures.registry_server import RecordedRegistry, recorded


def test_a_full_read_pages_through_then_only_changes_are_read(coffer_home: Path) -> None:
    with RecordedRegistry(page_limit=7) as reg:
        changed, skipped = cache.refresh(reg.url)
        assert (changed, skipped) == (len(recorded()), 0)
        pages = [r for r in reg.requests if r.startswith("/v0.1/servers?")]
        assert len(pages) == -(-len(recorded()) // 7)  # every page, each once
        assert all("version=latest" in r and "updated_since" not in r for r in pages)
        rows, generation = cache.index_rows([reg.url]), cache.generation([reg.url])
        assert len(rows) == len(recorded())

        newer = copy.deepcopy(next(s for s in recorded() if s["name"].endswith("/server-time")))
        newer["version"] = newer["packages"][0]["version"] = "2026.10.19"
        reg.publish(newer)
        reg.delete("io.github.0xmortuex/gdbstub-mcp")
        reg.requests.clear()
        assert cache.refresh(reg.url) == (2, 0)
        assert len(reg.requests) == 1 and "updated_since=2026-11-01" in reg.requests[0]
        assert cache.entry(reg.url, "io.github.modelcontextprotocol/server-time").version == "2026.10.19"  # type: ignore[union-attr]
        assert cache.entry(reg.url, "io.github.0xmortuex/gdbstub-mcp") is None
        rows2, generation2 = cache.index_rows([reg.url]), cache.generation([reg.url])
        assert len(rows2) == len(rows) - 1 and generation2 != generation
        reg.requests.clear()
        assert cache.refresh(reg.url) == (0, 0)  # nothing changed: the key of the saved index stays
        assert cache.generation([reg.url]) == generation2


def test_one_unreadable_entry_is_skipped_not_fatal(coffer_home: Path) -> None:
    servers = [*recorded()[:5], {"name": "db-metadata-extractor-mcp", "version": "1.0.0"}]
    with RecordedRegistry(servers) as reg:
        assert cache.refresh(reg.url) == (5, 1)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("error", "answered HTTP 503"),
        ("html", "did not answer JSON"),
        ("garbage", "without a 'servers' list"),
        ("down", "cannot be reached"),
    ],
)
def test_a_registry_that_is_down_or_answers_garbage_is_one_line(coffer_home: Path, mode: str, message: str) -> None:
    with RecordedRegistry() as reg:
        url = reg.url
        cache.refresh(url)
        before = cache.index_rows([url]), cache.generation([url])
        if mode == "down":
            reg.stop()
        else:
            reg.mode = mode
        with pytest.raises(DiscoveryError) as caught:
            cache.refresh(url)
        assert message in str(caught.value) and url in str(caught.value) and "\n" not in str(caught.value)
        assert (cache.index_rows([url]), cache.generation([url])) == before  # the cache stays as it was


def test_one_version_by_name_and_a_missing_one(coffer_home: Path) -> None:
    with RecordedRegistry() as reg, RegistryClient(reg.url) as client:
        gh = client.version("io.github.github/github-mcp-server")
        assert gh.version == "0.24.0" and gh.is_latest and gh.updated_at.startswith("2026-11-01")
        with pytest.raises(DiscoveryError, match=r"has no server io\.github\.nobody/nothing"):
            client.version("io.github.nobody/nothing")
        with pytest.raises(DiscoveryError, match=r"version 9\.9\.9"):
            client.version("io.github.github/github-mcp-server", "9.9.9")


def test_a_full_read_tells_its_progress_page_by_page(coffer_home: Path) -> None:
    """`coffer find`'s progress display counts what each page brought (the registry says no total)."""
    seen: list[int] = []
    with RecordedRegistry(page_limit=7) as reg:
        cache.refresh(reg.url, on_page=seen.append)
    assert len(seen) == -(-len(recorded()) // 7) and sum(seen) == len(recorded())


def test_a_damaged_cache_is_set_aside_and_read_again(
    coffer_home: Path, cli: CliRunner, caplog: pytest.LogCaptureFixture
) -> None:
    """The cache is derived data: one that is not a database is kept beside itself as `.unreadable`, said
    once, and the next read fills a new one. Before: a traceback from every `find` and `doctor`."""
    where = cache.cache_path()
    where.write_bytes(b"not a database " * 100)
    with RecordedRegistry() as reg:
        empty = run_cli(cli, "find", "time", "--registry", reg.url, "--offline")
        assert "the registry cache is empty" in empty.stderr  # type: ignore[attr-defined]
        assert "set aside as" in caplog.text and "file is not a database" in caplog.text
        assert where.with_name("registries.db.unreadable").read_bytes() == b"not a database " * 100
        run_cli(cli, "find", "time", "--registry", reg.url, "--refresh")
        assert cache.entry(reg.url, "io.github.modelcontextprotocol/server-time") is not None  # read anew
