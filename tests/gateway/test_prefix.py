"""Per-server prefixes: `prefix` in coffer.toml and `coffer add --prefix`, through the CLI and `coffer serve`."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from coffer.errors import RegistryError
from coffer.trust import curation
from coffer.vault import catalogue, registry
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import FIXTURE, serve, text

FIX = ("--", sys.executable, str(FIXTURE), "--mode", "normal")


def add(cli: CliRunner, name: str, *opts: str, code: int = 0) -> str:
    result = run_cli(cli, "add", name, *opts, *FIX, "--name", name, code=code)
    return str(result.stdout) + str(result.stderr)  # type: ignore[attr-defined]


def test_prefix_is_stored_and_applied(cli: CliRunner, coffer_home: Path) -> None:
    add(cli, "alpha", "--prefix", "a")
    add(cli, "beta", "--prefix", "")
    text_ = (coffer_home / "coffer.toml").read_text()
    assert 'prefix = "a"' in text_ and 'prefix = ""' in text_
    reg = registry.load()
    assert reg.servers["alpha"].exposed_prefix == "a" and reg.servers["beta"].exposed_prefix == ""
    snap = catalogue.load_snapshot()
    names = {t.name for t in curation.visible_tools(reg, snap, None)}
    assert {"a__echo", "echo"} <= names
    assert not any(n.startswith(("alpha__", "beta__")) for n in names)
    shown = run_cli(cli, "show", "beta", "--json").stdout  # type: ignore[attr-defined]
    assert '"name": "echo"' in shown and '"prefix": ""' in shown


def test_clashing_prefixes_are_refused_and_nothing_is_written(cli: CliRunner, coffer_home: Path) -> None:
    add(cli, "alpha")
    before = (coffer_home / "coffer.toml").read_text()
    out = add(cli, "beta", "--prefix", "alpha", "--no-probe", code=4)
    assert "prefix 'alpha' is already used by server 'alpha'" in out and out.count("\n") <= 2
    assert (coffer_home / "coffer.toml").read_text() == before
    out = add(cli, "gamma", "--prefix", "coffer", code=2)
    assert "reserved" in out
    out = add(cli, "delta", "--prefix", "Bad__x", code=2)
    assert "invalid prefix" in out


def test_bare_servers_whose_names_clash_are_refused_after_the_probe(cli: CliRunner, coffer_home: Path) -> None:
    add(cli, "alpha", "--prefix", "")
    out = add(cli, "beta", "--prefix", "", code=4)
    assert "not added" in out and "echo" in out and "choose another --prefix" in out
    reg = registry.load()
    assert "beta" not in reg.servers
    snap = catalogue.load_snapshot()
    assert snap is not None and "beta" not in snap.servers  # rolled back with its catalogue entry


def test_hand_edited_prefix_clash_is_a_registry_error(coffer_home: Path) -> None:
    coffer_home.mkdir(parents=True, exist_ok=True)
    path = coffer_home / "coffer.toml"
    path.write_text('[servers.alpha]\ncommand = "x"\nprefix = "p"\n\n[servers.beta]\ncommand = "y"\nprefix = "p"\n')
    with pytest.raises(RegistryError, match=r"coffer.toml:\d+: servers\.\w+: prefix 'p' is already used"):
        registry.load(path)


def test_long_bare_names_keep_the_budget() -> None:
    long = "x" * 80
    (tool,) = catalogue.build_tools("srv", [{"name": long}], prefix="")
    assert len(tool.name) <= catalogue.MAX_NAME and tool.name.startswith("xxx") and tool.tool == long
    (plain,) = catalogue.build_tools("srv", [{"name": "ok"}], prefix="")
    assert plain.name == "ok"


@pytest.mark.anyio
async def test_served_under_the_prefix(cli: CliRunner, coffer_home: Path) -> None:
    await anyio.to_thread.run_sync(lambda: add(cli, "alpha", "--prefix", "a"))
    await anyio.to_thread.run_sync(lambda: add(cli, "beta", "--prefix", ""))
    async with serve(coffer_home) as s:
        names = await s.tool_names()
        assert {"a__echo", "echo", "coffer__search_tools"} <= set(names)
        assert text(await s.call("a__echo", {"text": "one"})) == "one"
        assert text(await s.call("echo", {"text": "two"})) == "two"
        prompts = [p.name for p in (await s.session.list_prompts()).prompts]
        assert {"a__greet", "greet"} <= set(prompts)
        found = await s.call("coffer__search_tools", {"query": "echo the text back"})
        assert found.structured_content is not None
        assert {t["name"] for t in found.structured_content["tools"]} >= {"a__echo", "echo"}
