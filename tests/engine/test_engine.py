"""The engine: five `coffer serve` sessions on one vault start each upstream once, and what is
one session's stays that session's (its sampling requests, its profile), while list changes reach all.

Real processes throughout: SDK client sessions over stdio to the front, the engine it starts, fixture
upstreams that record their pid (`start:PID@STARTTIME` in an events file). Each test's vault has its own engine
(the socket name is derived from the vault), stopped at the end of the test.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from typer.testing import CliRunner

from coffer.engine import control, place
from coffer.vault import catalogue
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import (
    Served,
    add_fixture,
    alive,
    descendants,
    host_pid,
    read_events,
    serve,
    serve_env,
    text,
    wait_for,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("engine_stopped")]


def status() -> dict[str, Any]:
    state = control.status()
    assert state is not None, "no engine answers"
    return state


def engine_pid() -> int | None:
    state = control.status()
    return None if state is None else int(state["engine"]["pid"])


@asynccontextmanager
async def sessions(home: Path, n: int, **kw: Any) -> AsyncIterator[list[Served]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(serve(home, **kw)) for _ in range(n)]


def catalogued() -> bool:
    snap = catalogue.load_snapshot()
    return snap is not None and "alpha" in snap.servers and bool(snap.servers["alpha"].tools)


def starts(events: Path) -> list[str]:
    return [e for e in read_events(events) if e.startswith("start:")]


async def test_five_sessions_start_each_upstream_once(coffer_home: Path, tmp_path: Path) -> None:
    events_a, events_b = tmp_path / "a.txt", tmp_path / "b.txt"
    add_fixture(coffer_home, "alpha", events=events_a)
    add_fixture(coffer_home, "beta", events=events_b)
    async with sessions(coffer_home, 5) as served:
        for i, s in enumerate(served):
            assert text(await s.call("alpha__echo", {"text": f"s{i}"})) == f"s{i}"
            assert text(await s.call("beta__echo", {"text": f"b{i}"})) == f"b{i}"
        assert len(starts(events_a)) == 1 and len(starts(events_b)) == 1
        state = status()
        assert len(state["sessions"]) == 5
        ups = {u["name"]: u for u in state["upstreams"]}
        assert ups["alpha"]["state"] == "ready" and ups["alpha"]["share"] == "shared" and ups["alpha"]["pids"]
        from coffer.upstreams import sandbox

        if sandbox.support().available:  # how it runs, with the mechanism: never "unconfined" when confined
            assert ups["alpha"]["sandbox"].startswith(f"{sandbox.support().mechanism}: "), ups["alpha"]["sandbox"]
        engine = int(state["engine"]["pid"])
        parent = Path(f"/proc/{engine}/stat").read_text().rsplit(")", 1)[1].split()[1]
        assert b"serve" not in Path(f"/proc/{parent}/cmdline").read_bytes()  # no front owns it (it forked off)
        assert {int(p) for u in ups.values() for p in u["pids"]} <= descendants(engine)


async def test_a_sampling_request_goes_to_the_session_that_made_the_call(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha", "relay")
    asked: list[str] = []

    def sampler(name: str) -> Any:
        async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            asked.append(name)
            reply = types.TextContent(type="text", text=f"from {name}")
            return types.CreateMessageResult(role="assistant", model="m", content=reply)

        return sample

    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(serve(coffer_home, sampling=sampler("one")))
        two = await stack.enter_async_context(serve(coffer_home, sampling=sampler("two")))
        assert text(await two.call("alpha__ask_model")) == "model said: from two"
        assert text(await one.call("alpha__ask_model")) == "model said: from one"
    assert asked == ["two", "one"]


async def test_list_changes_reach_every_session(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")

    def changes(s: Served) -> int:
        return sum(isinstance(n, types.ToolListChangedNotification) for n in s.notifications)

    async with sessions(coffer_home, 3) as served:
        for s in served:
            await s.tool_names()
        await anyio.sleep(1.0)  # the first live listing's own announcement has gone out
        before = [changes(s) for s in served]
        grown = text(await served[0].call("alpha__grow"))
        for s, seen in zip(served, before, strict=True):
            await wait_for(lambda s=s, seen=seen: changes(s) > seen, what="list_changed in every session")
            names: list[str] = []
            with anyio.fail_after(10):
                while f"alpha__{grown}" not in names:
                    names = await s.tool_names()


async def test_each_session_lists_its_own_profile(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    await anyio.to_thread.run_sync(lambda: run_cli(CliRunner(), "profile", "add", "lookup", "--mode", "search"))
    async with AsyncExitStack() as stack:
        everything = await stack.enter_async_context(serve(coffer_home))
        small = await stack.enter_async_context(serve(coffer_home, args=("--profile", "lookup")))
        assert "alpha__echo" in await everything.tool_names()
        names = await small.tool_names()
        assert "alpha__echo" not in names and "coffer__search_tools" in names


async def test_a_vault_edit_reaches_the_running_engine(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    async with sessions(coffer_home, 2) as served:
        assert not (await served[0].call("alpha__echo", {"text": "x"})).is_error
        await wait_for(catalogued, what="the engine to catalogue alpha")  # `disable` checks the tool exists
        await anyio.to_thread.run_sync(lambda: run_cli(CliRunner(), "disable", "alpha__echo"))
        refused = await served[1].call("alpha__echo", {"text": "x"})
        assert refused.is_error and "disabled" in text(refused)


async def test_the_engine_exits_when_idle_and_its_upstreams_with_it(
    coffer_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(place.IDLE_ENV, "0.5")
    events = tmp_path / "events.txt"
    add_fixture(coffer_home, "alpha", events=events)
    async with sessions(coffer_home, 1) as served:
        await served[0].call("alpha__echo", {"text": "x"})
        engine = engine_pid()
        assert engine is not None
        upstream = host_pid(starts(events)[0].split(":", 1)[1])
        assert upstream
    await wait_for(lambda: not alive(engine), timeout=15, what="the idle engine to exit")
    await wait_for(lambda: not alive(upstream), timeout=10, what="its upstream to be gone")
    assert not place.socket_path().exists()


async def test_kill_9_of_the_engine_leaves_no_upstream_and_the_front_reattaches(
    coffer_home: Path, tmp_path: Path
) -> None:
    events = tmp_path / "events.txt"
    add_fixture(coffer_home, "alpha", "spawn_child", events=events)
    async with sessions(coffer_home, 1) as served:
        await served[0].call("alpha__echo", {"text": "x"})
        engine = engine_pid()
        assert engine is not None
        tree = descendants(engine)
        assert len(tree) >= 2
        os.kill(engine, signal.SIGKILL)
        await wait_for(lambda: not any(alive(p) for p in tree), timeout=10, what="every upstream process to be gone")
        again = await served[0].call("alpha__echo", {"text": "after"})  # a new engine, the same host session
        assert text(again) == "after"
        assert engine_pid() not in (None, engine)


async def test_a_call_in_flight_when_the_engine_dies_is_answered_with_an_error_at_once(
    coffer_home: Path, tmp_path: Path
) -> None:
    """The host need not wait for its own timeout: the front answers what the dead engine owed, then
    serves the next call through a new engine on the same host session."""
    events = tmp_path / "events.txt"
    add_fixture(coffer_home, "alpha", events=events, timeout=60)
    async with sessions(coffer_home, 1) as served:
        await served[0].call("alpha__echo", {"text": "x"})
        engine = engine_pid()
        assert engine is not None
        failed: list[BaseException] = []

        async def slow() -> None:
            try:
                await served[0].call("alpha__slow", {"seconds": 50})
            except Exception as exc:  # the SDK raises the JSON-RPC error
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await wait_for(lambda: "slow:start" in read_events(events), what="the call to reach the upstream")
            os.kill(engine, signal.SIGKILL)
            with anyio.fail_after(15):  # not the call's 50 s, nor its 60 s timeout
                await wait_for(lambda: bool(failed), timeout=15, what="the lost call to be answered")
        assert "engine stopped while this request was in flight" in str(failed[0])
        print("STDERR", served[0].stats.stderr_tail())
        assert text(await served[0].call("alpha__echo", {"text": "after"})) == "after"


async def test_the_socket_is_private(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    async with sessions(coffer_home, 1):
        path = place.socket_path()
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
        assert len(str(path)) < 100


async def test_coffer_status_shows_the_engine_and_can_stop_it(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    runner = CliRunner()
    none = await anyio.to_thread.run_sync(lambda: run_cli(runner, "status"))
    assert "no engine is running" in none.stderr  # type: ignore[attr-defined]
    async with sessions(coffer_home, 2) as served:
        await served[0].call("alpha__echo", {"text": "x"})
        shown = await anyio.to_thread.run_sync(lambda: run_cli(runner, "status", "--json"))
        state = json.loads(shown.stdout)["engine"]  # type: ignore[attr-defined]
        assert len(state["sessions"]) == 2
        (alpha,) = state["upstreams"]
        assert alpha["name"] == "alpha" and alpha["share"] == "shared" and alpha["pss_kib"] > 0
        table = await anyio.to_thread.run_sync(lambda: run_cli(runner, "status"))
        assert "alpha" in table.stdout and "shared" in table.stdout  # type: ignore[attr-defined]
        engine = int(state["engine"]["pid"])
        await anyio.to_thread.run_sync(lambda: run_cli(runner, "status", "--stop"))
        await wait_for(lambda: not alive(engine), timeout=15, what="the engine to stop")


def test_a_reattached_front_drops_only_the_answer_to_its_replayed_handshake() -> None:
    """A new engine may send a list change or a log line before it answers the replayed initialize: those
    reach the host; the answer, which the host already had from the first engine, does not."""
    from coffer.engine.front import _drop_answer

    note = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'
    ask = b'{"jsonrpc":"2.0","id":0,"method":"roots/list"}\n'  # a request of the engine's own, same id
    answer = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"}}\n'
    after = b'{"jsonrpc":"2.0","id":3,"result":{}}\n'
    assert _drop_answer(note + ask + answer + after + b'{"partial', 0) == (note + ask, after + b'{"partial', True)
    assert _drop_answer(note + b'{"jsonrpc":"2.0","id":0,"res', 0) == (note, b'{"jsonrpc":"2.0","id":0,"res', False)
    assert _drop_answer(answer, 0) == (b"", b"", True)


def _env_of(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in serve_env(home).items() if k != "COFFER_TEST_TOKEN"}
    return env | extra


async def test_a_variable_the_engine_lacks_comes_from_the_first_session_that_has_it(
    coffer_home: Path, tmp_path: Path
) -> None:
    """The rule for `${VAR}`: the engine was started by a session without it; a later session that has
    it hands it over, and the server that could not start for want of it starts (for both sessions)."""
    add_fixture(coffer_home, "alpha", env={"TOKEN_FOR_ALPHA": "${COFFER_TEST_TOKEN}"})
    async with serve(coffer_home, env=_env_of(coffer_home)) as first:
        refused = await first.call("alpha__env", {"name": "TOKEN_FOR_ALPHA"})
        assert refused.is_error and "${COFFER_TEST_TOKEN} is not set" in text(refused)
        async with serve(coffer_home, env=_env_of(coffer_home, COFFER_TEST_TOKEN="from-the-second")) as second:
            got = await second.call("alpha__env", {"name": "TOKEN_FOR_ALPHA"})
            assert text(got) == "from-the-second"
            assert text(await first.call("alpha__env", {"name": "TOKEN_FOR_ALPHA"})) == "from-the-second"
            assert "other values" not in second.stats.stderr_tail()


async def test_a_variable_that_differs_from_the_engines_is_said_once_on_the_sessions_stderr(
    coffer_home: Path, tmp_path: Path
) -> None:
    """The other order: the engine has the variable; a session with another value is told so (naming
    `coffer status --stop`), and the servers keep the engine's value."""
    add_fixture(coffer_home, "alpha", env={"TOKEN_FOR_ALPHA": "${COFFER_TEST_TOKEN}"})
    async with serve(coffer_home, env=_env_of(coffer_home, COFFER_TEST_TOKEN="first")) as first:
        assert text(await first.call("alpha__env", {"name": "TOKEN_FOR_ALPHA"})) == "first"
        async with serve(coffer_home, env=_env_of(coffer_home, COFFER_TEST_TOKEN="second")) as second:
            assert text(await second.call("alpha__env", {"name": "TOKEN_FOR_ALPHA"})) == "first"
            said = second.stats.stderr_tail()
            assert "COFFER_TEST_TOKEN" in said and "coffer status --stop" in said
            assert "second" not in said and "first" not in said  # names, never values
        async with serve(coffer_home, env=_env_of(coffer_home, COFFER_TEST_TOKEN="first")) as same:
            assert "other values" not in same.stats.stderr_tail()
