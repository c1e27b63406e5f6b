"""`coffer find`, `coffer add NAME`, `coffer outdated` and `coffer upgrade` through the real Typer app
against a real HTTP registry on 127.0.0.1 serving recorded real server.json entries."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.trust import secrets
from coffer.trust.pinning import Pins
from coffer.vault import registry
from tests.conftest import run_cli
from tests.fixtures.registry_server import RecordedRegistry, recorded


@pytest.fixture
def reg(coffer_home: Path) -> Iterator[RecordedRegistry]:
    with RecordedRegistry() as server:
        yield server


def found(cli: CliRunner, *args: str) -> list[str]:
    out = json.loads(run_cli(cli, "find", *args, "--json").stdout)  # type: ignore[attr-defined]
    return [s["name"] for s in out["servers"]]


def test_find_ranks_by_what_servers_do(cli: CliRunner, reg: RecordedRegistry) -> None:
    assert found(cli, "open a pull request", "--registry", reg.url)[0] == "io.github.github/github-mcp-server"
    postgres = found(cli, "query a postgres database", "--registry", reg.url)
    assert postgres[0] in ("io.github.neverinfamous/postgres-mcp", "com.neon/mcp")
    assert set(postgres[:2]) == {"io.github.neverinfamous/postgres-mcp", "com.neon/mcp"}
    assert found(cli, "read a Figma design file", "--registry", reg.url)[0] == "io.github.GLips/Figma-Context-MCP"
    # the human table says what the registry is and how old its cache is
    assert "io.github.brave/brave-search-mcp-server" in found(cli, "search the web", "--registry", reg.url, "-n", "3")
    table = run_cli(cli, "find", "search the web", "--registry", reg.url, "-n", "3").stdout  # type: ignore[attr-defined]
    assert f"{reg.url}: {len(recorded())} servers, read just now" in table


def test_find_says_when_nothing_fits(cli: CliRunner, reg: RecordedRegistry) -> None:
    """Words no registry server holds find nothing (not the ten nearest by meaning alone), and say so."""
    assert found(cli, "xqzvt blorfing glimbart", "--registry", reg.url) == []
    said = run_cli(cli, "find", "xqzvt blorfing glimbart", "--registry", reg.url, "--offline").stdout  # type: ignore[attr-defined]
    assert "nothing in" in said and "fits 'xqzvt blorfing glimbart'" in said
    assert found(cli, "open a pull request xqzvt", "--registry", reg.url)[0] == "io.github.github/github-mcp-server"


def test_find_works_offline_from_the_cache_and_marks_installed(cli: CliRunner, reg: RecordedRegistry) -> None:
    url = reg.url
    run_cli(cli, "find", "time", "--registry", url, "--refresh")
    run_cli(cli, "add", "io.github.modelcontextprotocol/server-time", "--registry", url, "--no-probe")
    reg.stop()
    out = json.loads(run_cli(cli, "find", "convert time zones", "--registry", url, "--offline", "--json").stdout)  # type: ignore[attr-defined]
    assert out["servers"][0]["name"] == "io.github.modelcontextprotocol/server-time"
    assert out["servers"][0]["installed"] == "time" and out["registries"][0]["age"] == "just now"
    # refreshing against a registry that is down keeps the cache and says so in one line
    down = run_cli(cli, "find", "convert time zones", "--registry", url, "--refresh")
    assert "cannot be reached" in down.stderr and "using its cache" in down.stderr  # type: ignore[attr-defined]
    assert "time" in down.stdout  # type: ignore[attr-defined]


def test_add_by_name_writes_a_pinned_entry_with_its_source_and_secrets(cli: CliRunner, reg: RecordedRegistry) -> None:
    run_cli(cli, "add", "figma", "--registry", reg.url, "--env", "FIGMA_API_KEY=figd_abc123", "--no-probe")
    cfg = registry.load().get("figma")
    assert [cfg.command, *cfg.args] == ["npx", "-y", "figma-developer-mcp@0.13.2", "--stdio"]
    assert cfg.env == {"FIGMA_API_KEY": "${secret:figma.FIGMA_API_KEY}"}
    assert secrets.resolve("figma.FIGMA_API_KEY") == "figd_abc123"
    assert "figd_abc123" not in (registry.load().path.read_text())
    assert cfg.source == {"registry": reg.url, "name": "io.github.GLips/Figma-Context-MCP", "version": "0.13.2"}
    with Pins.open() as pins:
        assert pins.server_state(cfg) == "approved"  # the user's own add, as `coffer add -- ...`


def test_dry_run_shows_what_would_run_and_ask_and_writes_nothing(cli: CliRunner, reg: RecordedRegistry) -> None:
    out = run_cli(cli, "add", "io.github.modelcontextprotocol/server-filesystem", "--registry", reg.url, "--dry-run")
    text = out.stdout  # type: ignore[attr-defined]
    assert "runs: npx -y @modelcontextprotocol/server-filesystem@0.6.3 '<allowed_directory>'" in text
    assert "asks allowed_directory (required; not given)" in text
    docker = shutil.which("docker") is not None
    args = ("add", "github", "--registry", reg.url, "--dry-run", "--via", "oci", "--json")
    shown = json.loads(run_cli(cli, *args, code=0 if docker else 8).stdout)  # type: ignore[attr-defined]
    if docker:  # the token goes to the container by name, its value only in the env
        assert shown["dry_run"]["launch"].endswith(
            "-e GITHUB_PERSONAL_ACCESS_TOKEN ghcr.io/github/github-mcp-server:0.24.0"
        )
        assert shown["dry_run"]["inputs"][0] | {"description": ""} == {
            "name": "token", "required": True, "secret": True, "description": "", "default": None, "given": False
        }  # fmt: skip
    else:
        assert "docker is not installed" in shown["error"]["message"]
    assert not registry.load().servers


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("io.github.nobody/nothing",), 3, "has no server io.github.nobody/nothing"),
        (("nothing-like-it",), 3, "no server 'nothing-like-it' in the registry cache"),
        (("figma",), 2, "needs FIGMA_API_KEY"),
        (("figma", "--env", "NOPE=1"), 2, "takes no input NOPE"),
        (("polymarket",), 8, "nothing Coffer can run: a pypi package that serves streamable-http itself"),
        (("time", "--via", "oci"), 8, "has no oci package or remote"),
        (("time", "--as", "Bad Name"), 2, "invalid server name"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    cli: CliRunner, reg: RecordedRegistry, args: tuple[str, ...], code: int, message: str
) -> None:
    run_cli(cli, "find", "anything", "--registry", reg.url)  # the cache short names resolve from
    before = registry.load().path.read_text() if registry.load().path.exists() else None
    result = run_cli(cli, "add", *args, "--registry", reg.url, "--no-probe", code=code)
    err = result.stderr.strip()  # type: ignore[attr-defined]
    assert message in err and len(err.splitlines()) == 1
    after = registry.load().path.read_text() if registry.load().path.exists() else None
    assert after == before and not secrets.list_secrets()


def test_a_short_name_in_two_registries_is_ambiguous(cli: CliRunner, coffer_home: Path) -> None:
    with RecordedRegistry() as one, RecordedRegistry() as two:
        coffer_home.mkdir(parents=True, exist_ok=True)
        (coffer_home / "coffer.toml").write_text(f'[registries]\nofficial = "{one.url}"\ncompany = "{two.url}"\n')
        run_cli(cli, "find", "time")
        err = run_cli(cli, "add", "time", "--no-probe", code=2).stderr  # type: ignore[attr-defined]
        assert "'time' is ambiguous" in err
        run_cli(cli, "add", "io.github.modelcontextprotocol/server-time", "--registry", two.url, "--no-probe")
        assert registry.load().get("time").source["registry"] == two.url  # type: ignore[index]


def test_outdated_and_upgrade_go_through_approval(cli: CliRunner, reg: RecordedRegistry) -> None:
    run_cli(cli, "add", "time", "--registry", reg.url, "--no-probe")
    assert "runs its latest version" in run_cli(cli, "outdated", "--registry", reg.url).stdout  # type: ignore[attr-defined]
    newer = copy.deepcopy(next(s for s in recorded() if s["name"].endswith("/server-time")))
    newer["version"] = newer["packages"][0]["version"] = "2026.10.19"
    reg.publish(newer)
    late = json.loads(run_cli(cli, "outdated", "--registry", reg.url, "--json").stdout)  # type: ignore[attr-defined]
    assert late["outdated"] == [
        {"server": "time", "name": "io.github.modelcontextprotocol/server-time", "installed": "0.6.2",
         "latest": "2026.10.19"}
    ]  # fmt: skip
    out = run_cli(cli, "upgrade", "time").stderr  # type: ignore[attr-defined]
    assert "held for approval" in out
    cfg = registry.load().get("time")
    assert cfg.args == ["mcp-server-time==2026.10.19"] and cfg.source["version"] == "2026.10.19"  # type: ignore[index]
    with Pins.open() as pins:
        assert pins.server_state(cfg) == "changed"  # the gateway will not start it until approved
    diff = run_cli(cli, "diff", "time").stdout  # type: ignore[attr-defined]
    assert "mcp-server-time==0.6.2" in diff and "mcp-server-time==2026.10.19" in diff
    run_cli(cli, "approve", "time", "--no-probe")
    with Pins.open() as pins:
        assert pins.server_state(registry.load().get("time")) == "approved"
    assert "already runs" in run_cli(cli, "upgrade", "time", code=4).stderr  # type: ignore[attr-defined]


def test_the_quick_path_answers_find_as_typer_does(cli: CliRunner, reg: RecordedRegistry, coffer_home: Path) -> None:
    """`coffer find` is answered without Typer (coffer.cli.quick), with the same output; a command line
    it does not recognise goes to Typer, which owns the usage errors."""
    import subprocess
    import sys

    from coffer.cli.quick import parse_find
    from tests.conftest import subprocess_env

    assert parse_find(["find", "open a PR", "--json", "-n", "3", "--registry", "http://x"]) == (
        "open a PR", "http://x", 3, "auto", True
    )  # fmt: skip
    assert parse_find(["find", "q", "--limit=2", "--offline"]) == ("q", None, 2, "offline", False)
    for odd in (["find"], ["find", "a", "b"], ["find", "q", "--offline", "--refresh"], ["find", "q", "-n", "x"]):
        assert parse_find(odd) is None
    run_cli(cli, "find", "open a pull request", "--registry", reg.url)  # the cache
    args = ["find", "open a pull request", "--registry", reg.url, "--offline", "--json", "-n", "3"]
    typer_out = json.loads(run_cli(cli, *args).stdout)  # type: ignore[attr-defined]
    env = subprocess_env(coffer_home)
    quick = subprocess.run([sys.executable, "-m", "coffer", *args], env=env, capture_output=True)
    assert quick.returncode == 0 and json.loads(quick.stdout) == typer_out
    assert typer_out["servers"][0]["name"] == "io.github.github/github-mcp-server"


def test_remove_takes_the_secrets_its_install_stored(cli: CliRunner, reg: RecordedRegistry) -> None:
    run_cli(cli, "add", "figma", "--registry", reg.url, "--env", "FIGMA_API_KEY=figd_1", "--no-probe")
    secrets.set_secret("mine", "kept")
    out = json.loads(run_cli(cli, "remove", "figma", "--json").stdout)  # type: ignore[attr-defined]
    assert out["secrets_removed"] == ["figma.FIGMA_API_KEY"]
    assert [s.name for s in secrets.list_secrets()] == ["mine"]  # the user's own stay


def test_upgrade_refuses_a_version_that_needs_more_than_the_entry_gives(cli: CliRunner, reg: RecordedRegistry) -> None:
    run_cli(cli, "add", "figma", "--registry", reg.url, "--env", "FIGMA_API_KEY=figd_1", "--no-probe")
    newer = copy.deepcopy(next(s for s in recorded() if s["name"] == "io.github.GLips/Figma-Context-MCP"))
    newer["version"] = newer["packages"][0]["version"] = "0.14.0"
    newer["packages"][0]["environmentVariables"].append({"name": "FIGMA_TEAM_ID", "isRequired": True})
    reg.publish(newer)
    before = registry.load().path.read_text()
    err = run_cli(cli, "upgrade", "figma", code=8).stderr  # type: ignore[attr-defined]
    assert "needs what 'figma' does not give it: FIGMA_TEAM_ID" in err and len(err.strip().splitlines()) == 1
    assert registry.load().path.read_text() == before


def clone(original: str, name: str, owner: str) -> dict[str, object]:
    """A third party's server for the same product: its own repository and words, the same short name."""
    server = copy.deepcopy(next(s for s in recorded() if s["name"] == original))
    server["name"] = name
    server["repository"] = {"url": f"https://github.com/{owner}/{name.rsplit('/', 1)[-1]}", "source": "github"}
    server["description"] = f"{server['description']} Maintained by {owner}."
    return server


