"""`coffer serve` end to end: a real subprocess, real fixture upstreams, a real MCP client session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from coffer.gateway.listings import SNAPSHOT_META
from coffer.vault import catalogue, registry
from tests.fixtures.gateway_harness import add_fixture, read_events, serve, text, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.serve_modes]  # through the engine and --standalone


async def test_merge_route_curate_and_builtins(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha", disabled_tools=["crash"])
    add_fixture(coffer_home, "beta", "garbage")
    add_fixture(coffer_home, "gamma", enabled=False)
    async with serve(coffer_home) as s:
        names = await s.tool_names()
        assert names[:3] == ["coffer__search_tools", "coffer__ask", "coffer__read_result"]
        assert {"alpha__echo", "alpha__add", "beta__echo", "beta__noisy"} <= set(names)
        assert "alpha__crash" not in names and not any(n.startswith("gamma__") for n in names)
        assert names[3:] == sorted(names[3:])

        assert text(await s.call("alpha__add", {"a": 2, "b": 3})) == "5"
        failed = await s.call("alpha__fail")
        assert failed.is_error and "fixture failure: bad input" in text(failed)
        boom = await s.call("alpha__boom")
        assert boom.is_error and "boom from fixture" in text(boom)
        # garbage on the upstream's stdout, before and between frames, does not break its session
        assert text(await s.call("beta__noisy")) == "still here"
        assert text(await s.call("beta__echo", {"text": "ok"})) == "ok"

        # curation is decided at call time, even for names the host kept from an earlier list
        refused = await s.call("alpha__crash")
        assert refused.is_error and "disabled" in text(refused) and "coffer enable alpha__crash" in text(refused)
        assert "server 'gamma' is disabled" in text(await s.call("gamma__echo"))
        unknown = await s.call("nowhere__tool")
        assert unknown.is_error and "unknown tool 'nowhere__tool'" in text(unknown)
        registry.set_enabled("beta", None, False)
        assert "server 'beta' is disabled" in text(await s.call("beta__echo", {"text": "x"}))
        assert not any(n.startswith("beta__") for n in await s.tool_names())
        registry.set_enabled("alpha", "echo", False)
        assert (await s.call("alpha__echo", {"text": "x"})).is_error

        prompts = [p.name for p in (await s.session.list_prompts()).prompts]
        assert prompts == ["alpha__greet"]
        greeting = await s.session.get_prompt("alpha__greet", {"name": "Ada"})
        assert greeting.messages[0].content.text == "Hello, Ada!"  # type: ignore[union-attr]
        uris = [r.uri for r in (await s.session.list_resources()).resources]
        assert uris == ["fixture://alpha/readme"]
        readme = await s.session.read_resource("fixture://alpha/readme")
        assert "pineapple" in readme.contents[0].text  # type: ignore[union-attr]
        item = await s.session.read_resource("fixture://alpha/item/42")  # routed by the template
        assert item.contents[0].text == "item 42"  # type: ignore[union-attr]

        found = await s.call("coffer__search_tools", {"query": "add two numbers", "top_k": 3})
        data = found.structured_content
        assert data is not None and json.loads(text(found)) == data
        assert data["tools"][0]["name"] == "alpha__add"
        assert data["tools"][0]["inputSchema"]["properties"]["a"] == {"type": "number"}
        assert all(not t["name"].startswith("coffer__") and not t["name"].startswith("beta__") for t in data["tools"])
        assert "alpha__echo" not in [t["name"] for t in data["tools"]]
        assert data["total_searched"] == len([n for n in await s.tool_names() if not n.startswith("coffer__")])
        many = (await s.call("coffer__search_tools", {"query": "tool", "top_k": 50})).structured_content
        assert many is not None and len(many["tools"]) <= 20
        bad = await s.call("coffer__search_tools", {"query": "x", "top_k": 0})
        assert bad.is_error and "top_k" in text(bad)
        assert (await s.call("coffer__search_tools", {})).is_error

        asked = await s.call("coffer__ask", {"question": "where are the launch codes kept?"})
        passages = (asked.structured_content or {}).get("passages", [])
        assert any("pineapple" in p["text"] and p["source"]["server"] == "alpha" for p in passages)

    snap = catalogue.load_snapshot()
    assert snap is not None and {"alpha", "beta"} <= set(snap.servers)
    assert "echo" in [t["name"] for t in snap.servers["alpha"].tools]

    from coffer.log.calls import open_log
    from coffer.log.query import query

    rows = query(open_log(), limit=100)
    outcomes = {(r["server"], r["tool"], r["outcome"]) for r in rows}
    assert ("alpha", "add", "ok") in outcomes
    assert ("alpha", "fail", "error") in outcomes
    assert ("alpha", "crash", "refused") in outcomes
    assert ("coffer", "search_tools", "ok") in outcomes
    assert ("coffer", "ask", "ok") in outcomes
    assert all(r["client_name"] == "mcp" for r in rows)


async def test_failures_stay_isolated(coffer_home: Path, tmp_path: Path) -> None:
    crash_events = tmp_path / "crashy.events"
    add_fixture(coffer_home, "good")
    add_fixture(coffer_home, "crashy", "crash_start", events=crash_events)
    add_fixture(coffer_home, "hangs", "hang_start", timeout=1.5)
    # a generous start timeout: a blocked pipe never answers, while two busy CI workers can take 5 s
    add_fixture(coffer_home, "flood", "stderr_flood", timeout=30)
    async with serve(coffer_home) as s:
        names = await s.tool_names()
        assert not any(n.startswith(("crashy__", "hangs__")) for n in names)
        # 1 MiB on stderr before serving: drained, so the server is not stuck on a full pipe
        assert text(await s.call("flood__echo", {"text": "drained"})) == "drained"
        assert text(await s.call("good__echo", {"text": "fine"})) == "fine"

        failed = await s.call("crashy__echo", {"text": "x"})
        assert failed.is_error and "exited with code 3" in text(failed)
        assert "the fixture refuses to start" in text(failed)  # the stderr tail explains why
        for _ in range(5):
            assert (await s.call("crashy__echo", {"text": "x"})).is_error
        # a crash loop is restarted on demand with backoff, not once per call
        assert len([e for e in read_events(crash_events) if e.startswith("start:")]) <= 4

        hung = await s.call("hangs__echo", {"text": "x"})
        assert hung.is_error and "no answer within 1.5s" in text(hung)

        pid_before = text(await s.call("good__pid"))
        died = await s.call("good__crash")
        assert died.is_error and "crashing on purpose" in text(died)
        assert text(await s.call("good__echo", {"text": "back"})) == "back"  # restarted on the next call
        assert text(await s.call("good__pid")) != pid_before


async def test_progress_cancellation_timeout_and_list_changed(coffer_home: Path, tmp_path: Path) -> None:
    events = tmp_path / "alpha.events"
    slow_events = tmp_path / "slow.events"
    add_fixture(coffer_home, "alpha", events=events)
    add_fixture(coffer_home, "sluggish", events=slow_events, timeout=3.0)
    async with serve(coffer_home) as s:
        seen: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total))

        done = await s.call("alpha__slow", {"seconds": 0.2}, progress_callback=on_progress)
        assert text(done) == "slow done"
        assert seen == [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)]

        with anyio.move_on_after(0.5):
            await s.call("alpha__slow", {"seconds": 60})
        await wait_for(lambda: "slow:cancelled" in read_events(events), what="the upstream to see the cancel")
        assert text(await s.call("alpha__echo", {"text": "still fine"})) == "still fine"

        timed_out = await s.call("sluggish__slow", {"seconds": 60})
        assert timed_out.is_error and "timed out after 3s" in text(timed_out)
        await wait_for(lambda: "slow:cancelled" in read_events(slow_events), what="the timeout's upstream cancel")

        await s.tool_names()
        s.notifications.clear()  # start-up listings are announced too; wait for the one grow causes
        added = text(await s.call("alpha__grow"))
        await wait_for(
            lambda: any(isinstance(n, types.ToolListChangedNotification) for n in s.notifications),
            what="tools/list_changed re-sent by the gateway",
        )
        assert f"alpha__{added}" in await s.tool_names()
        assert text(await s.call(f"alpha__{added}")) == added

    from coffer.log.calls import open_log
    from coffer.log.query import query

    outcomes = {(r["server"], r["tool"], r["outcome"]) for r in query(open_log(), limit=50)}
    assert ("alpha", "slow", "cancelled") in outcomes
    assert ("sluggish", "slow", "timeout") in outcomes


async def test_first_tools_list_comes_from_the_snapshot(coffer_home: Path) -> None:
    add_fixture(coffer_home, "sleepy", "hang_start", timeout=60)
    remembered = {"name": "remembered_tool", "description": "From the snapshot.", "inputSchema": {"type": "object"}}
    catalogue.save_server("sleepy", tools=[remembered])
    async with serve(coffer_home) as s:
        # the upstream never answers; the host still gets its full list at once
        assert "sleepy__remembered_tool" in await s.tool_names()
        found = await s.call("coffer__search_tools", {"query": "remembered tool from the snapshot"})
        assert found.structured_content is not None
        assert found.structured_content["tools"][0]["name"] == "sleepy__remembered_tool"


async def test_log_rows_are_not_trust_changes(coffer_home: Path) -> None:
    """Every call's log row commits to coffer.db; taken for a trust change, it re-merged the catalogue on each call."""
    import time

    from coffer.gateway.server import Gateway
    from coffer.log.calls import CallLog, CallRecord
    from coffer.trust.pinning import Pins
    from coffer.vault.catalogue import build_tools

    add_fixture(coffer_home, "alpha", enabled=False)  # catalogued, never started: nothing else changes
    catalogue.save_server("alpha", tools=[{"name": "echo", "inputSchema": {"type": "object"}}])
    gw = Gateway()
    async with gw.running():
        gw.current_registry()
        view = gw.merged()
        calllog = CallLog.open()
        calllog.record(
            CallRecord(
                ts=time.time(),
                client_name="t",
                client_version="1",
                server="alpha",
                tool="echo",
                duration_ms=1.0,
                outcome="ok",
                error_class=None,
            )
        )
        assert calllog.flush()
        calllog.close()
        gw.current_registry()
        assert gw.merged() is view
        with Pins.open(new_tools="allow") as other:  # a real trust change, from another connection
            changed = [{"name": "echo", "description": "now different", "inputSchema": {"type": "object"}}]
            assert other.observe("alpha", build_tools("alpha", changed)) == {"alpha__echo"}
        gw.current_registry()
        assert gw.merged() is not view and gw.refusal("alpha", "echo", "alpha__echo") is not None


