"""Profiles: a small tool surface for clients without tool search, through the CLI and `coffer serve`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from coffer.log.calls import CallLog, CallRecord, open_log
from coffer.log.query import query
from coffer.vault import registry
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import add_fixture, serve, text

pytestmark = pytest.mark.anyio
BUILTINS = ["coffer__search_tools", "coffer__ask", "coffer__read_result"]


def used(server: str, tool: str, times: int) -> None:
    log = CallLog.open()
    for _ in range(times):
        log.record(CallRecord(time.time(), "t", "1", server, tool, 1.0, "ok", None))
    log.close()


def cli_add(*args: str) -> None:
    run_cli(CliRunner(), "profile", "add", *args)


async def test_a_capped_profile_pins_then_most_used_and_stays_stable(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    add_fixture(coffer_home, "beta")
    async with serve(coffer_home) as s:  # list once so the snapshot holds both servers
        await s.tool_names()
    await anyio.to_thread.run_sync(used, "beta", "pid", 3)
    await anyio.to_thread.run_sync(used, "alpha", "noisy", 1)
    await anyio.to_thread.run_sync(cli_add, "small", "--max-tools", "7", "--pin", "alpha__env")
    async with serve(coffer_home, args=("--profile", "small")) as s:
        names = await s.tool_names()
        assert names == [*BUILTINS, "coffer__call_tool", "alpha__env", "beta__pid", "alpha__noisy"]
        await anyio.to_thread.run_sync(used, "alpha", "add", 10)  # the log changes during the session
        assert await s.tool_names() == names  # clients that ignore list_changed keep the first list
        result = await s.call("coffer__call_tool", {"name": "alpha__echo", "arguments": {"text": "hidden"}})
        assert not result.is_error and text(result) == "hidden"
        found = await s.call("coffer__search_tools", {"query": "echo the text back"})
        assert found.structured_content is not None
        hits = {t["name"]: t for t in found.structured_content["tools"]}
        assert (
            hits["alpha__echo"]["via"] == "coffer__call_tool"
            and "coffer__call_tool" in found.structured_content["note"]
        )
    rows = query(open_log(), limit=50)
    assert any(r["server"] == "alpha" and r["tool"] == "echo" and r["outcome"] == "ok" for r in rows)


async def test_search_mode_and_curation_through_call_tool(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha", disabled_tools=["add"])
    await anyio.to_thread.run_sync(cli_add, "lookup", "--mode", "search")
    async with serve(coffer_home, args=("--profile", "lookup")) as s:
        assert await s.tool_names() == [*BUILTINS, "coffer__call_tool"]
        ok = await s.call("coffer__call_tool", {"name": "alpha__echo", "arguments": {"text": "x"}})
        assert text(ok) == "x"
        refused = await s.call("coffer__call_tool", {"name": "alpha__add", "arguments": {"a": 1, "b": 2}})
        assert refused.is_error and "disabled" in text(refused)
        builtin = await s.call("coffer__call_tool", {"name": "coffer__ask", "arguments": {}})
        assert builtin.is_error and "upstream tool" in text(builtin)


async def test_no_profile_is_unchanged(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    async with serve(coffer_home) as s:
        names = await s.tool_names()
    assert names[:3] == BUILTINS and "coffer__call_tool" not in names and len(names) == 13


def test_profile_commands_and_install_round_trip(cli: CliRunner, coffer_home: Path, tmp_path: Path) -> None:
    run_cli(cli, "profile", "add", "small", "--max-tools", "40", "--server", "github", "--pin", "github__create_issue")
    assert "[profiles.small]" in (coffer_home / "coffer.toml").read_text()
    assert registry.load().profiles["small"].pinned == ["github__create_issue"]
    listed = json.loads(run_cli(cli, "profile", "list", "--json").stdout)["profiles"]  # type: ignore[attr-defined]
    assert listed[0]["name"] == "small" and listed[0]["max_tools"] == 40
    bad = run_cli(cli, "profile", "add", "odd", "--mode", "tiny", code=2)
    assert "invalid --mode" in bad.stderr  # type: ignore[attr-defined]
    unknown = run_cli(cli, "serve", "--profile", "nope", code=3)
    assert "unknown profile 'nope'" in unknown.stderr  # type: ignore[attr-defined]

    target = tmp_path / "mcp.json"
    target.write_text('{"mcpServers": {}}\n')
    run_cli(cli, "install", "cursor", "--path", str(target), "--profile", "small")
    entry = json.loads(target.read_text())["mcpServers"]["coffer"]
    assert entry["args"][-3:] == ["serve", "--profile", "small"]
    missing = run_cli(cli, "install", "cursor", "--path", str(target), "--profile", "nope", "--force", code=3)
    assert "unknown profile" in missing.stderr  # type: ignore[attr-defined]
    run_cli(cli, "profile", "rm", "small")
    assert "small" not in registry.load().profiles


async def test_call_tool_refuses_a_held_tool(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    with (coffer_home / "coffer.toml").open("a") as fh:
        fh.write('\n[settings]\nnew_tools = "hold"\n')
    await anyio.to_thread.run_sync(cli_add, "lookup", "--mode", "search")
    async with serve(coffer_home, args=("--profile", "lookup")) as s:
        grown = text(await s.call("coffer__call_tool", {"name": "alpha__grow", "arguments": {}}))
        held = await s.call("coffer__call_tool", {"name": f"alpha__{grown}", "arguments": {}})
        assert held.is_error and "coffer approve" in text(held), text(held)
