"""`coffer find` at the registry's real size: the official registry as recorded (11,978 servers), read
over HTTP from a local v0.1 registry. The recording is test data outside the project (../shared):
these tests skip, saying so, where it is absent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import run_cli
from tests.fixtures.registry_server import WORLD, RecordedRegistry, recorded, world

pytestmark = pytest.mark.skipif(not WORLD.exists(), reason=f"the recorded registry is not here: {WORLD}")


@pytest.fixture(scope="module")
def world_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """One full read of the recorded registry into a cache, shared by this module's tests."""
    home = tmp_path_factory.mktemp("world") / "vault"
    mp = pytest.MonkeyPatch()
    mp.setenv("COFFER_HOME", str(home))
    with world() as registry:
        run_cli(CliRunner(), "find", "warm", "--registry", registry.url, "--refresh")
        yield home, registry.url
    mp.undo()


def find(home: Path, url: str, query: str, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    monkeypatch.setenv("COFFER_HOME", str(home))
    out = run_cli(CliRunner(), "find", query, "--registry", url, "--offline", "--json").stdout  # type: ignore[attr-defined]
    return list(json.loads(out)["servers"])


@pytest.mark.parametrize(
    ("query", "makers"),
    [
        ("open a pull request on GitHub", "io.github.github/github-mcp-server"),
        ("search my Notion pages", "com.notion/mcp"),
        ("refund a Stripe payment", "com.stripe/mcp"),
        ("merge request in GitLab", "com.gitlab/mcp"),
    ],
)
def test_a_makers_own_server_leads_third_party_ones(
    world_home: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, query: str, makers: str
) -> None:
    """Before: GitHub's own server 7th behind third parties' `github`, Notion's and GitLab's not shown."""
    hits = find(*world_home, query, monkeypatch)
    names = [h["name"] for h in hits]
    assert makers in names[:3], names[:5]
    own = hits[names.index(makers)]
    assert own["makers_own"] is True and own["fit"] in ("good", "partial")
    assert all(not h["makers_own"] for h in hits if h["short"] == own["short"] and h["name"] != makers)


def test_a_publishers_server_for_another_product_is_not_that_products_makers_own(
    world_home: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "post to slack" led with Smithery's `ai.smithery/smithery-ai-slack`, shown as the maker's
    own (its name holds its publisher's) and weighed as one; asked for by Smithery's name, it is."""
    hits = find(*world_home, "post to slack", monkeypatch)
    connector = "ai.smithery/smithery-ai-slack"
    assert hits and hits[0]["name"] != connector
    assert all(not h["makers_own"] for h in hits if h["name"] == connector)
    by_name = find(*world_home, "post to slack with smithery", monkeypatch)
    assert any(h["name"] == connector and h["makers_own"] for h in by_name), [h["name"] for h in by_name[:5]]


def test_a_server_named_for_its_maker_only_by_its_namespace_is_found_by_the_makers_name(
    world_home: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: nothing at all for "Cloudinary": Cloudinary's `io.github.cloudinary/asset-management-mcp`
    says the word nowhere but in its namespace."""
    for query in ("upload an image to Cloudinary", "cloudinary"):
        names = [h["name"] for h in find(*world_home, query, monkeypatch)]
        assert "io.github.cloudinary/asset-management-mcp" in names[:3], (query, names[:5])


def test_what_fits_nothing_finds_nothing_and_every_hit_says_how_well_it_fits(
    world_home: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: 10 servers for made-up words with one real one among them ("quantum")."""
    assert find(*world_home, "flurb the quantum marmalade", monkeypatch) == []
    hits = find(*world_home, "get the weather forecast for a city", monkeypatch)
    assert hits and all(h["fit"] in ("good", "partial") for h in hits)
    assert all("weather" in f"{h['name']} {h['description']}".lower() for h in hits[:3])
    said = run_cli(CliRunner(), "find", "flurb the quantum marmalade", "--registry", world_home[1], "--offline").stdout  # type: ignore[attr-defined]
    assert "nothing in 11978 registry servers fits" in said


def found(cli: CliRunner, url: str, query: str, *more: str) -> list[dict[str, object]]:
    out = run_cli(cli, "find", query, "--registry", url, "--json", *more).stdout  # type: ignore[attr-defined]
    return list(json.loads(out)["servers"])


def test_clones_fold_under_the_best_and_deprecated_servers_sink(cli: CliRunner) -> None:
    """A server republished under another name with the same code folds under the first; one its
    publisher deprecated ranks after one that is kept up."""
    servers = recorded()
    github = next(s for s in servers if s["name"] == "io.github.github/github-mcp-server")
    clone = json.loads(json.dumps(github)) | {"name": "io.github.someone/github-mcp-server"}
    with RecordedRegistry([*servers, clone]) as registry:
        hits = found(cli, registry.url, "open a pull request")
        names = [h["name"] for h in hits]
        assert names[0] == "io.github.github/github-mcp-server" and "io.github.someone/github-mcp-server" not in names
        assert hits[0]["also"] == ["io.github.someone/github-mcp-server"]
        before = [h["name"] for h in found(cli, registry.url, "query a postgres database")]
        registry.deprecate(str(before[0]))
        after = [h["name"] for h in found(cli, registry.url, "query a postgres database", "--refresh")]
        assert after[0] == before[1] and before[0] in after[1:]