@pytest.mark.one_mode("in-process")  # the engine's counterpart: tests/engine/test_cold_start.py
async def test_a_first_list_is_what_the_server_listed_for_the_hosts_capabilities(coffer_home: Path) -> None:
    """Standalone, an upstream is told what its one host declared, and may list by it (get_roots only for a
    host with roots). The first list never waits for it: it is the snapshot's listing for those capabilities;
    with none for them, its last listing, saying what that was for, and the live list follows with
    list_changed. Once both were seen, each host's first list is exactly its own."""

    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    add_fixture(coffer_home, "cs", "capsensitive,slow_start=1", timeout=10)
    async with serve(coffer_home, args=("--standalone",), list_roots_callback=roots) as s:
        await wait_for(lambda: "roots" in (catalogue_told(coffer_home, "cs") or []), 30, "the snapshot of cs")
        assert "cs__get_roots" in await s.tool_names()
    async with serve(coffer_home, args=("--standalone",)) as s:
        first = await s.session.list_tools()
        note = (first.meta or {})[SNAPSHOT_META]
        assert note["pending"] == ["cs"] and note["listedForOtherCapabilities"] == {"cs": ["roots"]}, note
        assert {"cs__echo", "cs__get_roots"} <= {t.name for t in first.tools}  # the last listing, said so
        await wait_for(lambda: any(_tools_changed(n) for n in s.notifications), 30, "list_changed")
        names = await s.tool_names()
        assert "cs__echo" in names and "cs__get_roots" not in names
        await wait_for(lambda: catalogue_told(coffer_home, "cs") == [], 30, "the snapshot of cs without roots")
    async with serve(coffer_home, args=("--standalone",)) as s:  # the listing for no capabilities, exactly
        first = await s.session.list_tools()
        assert "listedForOtherCapabilities" not in (first.meta or {}).get(SNAPSHOT_META, {}), first.meta
        assert "cs__echo" in {t.name for t in first.tools} and "cs__get_roots" not in {t.name for t in first.tools}
    async with serve(coffer_home, args=("--standalone",), list_roots_callback=roots) as s:  # and for roots
        first = await s.session.list_tools()
        assert "listedForOtherCapabilities" not in (first.meta or {}).get(SNAPSHOT_META, {}), first.meta
        assert {"cs__echo", "cs__get_roots"} <= {t.name for t in first.tools}