def test_what_find_prints_is_what_add_takes(cli: CliRunner, reg: RecordedRegistry) -> None:
    """Clones share short names (the registry has dozens of `github` servers): `find` prints the short name
    only where `add` takes it for that server (the only one, or the one that is its maker's own), else the
    full registry name; whatever it printed, `add` installs that server."""
    brave, time = "io.github.brave/brave-search-mcp-server", "io.github.modelcontextprotocol/server-time"
    reg.publish(clone(brave, "io.github.someone/brave-search-mcp", "someone"))
    reg.publish(clone(time, "io.github.clocks/time-mcp", "clocks"))
    printed: dict[str, str] = {}
    for query in ("search the web with brave", "current time in a timezone"):
        out = json.loads(run_cli(cli, "find", query, "--registry", reg.url, "--json").stdout)  # type: ignore[attr-defined]
        printed |= {s["name"]: s["add"] for s in out["servers"]}
    assert printed[brave] == "brave-search"  # the maker's own among two `brave-search`es
    assert printed["io.github.someone/brave-search-mcp"] == "io.github.someone/brave-search-mcp"
    assert printed[time] == time and printed["io.github.clocks/time-mcp"] == "io.github.clocks/time-mcp"  # neither's
    for name in (brave, "io.github.someone/brave-search-mcp", time, "io.github.clocks/time-mcp"):
        shown = run_cli(cli, "add", printed[name], "--registry", reg.url, "--dry-run", "--json").stdout  # type: ignore[attr-defined]
        assert json.loads(shown)["dry_run"]["entry"]["name"] == name
    table = run_cli(cli, "find", "search the web with brave", "--registry", reg.url, "-n", "3").stdout  # type: ignore[attr-defined]
    assert "│ brave-search " in table and "│ io.github.someone/brave-search-mcp " in table  # unbroken, to copy
    err = run_cli(cli, "add", "time", "--registry", reg.url, "--no-probe", code=2).stderr  # type: ignore[attr-defined]
    assert "'time' is ambiguous" in err and "io.github.clocks/time-mcp" in err
