"""Tasks (SEP-1686) by parity: the same raw JSON-RPC to the protocol fixture directly and through
`coffer serve`, then what only the gateway does: ids that name the server, the invocation-log row, a
task cancelled when its host goes, and the bridge for hosts that send no `task`. The real
`@modelcontextprotocol/server-everything@2026.8.31` (.ci/run installs it) is driven the same way.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from coffer.manage import servers
from coffer.vault import registry
from tests.fixtures.gateway_harness import wait_for
from tests.fixtures.raw_peer import RawPeer, protocol_argv, protocol_peer, raw_peer, serve_argv

pytestmark = pytest.mark.anyio
VIAS = pytest.mark.parametrize("via", ["direct", "coffer"])
TASK_HOST = {"tasks": {"list": {}, "cancel": {}}}
ROOT = Path(__file__).resolve().parents[2]
NPM = ROOT / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = NPM / "server-everything" / "dist" / "index.js"


def peer(via: str, home: Path, *extra: str, capabilities: dict[str, Any] | None = None) -> Any:
    caps = TASK_HOST if capabilities is None else capabilities
    return protocol_peer(via, home, *extra, capabilities=caps, listed=True)


def research_rows() -> list[dict[str, Any]]:
    from coffer.log import calls, query

    return [r for r in query.query(calls.open_log()) if r["tool"] == "research"]


def text_of(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result["content"])


async def until_done(p: RawPeer, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(20):
        while True:
            answer = await p.request("tasks/get", {"taskId": task_id})
            assert "result" in answer, answer
            task = answer["result"]
            if task["status"] in ("completed", "failed", "cancelled"):
                return dict(task)
            await anyio.sleep(0.05)


@VIAS
async def test_a_task_runs_to_its_result(via: str, coffer_home: Path) -> None:
    async with peer(via, coffer_home) as p:
        assert p.init["capabilities"]["tasks"]["requests"]["tools"]["call"] == {}
        created = (await p.call("research", {"q": "x"}, task={"ttl": 30000}))["result"]
        task = created["task"]
        assert task["status"] == "working" and task["ttl"] == 30000
        task_id = task["taskId"]
        assert (await until_done(p, task_id))["status"] == "completed"
        result = (await p.request("tasks/result", {"taskId": task_id}))["result"]
        assert text_of(result) == "research finished in 3 steps on proto"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        listed = (await p.request("tasks/list", {}))["result"]["tasks"]
        assert [(t["taskId"], t["status"]) for t in listed] == [(task_id, "completed")]
        statuses = [n["params"] for n in p.notes if n["method"] == "notifications/tasks/status"]
        assert {s["taskId"] for s in statuses} == {task_id}
        assert [s["status"] for s in statuses][-1] == "completed"
        assert "step 1 of 3" in [s.get("statusMessage") for s in statuses]


@VIAS
async def test_a_task_can_be_cancelled(via: str, coffer_home: Path) -> None:
    async with peer(via, coffer_home, "--steps", "50", "--step-s", "0.2") as p:
        task_id = (await p.call("research", task={"ttl": 30000}))["result"]["task"]["taskId"]
        cancelled = (await p.request("tasks/cancel", {"taskId": task_id}))["result"]
        assert cancelled["taskId"] == task_id and cancelled["status"] == "cancelled"
        assert (await until_done(p, task_id))["status"] == "cancelled"
        again = await p.request("tasks/cancel", {"taskId": task_id})
        assert again["error"]["code"] == -32602


@VIAS
async def test_an_unknown_task_is_an_error(via: str, coffer_home: Path) -> None:
    async with peer(via, coffer_home) as p:
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            response = await p.request(method, {"taskId": "no-such-task"})
            assert response["error"]["code"] == -32602, method


@VIAS
async def test_an_optional_task_tool_runs_at_once_without_a_task(via: str, coffer_home: Path) -> None:
    async with peer(via, coffer_home) as p:
        assert text_of((await p.call("maybe_task"))["result"]) == "maybe_task ran at once on proto"
        created = (await p.call("maybe_task", task={"ttl": 30000}))["result"]
        assert (await until_done(p, created["task"]["taskId"]))["status"] == "completed"


async def test_task_ids_name_their_server_and_one_log_row_is_written(coffer_home: Path) -> None:
    async with peer("coffer", coffer_home, "--steps", "4", "--step-s", "0.25") as p:
        task_id = (await p.call("research", task={"ttl": 30000}))["result"]["task"]["taskId"]
        assert task_id.startswith("proto/")
        # the host never asks: the gateway's watcher still sees it end and writes its row
        await wait_for(lambda: research_rows() != [], timeout=20, what="the task's log row")
    rows = research_rows()
    assert len(rows) == 1
    assert rows[0]["server"] == "proto" and rows[0]["outcome"] == "ok"
    assert rows[0]["duration_ms"] >= 900  # the task's real duration (4 x 0.25 s), not the call's


async def test_a_task_is_cancelled_upstream_when_its_host_goes(coffer_home: Path, tmp_path: Path) -> None:
    events = tmp_path / "events.txt"
    async with peer("coffer", coffer_home, "--steps", "100", "--step-s", "0.2", "--events", str(events)) as p:
        task_id = (await p.call("research", task={"ttl": 60000}))["result"]["task"]["taskId"]
    upstream_id = task_id.split("/", 1)[1]
    # the engine sees the session end, cancels upstream, then writes the row (off the call path)
    await wait_for(lambda: f"cancelled:{upstream_id}" in events.read_text().splitlines(), what="the cancel")
    await wait_for(lambda: research_rows() != [], what="the task's log row")
    (row,) = research_rows()
    assert (row["outcome"], row["error_class"]) == ("cancelled", "task_cancelled")


async def test_a_host_without_tasks_can_call_a_tool_that_requires_one(coffer_home: Path) -> None:
    """The bridge: direct, the fixture refuses; through Coffer the call runs as a task and answers plainly,
    with the status messages as progress."""
    async with peer("direct", coffer_home, capabilities={}) as p:
        assert (await p.call("research"))["error"]["code"] == -32601
    async with peer("coffer", coffer_home, capabilities={}) as p:
        response = await p.call("research", _meta={"progressToken": "bridge-1"})
        assert "result" in response, response
        result = response["result"]
        assert not result.get("isError") and text_of(result) == "research finished in 3 steps on proto"
        assert "io.modelcontextprotocol/related-task" not in (result.get("_meta") or {})
        progress = [n["params"] for n in p.notes if n["method"] == "notifications/progress"]
        assert progress and {n["progressToken"] for n in progress} == {"bridge-1"}
        assert any("step" in str(n.get("message")) for n in progress)


async def test_the_bridge_cancels_a_task_past_the_servers_timeout(coffer_home: Path, tmp_path: Path) -> None:
    events = tmp_path / "events.txt"
    argv = protocol_argv("proto", "--steps", "100", "--step-s", "0.2", "--events", str(events))
    servers.add_server(registry.ServerConfig(name="proto", command=argv[0], args=argv[1:], timeout=2, prefix=""))
    serve, env = serve_argv(coffer_home)
    async with raw_peer(serve, env) as p:
        await p.request("tools/list")
        result = (await p.call("research"))["result"]
        assert result["isError"] and "timed out after 2s" in text_of(result)
    tasks = [line.split(":", 1)[1] for line in events.read_text().splitlines() if line.startswith("task:")]
    assert tasks and all(f"cancelled:{t}" in events.read_text() for t in tasks)


@pytest.mark.skipif(not EVERYTHING.exists() or shutil.which("node") is None, reason="run .ci/run for server-everything")
async def test_server_everything_research_through_coffer(coffer_home: Path) -> None:
    cfg = registry.ServerConfig(name="everything", command="node", args=[str(EVERYTHING), "stdio"], timeout=30)
    servers.add_server(cfg)
    argv, env = serve_argv(coffer_home)
    async with raw_peer(argv, env, capabilities=TASK_HOST) as p:
        tools = {t["name"]: t for t in (await p.request("tools/list"))["result"]["tools"]}
        assert tools["everything__simulate-research-query"]["execution"] == {"taskSupport": "required"}
        created = await p.call("everything__simulate-research-query", {"topic": "tides"}, task={"ttl": 60000})
        task_id = created["result"]["task"]["taskId"]
        assert task_id.startswith("everything/")
        assert (await until_done(p, task_id))["status"] == "completed"
        report = text_of((await p.request("tasks/result", {"taskId": task_id}))["result"])
        assert "# Research Report: tides" in report
        assert any(n["method"] == "notifications/tasks/status" for n in p.notes)
    async with raw_peer(argv, env, capabilities={}) as p:  # the bridge, on the real server
        await p.request("tools/list")
        assert p.init["capabilities"]["tasks"]["requests"]["tools"]["call"] == {}
        result = (await p.call("everything__simulate-research-query", {"topic": "reefs"}))["result"]
        assert not result.get("isError") and "# Research Report: reefs" in text_of(result)
