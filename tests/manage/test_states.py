"""One state per server, with its reason, the same in `coffer list`, `show`, `status` and the console's JSON
API (coffer.manage.states); a tool of a server that never listed is refused as such; a typo'd name gets
the name meant. Before: "did not list" in `list`, "ok" in `show --json`, "ok" and "failed" at once in the
console, and "unknown tool" for a server that never listed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from coffer.console import api
from coffer.vault import catalogue
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import FIXTURE, add_fixture, serve


def states(cli: CliRunner, name: str) -> list[tuple[str, str | None]]:
    """(state, reason) of `name` as list --json, show --json and the console's /api/servers say it."""
    listed = {r["name"]: r for r in json.loads(run_cli(cli, "list", "--json").stdout)["servers"]}  # type: ignore[attr-defined]
    shown = json.loads(run_cli(cli, "show", name, "--json").stdout)["server"]  # type: ignore[attr-defined]
    console = {r["name"]: r for r in api.servers({}, {})["servers"]}
    return [(r["state"], r["reason"]) for r in (listed[name], shown, console[name])]


def test_a_server_that_never_listed_is_did_not_list_everywhere_and_its_tools_say_why(
    cli: CliRunner, coffer_home: Path
) -> None:
    run_cli(cli, "add", "dead", "--timeout", "5", "--", sys.executable, str(FIXTURE), "--mode", "crash_start", code=6)
    said = states(cli, "dead")
    assert len(set(said)) == 1, said
    state, reason = said[0]
    assert state == "did not list" and "exited with code 3" in str(reason) and "`coffer doctor dead`" in str(reason)
    table = run_cli(cli, "list")
    assert "did not list: `coffer doctor dead`" in table.stdout  # type: ignore[attr-defined]
    assert "dead: exited with code 3" in table.stderr  # type: ignore[attr-defined]  # the reason, under it
    for verb in ("disable", "enable"):
        refused = run_cli(cli, verb, "dead__echo", code=3).stderr  # type: ignore[attr-defined]
        assert "'dead' never listed its tools (its last start failed: " in refused and "--force" in refused
        assert "unknown tool" not in refused

    run_cli(cli, "add", "later", "--no-probe", "--", sys.executable, str(FIXTURE))
    assert set(states(cli, "later")) == {("not listed yet", "never started: `coffer refresh later` lists its tools")}
    run_cli(cli, "disable", "later")
    assert set(states(cli, "later")) == {("disabled", "`coffer enable later` turns it on")}


def test_a_typo_gets_the_name_meant(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "github", "--no-probe", "--", "echo")
    tools = [{"name": n, "description": n, "inputSchema": {"type": "object"}} for n in ("create_issue", "list_issues")]
    catalogue.save_server("github", tools=tools)
    meant = "unknown server 'githb'; did you mean 'github'? (see `coffer list`)"
    for args in (["show", "githb"], ["remove", "githb"], ["edit", "githb", "--timeout", "9"], ["disable", "githb"]):
        assert meant in run_cli(cli, *args, code=3).stderr, args  # type: ignore[attr-defined]
    for verb in ("disable", "enable"):
        typo = run_cli(cli, verb, "github__create_isue", code=3).stderr  # type: ignore[attr-defined]
        assert "unknown tool 'create_isue' on server 'github'; did you mean 'create_issue'?" in typo
    assert "did you mean" not in run_cli(cli, "show", "zzz", code=3).stderr  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_the_engines_process_is_the_state_in_list_show_status_and_the_console(
    cli: CliRunner, coffer_home: Path
) -> None:
    add_fixture(coffer_home, "alpha", timeout=60)  # a loaded machine's start is no failure here
    add_fixture(coffer_home, "beta", "crash_start", timeout=60)  # never listed; its process under the engine fails

    def said() -> dict[str, Any]:
        status = json.loads(run_cli(cli, "status", "--json").stdout)  # type: ignore[attr-defined]
        return {n: (s["state"], s["reason"]) for n, s in (status["servers"] or {}).items()}

    async with serve(coffer_home) as agent:
        await agent.session.list_tools()
        seen: dict[str, Any] = {}
        with anyio.fail_after(90):
            while seen.get("beta", ("",))[0] not in ("failed", "down") or seen["alpha"][0] != "ok":
                await anyio.sleep(0.1)
                seen = said()
        beta = said()["beta"]
        assert "exit" in str(beta[1]) and "the engine's process" in str(beta[1])
        assert set(states(cli, "beta")) == {beta}  # list, show and the console: one state, not "ok" and "failed"
        assert {s for s, _ in states(cli, "alpha")} == {"ok"}
        console = {r["name"]: r for r in api.servers({}, {})["servers"]}
        assert console["beta"]["processes"][0]["state"] == beta[0]
