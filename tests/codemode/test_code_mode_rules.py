"""The vault's rules inside coffer__run, with the fixture upstream: cancelling the run cancels its inner
call, a per-session server stays its session's, a server held for approval stays held, a profile
turns code mode on for its clients, and the settings' limits apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from coffer.log.calls import open_log
from coffer.log.query import query
from coffer.vault import registry
from tests.fixtures.gateway_harness import add_fixture, read_events, serve, text, wait_for

pytestmark = pytest.mark.anyio


def settings(home: Path, **values: Any) -> None:
    with registry.edit(home / "coffer.toml") as doc:
        doc["settings"] = {"code_mode": True, **values}


def server_key(home: Path, name: str, key: str, value: Any) -> None:
    with registry.edit(home / "coffer.toml") as doc:
        doc["servers"][name][key] = value


def payload(result: Any) -> dict[str, Any]:
    return dict(json.loads(text(result)))


async def wait_started(s: Any) -> None:
    for _ in range(50):
        if not (await s.call("fx__echo", {"text": "up"})).is_error:
            return
    raise AssertionError("fx never started")


async def test_cancelling_the_run_cancels_its_inner_call(coffer_home: Path, tmp_path: Path) -> None:
    events = tmp_path / "fx.events"
    add_fixture(coffer_home, "fx", events=events)
    server_key(coffer_home, "fx", "code_mode", "all")  # the fixture's tools carry no annotations
    settings(coffer_home)
    async with serve(coffer_home) as s:
        await wait_started(s)  # the upstream's start is not what the bounded waits below measure
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.call, "coffer__run", {"code": 'call_tool("fx__slow", {"seconds": 60})'})
            await wait_for(lambda: "slow:start" in read_events(events), what="the inner call to start")
            tg.cancel_scope.cancel()
        await wait_for(lambda: "slow:cancelled" in read_events(events), what="the inner call's upstream cancel")
        assert payload(await s.call("coffer__run", {"code": 'call_tool("fx__echo", {"text": "on"})'}))["result"] == "on"
    await wait_for(
        lambda: any(r["outcome"] == "cancelled" and r["parent"] for r in query(open_log(), limit=20)),
        what="the inner call logged as cancelled",
    )
    rows = query(open_log(), limit=20)
    assert [r["outcome"] for r in rows if r["tool"] == "run"] == ["cancelled", "ok"]


async def test_held_and_disabled_tools_stay_out_of_reach(coffer_home: Path) -> None:
    add_fixture(coffer_home, "fx", disabled_tools=["add"])
    server_key(coffer_home, "fx", "code_mode", "all")
    settings(coffer_home)
    script = """
out = []
for name in ["fx__add", "fx__echo", "nope__echo"]:
    try:
        out.append(call_tool(name, {"text": "x", "a": 1, "b": 2}))
    except Exception as e:
        out.append(type(e).__name__ + ": " + str(e))
out
"""
    async with serve(coffer_home) as s:
        added, echoed, unknown = payload(await s.call("coffer__run", {"code": script}))["result"]
        assert added.startswith("PermissionError: coffer refused fx__add") and "disabled" in added
        assert echoed == "x"
        assert unknown.startswith("RuntimeError: unknown tool 'nope__echo'")


async def test_an_inner_timeout_and_the_limits_of_the_settings(coffer_home: Path) -> None:
    add_fixture(coffer_home, "fx", timeout=2.0)
    server_key(coffer_home, "fx", "code_mode", ["slow", "echo"])
    settings(coffer_home, code_mode_max_calls=3, code_mode_timeout_s=10)
    script = """
try:
    call_tool("fx__slow", {"seconds": 30})
except TimeoutError as e:
    first = "timeout: " + str(e)
