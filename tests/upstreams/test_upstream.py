"""Upstream sessions and the pool, in process, against real fixture subprocesses."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from coffer.errors import UpstreamError
from coffer.gateway.pool import Pool, StartGate, probe
from coffer.upstreams.framing import SMALL_MESSAGE, lines
from coffer.upstreams.transport import TAIL_BYTES, StreamStats, child_env, stdio_pipe
from coffer.upstreams.upstream import BACKOFF_CAP_S, State, UpstreamUnavailable, backoff
from coffer.vault.registry import ServerConfig
from tests.fixtures.gateway_harness import FIXTURE, descendants

pytestmark = pytest.mark.anyio


def fixture_cfg(name: str, mode: str = "normal", **kw: object) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=[str(FIXTURE), "--mode", mode, "--name", name], **kw)  # type: ignore[arg-type]


def call(tool: str, **args: object) -> types.CallToolRequest:
    return types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=args))


def test_backoff_is_capped_and_bounds_a_crash_loop() -> None:
    assert [backoff(n) for n in range(1, 7)] == [0.0, 1.0, 3.0, 9.0, 27.0, 81.0]
    assert backoff(50) == BACKOFF_CAP_S == 300.0
    spawns, t = 0, 0.0
    while t < 3600:  # a server that dies at once, asked for on every call, all hour long
        spawns += 1
        t += backoff(spawns) + 0.5
    assert spawns <= 20


async def test_start_gate_bounds_starts_and_lets_urgent_ones_through() -> None:
    gate = StartGate(1)
    order: list[str] = []

    async def start(name: str, urgent: bool = False) -> None:
        await gate.acquire(lambda: urgent)
        order.append(name)

    await gate.acquire(lambda: False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(start, "queued")
        await anyio.wait_all_tasks_blocked()
        assert order == []  # one slot, held
        tg.start_soon(start, "urgent", True)
        await anyio.wait_all_tasks_blocked()
        assert order == ["urgent"]
        gate.release()
        gate.release()
    assert order == ["urgent", "queued"]


async def test_probe_lists_tools_prompts_resources_and_templates() -> None:
    lists = await probe(fixture_cfg("alpha"))
    assert {"echo", "add", "slow"} <= {t["name"] for t in lists["tools"]}
    assert lists["tools"][0]["inputSchema"]["type"] == "object"  # wire format, camelCase
    assert [p["name"] for p in lists["prompts"]] == ["greet"]
    assert [r["uri"] for r in lists["resources"]] == ["fixture://alpha/readme"]
    assert lists["resource_templates"][0]["uriTemplate"] == "fixture://alpha/item/{id}"


async def test_probe_failure_explains_with_the_stderr_tail() -> None:
    with pytest.raises(UpstreamError, match="exited with code 3; stderr: fatal: the fixture refuses to start"):
        await probe(fixture_cfg("dead", "crash_start"))


async def test_permanent_failures_are_not_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("COFFER_TEST_UNSET", raising=False)
    missing = ServerConfig(name="missing", command="coffer-no-such-program-xyz", timeout=5)
    secret = fixture_cfg("secret", env={"TOKEN": "${COFFER_TEST_UNSET}"}, timeout=5)
    (tmp_path / "plain.txt").write_text("not a program\n")
    gone = ServerConfig(name="gone", command=str(tmp_path / "nope"), timeout=5)  # paths skip the PATH lookup
    plain = ServerConfig(name="plain", command=str(tmp_path / "plain.txt"), timeout=5)
    async with Pool() as pool:
        pool.sync([missing, secret, gone, plain])
        for name, reason in (
            ("missing", "command not found: coffer-no-such-program-xyz"),
            ("secret", "COFFER_TEST_UNSET"),
            ("gone", f"command not found: {tmp_path / 'nope'}"),
            ("plain", "permission denied running"),
        ):
            up = pool.upstreams[name]
            for _ in range(3):
                with pytest.raises(UpstreamUnavailable, match=reason):
                    await up.ready_session(5)
            assert up.state is State.FAILED and up.spawns == 1
        assert pool.upstreams["missing"].error_class == pool.upstreams["gone"].error_class == "spawn_enoent"
        assert pool.upstreams["plain"].error_class == "spawn_eacces"
        assert pool.upstreams["secret"].error_class == "missing_secret"
        assert not pool.pids  # the secret-less server was never spawned


@pytest.mark.skipif(sys.platform != "linux", reason="the supervisor (coffer.upstreams.reaper) is Linux-only")
async def test_stdio_children_start_with_default_signal_dispositions() -> None:
    """The supervisor is Python, which ignores SIGPIPE; the program it starts must not inherit that."""
    pids: set[int] = set()
    async with stdio_pipe(["/bin/sleep", "30"], child_env({}), None, StreamStats(), lambda: None, pids):
        (supervisor,) = pids
        server: list[int] = []
        with anyio.fail_after(10):
            while not server:  # the supervisor's child, once it has exec'd the program
                server = [p for p in descendants(supervisor) if _exe(p).endswith("sleep")]
                await anyio.sleep(0.01)
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{server[0]}/status").read_text().splitlines())
        assert not int(status["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1))
    for pid in (supervisor, server[0]):
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


async def test_env_is_what_the_registry_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COFFER_TEST_TOKEN", "tok-from-parent")
    monkeypatch.setenv("COFFER_TEST_PARENT_ONLY", "must-not-leak")
    cfg = fixture_cfg("envy", env={"DECLARED": "literal", "TOKEN": "${COFFER_TEST_TOKEN}"})
    async with Pool() as pool:
        pool.sync([cfg])
        up = pool.upstreams["envy"]
        got: dict[types.RequestId, str] = {}
        for var in ("DECLARED", "TOKEN", "COFFER_TEST_PARENT_ONLY", "PATH"):
            result = await up.request(call("env", name=var))
            got[var] = result["content"][0]["text"]
    assert got["DECLARED"] == "literal" and got["TOKEN"] == "tok-from-parent"
    assert got["COFFER_TEST_PARENT_ONLY"] == "<unset>" and got["PATH"] != "<unset>"


async def test_stderr_is_drained_bounded_and_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COFFER_TEST_TOKEN", "s3cret-value-123")
    leaky = fixture_cfg("leaky", "leak_env=TOKEN", env={"TOKEN": "${COFFER_TEST_TOKEN}"}, timeout=5)
    async with Pool() as pool:
        pool.sync([fixture_cfg("flood", "stderr_flood"), fixture_cfg("noisy", "garbage"), leaky])
        flood, noisy, leak = (pool.upstreams[n] for n in ("flood", "noisy", "leaky"))
        assert (await flood.request(call("echo", text="ok")))["content"][0]["text"] == "ok"
        assert len(flood.stats.stderr_tail().encode()) <= TAIL_BYTES
        assert flood.stats.last_stderr_line() == "flood done"
        assert (await noisy.request(call("noisy")))["content"][0]["text"] == "still here"
        assert noisy.stats.garbage_lines == 4 and "npm WARN" in noisy.stats.garbage_sample
        with pytest.raises(UpstreamUnavailable) as info:
            await leak.ready_session(5)
    assert "auth failed for token ****" in str(info.value)
    assert "s3cret-value-123" not in str(info.value) and "s3cret-value-123" not in leak.status()["stderr_tail"]


async def test_crash_mid_call_then_restart_on_next_call() -> None:
    async with Pool() as pool:
        pool.sync([fixture_cfg("alpha")])
        up = pool.upstreams["alpha"]
        first = (await up.request(call("pid")))["content"][0]["text"]
        with pytest.raises(UpstreamUnavailable, match="closed the connection"):
            await up.request(call("crash"))
        second = (await up.request(call("pid")))["content"][0]["text"]
        assert second != first and up.spawns == 2 and up.state is State.READY
        assert up.status()["failures"] == 1


def _request(n: int, text: str = "x") -> SessionMessage:
    params = {"name": "echo", "arguments": {"text": text}}
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=n, method="tools/call", params=params))


def test_queued_messages_are_written_together_and_a_big_one_is_not_copied() -> None:
    big = _request(3, "b" * (SMALL_MESSAGE + 1))
    batch = [_request(1), _request(2), big, _request(4)]
    calls: set[types.RequestId] = set()
    written = list(lines(batch, calls))
    assert calls == {1, 2, 3, 4}
    first = bytes(written[0])
    assert first.count(b"\n") == 2 and first.endswith(b"\n")  # two small ones, one buffer
    assert all(isinstance(piece, memoryview) for piece in written[1:-2])  # slices of pydantic's bytes
    assert written[-2] == b"\n" and bytes(written[-1]).count(b"\n") == 1
    stream = b"".join(bytes(piece) for piece in written)
    assert [int(line.split(b'"id":')[1].split(b",")[0]) for line in stream.splitlines()] == [1, 2, 3, 4]


async def test_concurrent_writers_reach_the_child_whole_and_in_order() -> None:
    """`cat` sends back what it is sent: 40 requests sent at once, one of them big, come back as sent."""
    sizes = {n: (SMALL_MESSAGE * 2 if n == 17 else 10 + n) for n in range(40)}
    async with stdio_pipe(["/bin/cat"], child_env({}), None, StreamStats(), lambda: None) as (read, write):
        async with anyio.create_task_group() as tg:
            for n, size in sizes.items():
                tg.start_soon(write.send, _request(n, str(n % 10) * size))
        got: dict[types.RequestId, str] = {}
        with anyio.fail_after(20):
            while len(got) < len(sizes):
                message = await read.receive()
                assert isinstance(message, SessionMessage)
                request = message.message
                assert isinstance(request, types.JSONRPCRequest) and request.params is not None
                got[request.id] = request.params["arguments"]["text"]
    assert got == {n: str(n % 10) * size for n, size in sizes.items()}