def _tools_changed(message: Any) -> bool:
    return isinstance(getattr(message, "root", message), types.ToolListChangedNotification)


def catalogue_told(home: Path, server: str) -> list[str] | None:
    snap = catalogue.load_snapshot()
    entry = None if snap is None else snap.servers.get(server)
    return None if entry is None else entry.told


async def test_a_server_that_never_lists_is_remembered_and_reported(coffer_home: Path) -> None:
    """It fails its first start under `coffer serve`: the snapshot remembers why, so the next start's first
    tools/list does not wait for it again, and `coffer doctor` says it is missing from that list."""
    add_fixture(coffer_home, "good")
    add_fixture(coffer_home, "stuck", "hang_start", timeout=1.0)
    async with serve(coffer_home) as s:
        assert "good__echo" in await s.tool_names()  # answered once stuck's start failed, with everything else

        def remembered() -> bool:
            snap = catalogue.load_snapshot()
            return snap is not None and bool(getattr(snap.servers.get("stuck"), "error", None))

        await wait_for(remembered, 30, "the failure in the snapshot")
    snap = catalogue.load_snapshot()
    assert snap is not None and "no answer within 1s" in str(snap.servers["stuck"].error)
    assert snap.servers["stuck"].tools == [] and len(snap.servers["good"].tools) == 10

    from coffer.manage import doctor

    report = await anyio.to_thread.run_sync(lambda: doctor.diagnose())
    stuck = next(d for d in report.servers if d.name == "stuck")
    assert stuck.missing_from_first_list and any("missing from the first tools/list" in n for n in stuck.notes)
    good = next(d for d in report.servers if d.name == "good")
    assert not good.missing_from_first_list