[first, call_tools([["fx__echo", {"text": str(i)}] for i in range(3)])]
"""
    async with serve(coffer_home) as s:
        await wait_started(s)  # the 2 s call timeout is the start's too: started first, it times the call only
        ran = payload(await s.call("coffer__run", {"code": script}))
        assert "result" in ran, ran
        first, batch = ran["result"]
        assert first.startswith("timeout: fx__slow timed out after 2s")
        assert batch[:2] == ["0", "1"] and "code_mode_max_calls" in batch[2]["error"]  # 3 calls in all
        bad = await s.call("coffer__run", {"code": "call_tool('fx__add', {})"})
        assert bad.is_error and 'code_mode = ["add"]' in payload(bad)["error"]
    settings(coffer_home, code_mode_timeout_s=0)
    async with serve(coffer_home) as s:
        wrong = await s.call("coffer__run", {"code": "1"})
        assert wrong.is_error and "settings.code_mode_timeout_s must be a number from 1 to 600" in text(wrong)


async def test_a_profile_turns_code_mode_on_for_its_clients_only(coffer_home: Path) -> None:
    add_fixture(coffer_home, "fx")
    with registry.edit(coffer_home / "coffer.toml") as doc:
        doc["profiles"] = {"scripted": {"mode": "search", "code_mode": True}}
    async with serve(coffer_home) as s:
        assert "coffer__run" not in await s.tool_names()
    async with serve(coffer_home, args=("--profile", "scripted")) as s:
        names = await s.tool_names()
        assert "coffer__run" in names and "fx__echo" not in names
        refused = await s.call("coffer__run", {"code": 'call_tool("fx__echo", {"text": "x"})'})
        assert "not marked read-only" in payload(refused)["error"]  # on, and the default rule holds


@pytest.mark.serve_modes
@pytest.mark.one_mode("engine")
async def test_a_per_session_server_stays_its_sessions_own(coffer_home: Path) -> None:
    add_fixture(coffer_home, "fx")
    server_key(coffer_home, "fx", "share", "session")
    server_key(coffer_home, "fx", "code_mode", ["pid"])
    settings(coffer_home)
    async with serve(coffer_home) as alice, serve(coffer_home) as bob:
        mine = {}
        for who, s in (("alice", alice), ("bob", bob)):
            direct = text(await s.call("fx__pid"))
            scripted = payload(await s.call("coffer__run", {"code": 'call_tool("fx__pid")'}))["result"]
            assert scripted == direct
            mine[who] = direct
        assert mine["alice"] != mine["bob"]


async def test_a_big_outcome_is_kept_like_any_big_result(coffer_home: Path) -> None:
    add_fixture(coffer_home, "fx")
    settings(coffer_home, result_max_tokens=2000)
    async with serve(coffer_home) as s:
        big = await s.call("coffer__run", {"code": "'\\n'.join('line %d of the report' % i for i in range(20000))"})
        preview = text(big)
        assert not big.is_error and "coffer://results/" in preview and len(preview) < 20_000
        kept = preview.split("coffer://results/")[1][:32]
        part = await s.call("coffer__read_result", {"id": kept, "pattern": "line 19999 of"})
        assert "line 19999 of the report" in text(part)
    rows = query(open_log(), limit=5)
    (run,) = [r for r in rows if r["tool"] == "run"]
    assert run["kept"] == kept and run["result_bytes"] > 400_000


async def test_a_2026_07_28_host_runs_scripts_and_an_ask_inside_is_refused(coffer_home: Path, tmp_path: Path) -> None:
    from mcp import stdio_client
    from mcp.client.client import Client

    from tests.gateway.test_rounds import elicit, params

    add_fixture(coffer_home, "fx", "relay")
    server_key(coffer_home, "fx", "code_mode", "all")
    settings(coffer_home)
    script = """
out = [call_tool("fx__echo", {"text": "hi"})]
try:
    out.append(call_tool("fx__ask_user"))
except Exception as e:
    out.append(type(e).__name__ + ": " + str(e))
out
"""
    with open(tmp_path / "stderr", "w") as errlog:
        transport = stdio_client(params(coffer_home), errlog=errlog)
        async with Client(transport, mode="auto", cache=None, elicitation_callback=elicit) as client:
            assert client.protocol_version == "2026-07-28"
            ran = await client.call_tool("coffer__run", {"code": script})
            assert not ran.is_error, ran
            echoed, asked = json.loads(ran.content[0].text)["result"]  # type: ignore[union-attr]
            assert echoed == "hi"
            # a script cannot pause for the host's answer: the ask is refused with why, never a hang
            assert asked.startswith("RuntimeError: ask_user failed: coffer did not relay elicitation"), asked


async def test_a_2025_host_is_asked_during_a_scripts_call(coffer_home: Path) -> None:
    import mcp_types as types

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    add_fixture(coffer_home, "fx", "relay")
    server_key(coffer_home, "fx", "code_mode", "all")
    settings(coffer_home)
    async with serve(coffer_home, elicitation_callback=elicit) as s:
        ran = payload(await s.call("coffer__run", {"code": 'call_tool("fx__ask_user")'}))
        assert ran["result"] == "accept: Ada"


@pytest.mark.serve_modes
@pytest.mark.one_mode("in-process")
async def test_the_scripts_worker_runs_confined(coffer_home: Path) -> None:
    """The worker that interprets scripts is itself under bubblewrap: its own network, PID and mount
    namespaces, with nothing of the user's home or the vault in its view."""
    import os

    from coffer.upstreams.sandbox import support
    from tests.fixtures.gateway_harness import descendants

    if not support().available:
        pytest.skip(f"no confinement here: {support().problem}")
    add_fixture(coffer_home, "fx")
    settings(coffer_home)
    async with serve(coffer_home) as s:
        seen: dict[str, str] = {}

        async def look() -> None:
            for _ in range(100):
                for pid in descendants(s.pid):
                    try:
                        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                        if cmdline[0] == b"/helper":
                            seen["net"] = os.readlink(f"/proc/{pid}/ns/net")
                            seen["mnt"] = os.readlink(f"/proc/{pid}/ns/mnt")
                            return
                    except OSError:
                        continue
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(look)
            ran = payload(await s.call("coffer__run", {"code": "import time\ntime.sleep(1.5)\n'done'"}))
        assert ran["result"] == "done"
        assert seen, "no confined worker (/helper) was seen"
        assert seen["net"] != os.readlink("/proc/self/ns/net") and seen["mnt"] != os.readlink("/proc/self/ns/mnt")
