"""Share modes under the engine: a server with per-client state runs once per session, its requests reach
only its own session, and `auto` learns it from a server that asks for roots outside a call.

Real processes: SDK client sessions over stdio to fronts of one engine, fixture upstreams recording their
pid and what they were answered (`startroots:` in an events file), a real coffer.toml and catalogue.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from typer.testing import CliRunner

from coffer.engine import control
from coffer.gateway import sessions
from coffer.vault import catalogue, registry
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import add_fixture, alive, host_pid, read_events, serve, text, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("engine_stopped")]


def set_share(home: Path, name: str, mode: str) -> None:
    with registry.edit(home / "coffer.toml") as doc:
        doc["servers"][name]["share"] = mode  # type: ignore[index]


def roots_of(uri: str) -> Any:
    async def list_roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=uri)])  # type: ignore[arg-type]

    return list_roots


def events_of(path: Path, kind: str) -> list[str]:
    return [e.split(":", 1)[1] for e in read_events(path) if e.startswith(f"{kind}:")]


async def test_a_per_session_server_runs_once_per_session_and_stops_with_it(coffer_home: Path, tmp_path: Path) -> None:
    browser, plain = tmp_path / "browser.txt", tmp_path / "plain.txt"
    add_fixture(coffer_home, "browser", events=browser)
    add_fixture(coffer_home, "plain", events=plain)
    set_share(coffer_home, "browser", "session")
    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(serve(coffer_home))
        two = await stack.enter_async_context(serve(coffer_home))
        pids = {text(await s.call("browser__pid")) for s in (one, two)}
        assert len(pids) == 2  # each session its own process
        assert len({text(await s.call("plain__pid")) for s in (one, two)}) == 1  # the other one shared
        assert len(events_of(browser, "start")) == 2 and len(events_of(plain, "start")) == 1
        state = control.status()
        assert state is not None
        rows = [u for u in state["upstreams"] if u["name"] == "browser"]
        assert {u["share"] for u in rows} == {"session"} and len(rows) == 2
        assert {u["session"] for u in rows} == {s["pid"] for s in state["sessions"]}
        assert all('share = "session"' in u["why"] for u in rows)
        first = host_pid(text(await one.call("browser__pid")))
        assert first
        await stack.aclose()
    await wait_for(lambda: not alive(first), timeout=10, what="a session's own server to stop with it")


async def test_a_per_session_server_starts_at_its_sessions_first_call_not_before(
    coffer_home: Path, tmp_path: Path
) -> None:
    """Once catalogued, a per-session server is listed from the catalogue: sessions that never call it
    run no process of it (five agents, one of which opens the browser, run one browser server)."""
    browser = tmp_path / "browser.txt"
    add_fixture(coffer_home, "browser", events=browser)
    add_fixture(coffer_home, "plain")
    set_share(coffer_home, "browser", "session")
    async with serve(coffer_home) as first:  # never catalogued: started so that it can list
        assert "browser__pid" in await first.tool_names()
    await wait_for(lambda: len(events_of(browser, "start")) == 1, what="the first listing")
    async with AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(serve(coffer_home)) for _ in range(3)]
        for s in sessions:
            assert {"browser__pid", "plain__pid"} <= set(await s.tool_names())
        assert len({text(await s.call("plain__pid")) for s in sessions}) == 1
        assert len(events_of(browser, "start")) == 1  # listed, not started, in all three
        state = control.status()
        assert state is not None
        rows = [u for u in state["upstreams"] if u["name"] == "browser"]
        assert len(rows) == 3 and {u["state"] for u in rows} == {"idle"} and not any(u["pids"] for u in rows)
        pid = text(await sessions[1].call("browser__pid"))
        hpid = host_pid(pid)
        assert len(events_of(browser, "start")) == 2 and alive(hpid)
        assert text(await sessions[1].call("browser__pid")) == pid  # its own, kept for the session
        await stack.aclose()
    await wait_for(lambda: not alive(hpid), timeout=10, what="the session's server to stop with it")


async def test_a_server_asking_for_roots_outside_a_call_gets_one_process_per_session(
    coffer_home: Path, tmp_path: Path
) -> None:
    """The first session's shared process is seen asking for roots (its one host answers); sessions that
    start after that get their own, and the shared one stops when the last session using it ends."""
    events = tmp_path / "fs.txt"
    add_fixture(coffer_home, "fs", "rootsatstart", events=events)

    def answered() -> dict[str, str]:  # roots -> the fs process they were given to
        return {uris: pid for pid, _, uris in (e.partition(":") for e in events_of(events, "startroots"))}

    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(serve(coffer_home, list_roots_callback=roots_of("file:///one")))
        await one.tool_names()
        await wait_for(lambda: "file:///one" in answered(), what="fs to get the first session's roots")
        two = await stack.enter_async_context(serve(coffer_home, list_roots_callback=roots_of("file:///two")))
        assert "fs__pid" in await two.tool_names()  # from the catalogue: its own fs starts at its first call
        own = {"file:///one": text(await one.call("fs__pid")), "file:///two": text(await two.call("fs__pid"))}
        await wait_for(
            lambda: "file:///two" in answered(), timeout=30, what="a second fs to get the second session's roots"
        )
        got = answered()
        assert {uri: got[uri] for uri in own} == own  # each fs asked the one session it serves
        learner = events_of(events, "start")[0]  # the shared process it was seen asking from
        assert own["file:///one"] == learner != own["file:///two"]  # kept by the session using it
        shared = host_pid(learner)
        assert alive(shared)
        await stack.aclose()
    await wait_for(lambda: not alive(shared), timeout=10, what="the shared process to stop with its session")
    snap = catalogue.load_snapshot()
    assert snap is not None and sessions.SEEN_ROOTS in snap.servers["fs"].seen  # the next engine knows at once
    shown = await anyio.to_thread.run_sync(lambda: run_cli(CliRunner(), "show", "fs", "--json"))
    how = json.loads(shown.stdout)["server"]["share"]  # type: ignore[attr-defined]
    assert how["mode"] == "session" and "roots outside a call" in how["why"]


async def test_share_shared_keeps_one_process_even_for_a_roots_asker(coffer_home: Path, tmp_path: Path) -> None:
    events = tmp_path / "fs.txt"
    add_fixture(coffer_home, "fs", "rootsatstart", events=events)
    set_share(coffer_home, "fs", "shared")
    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(serve(coffer_home, list_roots_callback=roots_of("file:///one")))
        two = await stack.enter_async_context(serve(coffer_home, list_roots_callback=roots_of("file:///two")))
        assert text(await one.call("fs__pid")) == text(await two.call("fs__pid"))
    assert len(events_of(events, "start")) == 1


def test_show_says_which_share_mode_applies_and_why(coffer_home: Path) -> None:
    runner = CliRunner()
    run_cli(runner, "add", "web", "--no-probe", "--", "npx", "-y", "@playwright/mcp@latest")
    run_cli(runner, "add", "notes", "--no-probe", "--", "npx", "-y", "@modelcontextprotocol/server-memory")
    shown: Any = run_cli(runner, "show", "web", "--json")
    web = json.loads(shown.stdout)["server"]["share"]
    assert web["mode"] == "session" and "@playwright/mcp" in web["why"] and "browser" in web["why"]
    shown = run_cli(runner, "show", "notes", "--json")
    notes = json.loads(shown.stdout)["server"]["share"]
    assert notes["mode"] == "shared" and notes["why"].startswith("auto")
    table = run_cli(runner, "show", "web").stdout  # type: ignore[attr-defined]
    assert "share" in table and "session (auto: it runs @playwright/mcp" in " ".join(table.split())
    assert "each session runs its own, from its first call" in " ".join(table.split())
    run_cli(runner, "add", "scratch", "--no-probe", "--share", "shared", "--", "npx", "-y", "@playwright/mcp")
    assert 'share = "shared"' in (coffer_home / "coffer.toml").read_text()
    shown = run_cli(runner, "show", "scratch", "--json")
    assert json.loads(shown.stdout)["server"]["share"]["mode"] == "shared"  # the entry overrides what it runs
    before = (coffer_home / "coffer.toml").read_bytes()
    bad: Any = run_cli(runner, "add", "x", "--no-probe", "--share", "often", "--", "true", code=2)
    assert "invalid --share 'often'" in bad.stderr and (coffer_home / "coffer.toml").read_bytes() == before


def test_a_bad_share_value_is_one_clear_error(coffer_home: Path) -> None:
    runner = CliRunner()
    run_cli(runner, "add", "notes", "--no-probe", "--", "npx", "-y", "@modelcontextprotocol/server-memory")
    before = (coffer_home / "coffer.toml").read_text()
    (coffer_home / "coffer.toml").write_text(before.replace("enabled = true", 'enabled = true\nshare = "sometimes"'))
    result: Any = run_cli(runner, "list", code=5)  # the registry-error exit status
    assert "servers.notes.share must be one of auto, shared, session, member, not 'sometimes'" in result.stderr
    assert (coffer_home / "coffer.toml").read_text().count("sometimes") == 1  # nothing rewritten


@pytest.mark.parametrize(
    ("command", "args", "package"),
    [
        ("npx", ["-y", "@playwright/mcp@latest", "--headless"], "@playwright/mcp"),
        ("npx", ["-y", "@playwright/mcp"], "@playwright/mcp"),
        ("/home/me/app/node_modules/.bin/playwright-mcp", ["--headless"], "@playwright/mcp"),  # a local install
        ("playwright-mcp", [], "@playwright/mcp"),  # a global one
        ("node", ["/x/node_modules/@playwright/mcp/cli.js"], "@playwright/mcp"),
        ("C:\\npm\\desktop-commander.cmd", [], "@wonderwhy-er/desktop-commander"),
        ("mcp-server-sequential-thinking", [], "@modelcontextprotocol/server-sequential-thinking"),
        ("uvx", ["mcp-shell-server"], "mcp-shell-server"),
        ("npx", ["-y", "@modelcontextprotocol/server-github"], None),
        ("npx", ["-y", "@playwright/mcp-helper"], None),  # another package whose name starts alike
        ("/x/.bin/playwright-mcp-proxy", [], None),
        ("node", ["server.js", "--name", "desktop-commander-docs"], None),
    ],
)
def test_known_servers_are_found_however_they_are_launched(command: str, args: list[str], package: str | None) -> None:
    found = sessions.known_state(registry.ServerConfig(name="x", command=command, args=args))
    assert (found[0] if found else None) == package
    assert sessions.decide(registry.ServerConfig(name="x", command=command, args=args)).per_session is bool(package)


def named(name: str) -> Any:
    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": name})

    return elicit


async def test_a_shared_server_asks_the_session_whose_call_it_is(coffer_home: Path, tmp_path: Path) -> None:
    """Two sessions call a shared server at once and it asks its client mid-call: the ask goes to the
    session that made the call (it waits for the other session's call to end rather than guessing or
    refusing), and from then on the server's calls from different sessions take turns, here and after a
    restart (the catalogue remembers)."""
    events = tmp_path / "alpha.events"
    add_fixture(coffer_home, "alpha", "relay", events=events, timeout=20)
    async with (
        serve(coffer_home, elicitation_callback=named("Ada")) as a,
        serve(coffer_home, elicitation_callback=named("Bob")) as b,
    ):
        assert a.pid != b.pid
        async with anyio.create_task_group() as tg:
            slow: list[str] = []

            async def bob_waits() -> None:
                slow.append(text(await b.call("alpha__slow", {"seconds": 1.5})))

            tg.start_soon(bob_waits)
            await wait_for(lambda: "slow:start" in read_events(events), what="Bob's call in flight")
            asked = await a.call("alpha__ask_user")
            assert not asked.is_error and text(asked) == "accept: Ada"
        assert slow == ["slow done"]

        answers: dict[str, str] = {}

        async def ask(who: str, s: Any) -> None:
            answers[who] = text(await s.call("alpha__ask_user"))

        async with anyio.create_task_group() as tg:
            for who, s in (("a", a), ("b", b), ("a2", a), ("b2", b)):
                tg.start_soon(ask, who, s)
        assert answers == {"a": "accept: Ada", "b": "accept: Bob", "a2": "accept: Ada", "b2": "accept: Bob"}

    def remembered() -> bool:
        snap = catalogue.load_snapshot()
        return snap is not None and sessions.SEEN_ASKS in snap.servers["alpha"].seen

    await wait_for(remembered, 20, "the catalogue's note that alpha asks during calls")


async def test_two_sessions_first_concurrent_asks_each_reach_their_own_client(coffer_home: Path) -> None:
    """The first time the vault sees a server ask mid-call, two sessions' calls are in flight at once and
    both ask: nothing can end to say whose ask is whose, so they are matched in call order, at once (not
    after a timeout), and each session answers its own."""
    add_fixture(coffer_home, "alpha", "relay", timeout=20)
    async with (
        serve(coffer_home, elicitation_callback=named("Ada")) as a,
        serve(coffer_home, elicitation_callback=named("Bob")) as b,
    ):
        await a.tool_names()
        await b.tool_names()
        answers: dict[str, str] = {}

        async def ask(who: str, s: Any) -> None:
            answers[who] = text(await s.call("alpha__ask_user"))

        started = anyio.current_time()
        with anyio.fail_after(15):  # a deadlock would wait for the calls' 20 s timeout
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "a", a)
                tg.start_soon(ask, "b", b)
        assert answers == {"a": "accept: Ada", "b": "accept: Bob"}, answers
        assert anyio.current_time() - started < 10