async def test_broken_tools_are_dropped_and_minus_32000_passes_through(coffer_home: Path) -> None:
    """One tool with a bad or missing schema must not sink the server's listing; a -32000 error answer is
    the upstream's error, not a lost connection: passed through, same session, same process."""
    add_fixture(coffer_home, "rough", "bad_schema")
    async with serve(coffer_home) as s:
        pid_before = text(await s.call("rough__pid"))
        names = await s.tool_names()
        assert "rough__echo" in names and "rough__schemaless" in names and "rough__stringly" not in names
        tools = {t.name: t for t in (await s.session.list_tools()).tools}
        assert tools["rough__schemaless"].input_schema == {"type": "object"}
        failed = await s.call("rough__server_error")
        assert failed.is_error and "the backend said no" in text(failed) and "closed" not in text(failed)
        assert text(await s.call("rough__pid")) == pid_before  # the session and the process are the same

    from coffer.manage import doctor

    report = await anyio.to_thread.run_sync(lambda: doctor.diagnose())
    notes = " ".join(next(d for d in report.servers if d.name == "rough").notes)
    assert "'stringly' was dropped" in notes and "'schemaless' had no inputSchema" in notes


async def test_unreachable_schema_definitions_are_not_advertised(coffer_home: Path) -> None:
    """A definition no $ref reaches costs every request tokens and validates nothing: listed without it;
    the ones the schema uses stay, and the tool is called as before."""
    add_fixture(coffer_home, "shared", "shared_defs")
    async with serve(coffer_home) as s:
        tools = {t.name: t for t in (await s.session.list_tools()).tools}
        schema = tools["shared__locate"].input_schema
        assert set(schema["$defs"]) == {"place", "name"}
        assert schema["properties"] == {"place": {"$ref": "#/$defs/place"}} and schema["required"] == ["place"]
        assert text(await s.call("shared__locate", {"place": {"city": "Oslo"}})) == "Oslo"
    snap = catalogue.load_snapshot()  # the catalogue keeps what the server sent, for pinning and diff
    assert snap is not None
    (raw,) = [t for t in snap.servers["shared"].tools if t["name"] == "locate"]
    assert "pageBlock" in raw["inputSchema"]["$defs"]


