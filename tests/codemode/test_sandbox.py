"""The sandbox driver, the script checks and the code mode rules, with host functions of the test's own
(the gateway's side is tested through `coffer serve` in the other modules)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest

from coffer.codemode import checks, policy, sandbox, values
from coffer.errors import RegistryError
from coffer.vault import registry
from coffer.vault.servers import ServerConfig

pytestmark = pytest.mark.anyio


class Host:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.running = 0
        self.most = 0

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await anyio.sleep(0.02)
        finally:
            self.running -= 1
        if name == "bad":
            raise values.ToolFailed("RuntimeError", "bad went wrong")
        return {"tool": name, **arguments}

    async def search(self, query: str, k: int) -> list[dict[str, Any]]:
        return [{"name": f"hit{i}", "query": query} for i in range(k)]


async def run(code: str, **limits: Any) -> tuple[values.Outcome, Host]:
    host = Host()
    return await sandbox.run(code, sandbox.Host(host.call, host.search), policy.Limits(**limits)), host


async def test_a_call_answers_in_place_with_or_without_await() -> None:
    plain, _ = await run('call_tool("a", {"x": 1})["x"] + 1')
    awaited, _ = await run('r = await call_tool("a", {"x": 2})\nr["x"]')
    keywords, host = await run('call_tool(name="a", arguments={"x": 3})["x"]')
    assert (plain.value, awaited.value, keywords.value) == (2, 2, 3)
    assert host.calls == [("a", {"x": 3})]


async def test_a_batch_runs_at_once_and_keeps_its_order_and_failures() -> None:
    done, host = await run('call_tools([["a", {"i": i}] for i in range(12)] + [{"name": "bad"}])')
    assert [r["i"] for r in done.value[:12]] == list(range(12))
    assert done.value[12] == {"error": "RuntimeError: bad went wrong"}
    assert done.calls == 13 and 1 < host.most <= sandbox.BATCH_CONCURRENCY


async def test_failures_are_exceptions_the_script_can_catch() -> None:
    caught, _ = await run('try:\n    call_tool("bad")\nexcept RuntimeError as e:\n    r = str(e)\nr')
    assert caught.value == "bad went wrong" and caught.error is None
    uncaught, _ = await run('print("before")\ncall_tool("bad")')
    assert uncaught.error is not None and "RuntimeError: bad went wrong" in uncaught.error
    assert uncaught.payload()["printed"] == "before\n" and "result" not in uncaught.payload()


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("call_tool()", "TypeError"),
        ("call_tool(3)", "needs a tool's name"),
        ('call_tool("a", [1])', "arguments must be a dict"),
        ('call_tool("a", {}, 3)', "wrong arguments"),
        ("call_tools(5)", "list of [name, arguments] pairs"),
        ('search_tools("")', "needs the action you want"),
        ('search_tools("x", top_k=50)', "top_k must be a whole number from 1 to 20"),
        ("no_such_function()", "NameError: name 'no_such_function' is not defined"),
        ("undefined_name", "NameError"),
    ],
)
async def test_a_wrong_use_of_the_host_functions_is_a_clear_error(code: str, said: str) -> None:
    done, host = await run(code)
    assert done.error is not None and said in done.error
    assert host.calls == []


async def test_sleeping_waits_on_the_host_and_counts_toward_the_wall_time() -> None:
    slept, _ = await run("import time, asyncio\ntime.sleep(0.05)\nawait asyncio.sleep(0.05)\n'awake'")
    assert slept.value == "awake" and slept.error is None


async def test_search_tools_answers_from_the_host() -> None:
    done, _ = await run('[t["name"] for t in search_tools("open a file", 2)]')
    assert done.value == ["hit0", "hit1"] and done.calls == 0  # a search is not a tool call


async def test_the_limits_hold() -> None:
    many, host = await run('for i in range(10):\n    call_tool("a")', calls=4)
    assert many.error is not None and "made 4 tool calls, its limit" in many.error and len(host.calls) == 4
    slow, _ = await run("import time\nwhile True:\n    time.sleep(0.1)", wall_s=1.0)
    assert slow.error is not None and "time limit of 1s" in slow.error
    big, _ = await run("x = 'a' * (64 * 1024 * 1024)", memory_bytes=16 * 1024 * 1024)
    assert big.error is not None and "MemoryError" in big.error
    loud, _ = await run("for i in range(1000):\n    print('x' * 100)", output_bytes=10_000)
    assert loud.error is not None and "printed more than 10,000 bytes" in loud.error
    assert len(loud.printed) <= 10_000


async def test_cancelling_the_run_stops_the_worker_at_once() -> None:
    with anyio.move_on_after(0.5) as scope:
        await run("while True:\n    pass", wall_s=30.0)
    assert scope.cancelled_caught


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("import os", "import of 'os' refused"),
        ("from pathlib import Path", "import of 'pathlib' refused"),
        ("import subprocess as s", "import of 'subprocess' refused"),
        ("from . import x", "import of '.' refused"),
        ("x.__dict__", "'__dict__' refused"),
        ("__builtins__", "'__builtins__' refused"),
        ("def f(:", "SyntaxError: line 1"),
        ("x = 1\n" * 60_000, "at most 100,000"),
    ],
)
def test_scripts_are_checked_before_they_run(code: str, said: str) -> None:
    with pytest.raises(checks.ScriptRefused, match=None) as caught:
        checks.check(code)
    assert said in str(caught.value)


def test_allowed_imports_and_top_level_await_pass_the_checks() -> None:
    checks.check("import json, re\nfrom collections import Counter\nawait call_tool('a')\nif __name__: pass")


def test_results_become_script_values() -> None:
    assert values.script_value({"content": [], "structuredContent": {"a": 1}}) == {"a": 1}
    assert values.script_value({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}) == "a\nb"
    image = {"type": "image", "data": "AA==", "mimeType": "image/png"}
    assert values.script_value({"content": [image]}) == [image]
    error = {"content": [{"type": "text", "text": "no"}], "isError": True}
    for outcome, kind in (("refused", "PermissionError"), ("timeout", "TimeoutError"), ("error", "RuntimeError")):
        with pytest.raises(values.ToolFailed) as failed:
            values.script_value(error, outcome)
        assert failed.value.kind == kind and str(failed.value) == "no"


def test_which_tools_a_script_may_call() -> None:
    read = {"annotations": {"readOnlyHint": True}}
    write = {"annotations": {"readOnlyHint": False}}
    cfg = ServerConfig(name="fs", command="x")
    assert policy.refusal(cfg, "read_file", read) is None
    said = policy.refusal(cfg, "write_file", write)
    assert said is not None and 'code_mode = ["write_file"] (or "all") in [servers.fs]' in said
    assert policy.refusal(cfg, "bare", {}) is not None  # no annotation: not read-only
    cfg.code_mode = ["write_file"]
    assert policy.refusal(cfg, "write_file", write) is None and policy.refusal(cfg, "move", write) is not None
    assert policy.describe(cfg) == "read-only tools and write_file"
    cfg.code_mode = "all"
    assert policy.refusal(cfg, "move", write) is None and policy.describe(cfg) == "every tool"


def test_on_off_and_limits_from_settings_and_profiles() -> None:
    on = registry.Profile(name="p", code_mode=True)
    off = registry.Profile(name="q", code_mode=False)
    assert not policy.enabled({}) and policy.enabled({"code_mode": True})
    assert policy.enabled({}, on) and not policy.enabled({"code_mode": True}, off)
    assert policy.enabled({"code_mode": True}, registry.Profile(name="r"))
    assert policy.limits({"code_mode_max_calls": 5, "code_mode_memory_mb": 16}).memory_bytes == 16 * 1024 * 1024
    for bad in ({"code_mode_max_calls": 0}, {"code_mode_timeout_s": "30"}, {"code_mode_output_kb": True}):
        with pytest.raises(RegistryError, match="must be a number from"):
            policy.limits(bad)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('[servers.fs]\ncommand = "x"\ncode_mode = "write"\n', 'code_mode must be "read", "all" or a list'),
        ('[servers.fs]\ncommand = "x"\ncode_mode = [1]\n', 'code_mode must be "read", "all" or a list'),
        ('[profiles.p]\ncode_mode = "yes"\n', "profiles.p.code_mode must be true or false"),
    ],
)
def test_a_bad_code_mode_in_coffer_toml_is_one_clear_error(tmp_path: Path, table: str, said: str) -> None:
    path = tmp_path / "coffer.toml"
    path.write_text(table)
    with pytest.raises(RegistryError, match=None) as caught:
        registry.load(path)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_code_mode_round_trips_through_coffer_toml(tmp_path: Path) -> None:
    path = tmp_path / "coffer.toml"
    registry.add_server(ServerConfig(name="fs", command="x", code_mode=["write_file"]), path=path)
    registry.add_profile(registry.Profile(name="p", code_mode=True), path=path)
    reg = registry.load(path)
    assert reg.servers["fs"].code_mode == ["write_file"] and reg.profiles["p"].code_mode is True
    assert reg.servers["fs"].to_dict()["code_mode"] == ["write_file"]
    assert 'code_mode = ["write_file"]' in path.read_text()


def test_show_says_which_tools_a_script_may_call(coffer_home: Path) -> None:
    from typer.testing import CliRunner

    from coffer.vault import catalogue
    from tests.conftest import run_cli

    registry.add_server(ServerConfig(name="fs", command="x"), path=coffer_home / "coffer.toml")
    read = {"name": "read_file", "description": "Read a file.", "annotations": {"readOnlyHint": True}}
    write = {"name": "write_file", "description": "Write a file.", "annotations": {"readOnlyHint": False}}
    catalogue.save_servers({"fs": ({"tools": [read, write]}, {})})
    cli = CliRunner()
    off = run_cli(cli, "show", "fs").stdout
    assert "off (`[settings] code_mode = true` turns coffer__run on)" in off
    with registry.edit(coffer_home / "coffer.toml") as doc:
        doc["settings"] = {"code_mode": True}
    on = run_cli(cli, "show", "fs").stdout
    assert "scripts may call read-only tools (1 of 2)" in on
    shown = json.loads(run_cli(cli, "show", "fs", "--json").stdout)["server"]["code_mode"]
    assert shown == {"on": True, "allows": "read-only tools", "tools": ["fs__read_file"]}


def test_the_code_mode_commands_write_coffer_toml(coffer_home: Path) -> None:
    from typer.testing import CliRunner

    from tests.conftest import run_cli

    path = coffer_home / "coffer.toml"
    registry.add_server(ServerConfig(name="fs", command="x"), path=path)
    cli = CliRunner()
    assert "code mode on" in run_cli(cli, "code-mode", "on").stderr  # type: ignore[attr-defined]
    assert "(already so)" in run_cli(cli, "code-mode", "on").stderr  # type: ignore[attr-defined]
    assert registry.load(path).settings["code_mode"] is True
    run_cli(cli, "code-mode", "allow", "fs", "write_file", "move_file")
    assert registry.load(path).servers["fs"].code_mode == ["move_file", "write_file"]
    done = json.loads(run_cli(cli, "code-mode", "allow", "fs", "--all", "--json").stdout)
    assert done["code_mode"] == "all" and registry.load(path).servers["fs"].code_mode == "all"
    run_cli(cli, "code-mode", "reset", "fs")
    assert registry.load(path).servers["fs"].code_mode == "read"
    assert "code_mode" not in tomllib.loads(path.read_text())["servers"]["fs"]
    assert "unknown server 'nope'" in run_cli(cli, "code-mode", "allow", "nope", "--all", code=3).stderr
    assert "name the tools" in run_cli(cli, "code-mode", "allow", "fs", code=2).stderr
    run_cli(cli, "profile", "add", "scripted", "--mode", "search", "--no-code-mode")
    assert registry.load(path).profiles["scripted"].code_mode is False
    run_cli(cli, "code-mode", "off")
    assert registry.load(path).settings["code_mode"] is False