async def test_hanging_starts_do_not_starve_healthy_servers(coffer_home: Path) -> None:
    """Cold start (no snapshot), as many servers that never answer initialize as there are start slots,
    registered before two healthy ones: the first tools/list still has the healthy servers' tools (a
    hanging start gives its slot back after 1.5 s; holding it, the healthy ones would wait 60 s). One
    round of hangs, not two: on a busy 2-core CI machine two rounds left too little of the 7 s budget."""
    from coffer.gateway.pool import START_SLOTS

    for i in range(START_SLOTS):
        add_fixture(coffer_home, f"hang{i}", "hang_start", timeout=60)
    add_fixture(coffer_home, "good1")
    add_fixture(coffer_home, "good2")
    async with serve(coffer_home) as s:
        names = await s.tool_names()
    assert "good1__echo" in names and "good2__echo" in names


async def test_an_oversized_frame_fails_the_call_with_that_reason(coffer_home: Path) -> None:
    """80 MB on stdout with no newline: the pending call fails as soon as the frame passes the limit (not
    when its 60 s timeout ends), saying why, and the other servers go on."""
    add_fixture(coffer_home, "huge", "huge", timeout=60)
    add_fixture(coffer_home, "calm")
    async with serve(coffer_home) as s:
        with anyio.fail_after(45):  # a bound on a hung test, well under the call's own 60 s timeout
            result = await s.call("huge__hugeline")
        assert result.is_error and "frame exceeded 64 MB" in text(result), text(result)
        assert text(await s.call("calm__echo", {"text": "fine"})) == "fine"


async def test_a_held_snapshot_lock_holds_up_no_listing(coffer_home: Path) -> None:
    """Another coffer process writing the catalogue snapshot (five sessions starting at once) must not hold
    up this gateway's listings or their announcements: the write waits, and lands once the lock is free."""
    from filelock import FileLock

    from coffer.vault import paths

    add_fixture(coffer_home, "alpha")
    lock = FileLock(str(paths.snapshot_path()) + ".lock")
    async with serve(coffer_home) as s:
        assert "alpha__echo" in await s.tool_names()

        def saved(tool: str) -> bool:
            snap = catalogue.load_snapshot()
            entry = snap.servers.get("alpha") if snap is not None else None
            return entry is not None and tool in [t["name"] for t in entry.tools]

        await wait_for(lambda: saved("echo"), 20, "the start-up listing in the snapshot (announced before it)")
        lock.acquire()
        try:
            s.notifications.clear()
            added = text(await s.call("alpha__grow"))
            await wait_for(
                lambda: any(isinstance(n, types.ToolListChangedNotification) for n in s.notifications),
                what="tools/list_changed while another process holds the snapshot's lock",
            )
            assert f"alpha__{added}" in await s.tool_names()
            assert text(await s.call(f"alpha__{added}")) == added
            assert not saved(added)
        finally:
            lock.release()
        await wait_for(lambda: saved(added), 20, "the grown tool in the snapshot once the lock is free")
