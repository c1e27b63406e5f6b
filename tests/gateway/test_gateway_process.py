"""`coffer serve` as a process: no orphans after SIGTERM or stdin EOF, and hosts of both MCP eras."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters, stdio_client

from coffer.vault import registry
from tests.fixtures.gateway_harness import (
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

pytestmark = [pytest.mark.anyio, pytest.mark.serve_modes]  # through the engine and --standalone


@pytest.mark.parametrize("how", ["sigterm", "stdin_eof"])
async def test_shutdown_leaves_no_process_behind(coffer_home: Path, tmp_path: Path, how: str) -> None:
    events = tmp_path / "events"
    add_fixture(coffer_home, "kids", "spawn_child", events=events)
    add_fixture(coffer_home, "stubborn", "stubborn", events=events)  # ignores SIGTERM and stdin EOF
    async with serve(coffer_home) as s:
        for name in ("kids__pid", "stubborn__pid"):
            assert not (await s.call(name)).is_error
        tree = descendants(s.pid)
        grandchild = host_pid(next(e.split(":", 1)[1] for e in read_events(events) if e.startswith("child:")))
        assert grandchild in tree and len(tree) >= 3
        if how == "sigterm":
            os.kill(s.pid, signal.SIGTERM)
        else:
            await s.write.aclose()
        await wait_for(s.exited.is_set, timeout=10, what="coffer serve to exit")
        await wait_for(lambda: not any(alive(p) for p in tree), timeout=6, what="every upstream process to be gone")
        assert s.stats.garbage_lines == 0  # coffer's stdout carried protocol only


async def test_hosts_of_both_eras(coffer_home: Path, tmp_path: Path) -> None:
    add_fixture(coffer_home, "alpha")
    params = StdioServerParameters(command=sys.executable, args=["-m", "coffer", "serve"], env=serve_env(coffer_home))
    for mode, era in (("auto", "2026-07-28"), ("legacy", "2025-11-25")):
        with open(tmp_path / f"{mode}.stderr", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode=mode, cache=None) as client:
                assert client.protocol_version == era
                names = [t.name for t in (await client.list_tools()).tools]
                assert {"coffer__search_tools", "coffer__ask", "alpha__echo"} <= set(names)
                result = await client.call_tool("alpha__echo", {"text": era})
                assert not result.is_error and result.content[0].text == era  # type: ignore[union-attr]
                found = await client.call_tool("coffer__search_tools", {"query": "echo the text"})
                assert found.structured_content and found.structured_content["tools"][0]["name"] == "alpha__echo"


def test_stray_output_never_reaches_the_wire(tmp_path: Path) -> None:
    """While serving, fd 1 points at stderr: a print() or a child's output cannot corrupt the protocol."""
    import subprocess

    script = (
        "import anyio, os, subprocess\n"
        "from coffer.gateway.stdio import _stdout\n"
        "async def main():\n"
        "    async with _stdout() as wire:\n"
        "        assert wire is not None\n"
        "        print('stray print', flush=True)\n"
        "        os.write(1, b'stray write\\n')\n"
        "        subprocess.run(['echo', 'stray child'])\n"
        '        await wire.line(\'{"jsonrpc": "2.0", "method": "ping", "id": 1}\')\n'
        "anyio.run(main)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == '{"jsonrpc": "2.0", "method": "ping", "id": 1}\n'
    assert "stray print" in done.stderr and "stray write" in done.stderr and "stray child" in done.stderr


def _raw_serve(home: Path) -> subprocess.Popen[bytes]:
    """`coffer serve` on pipes this test writes raw JSON-RPC bytes to."""
    cmd = [sys.executable, "-m", "coffer", "serve"]
    pipe = subprocess.PIPE
    return subprocess.Popen(cmd, stdin=pipe, stdout=pipe, stderr=subprocess.DEVNULL, env=serve_env(home))


def test_malformed_client_lines_get_json_rpc_errors_and_serving_goes_on(coffer_home: Path) -> None:
    """Raw JSON-RPC, since an SDK client never sends these: a non-JSON line gets -32700 and an object id
    -32600, both with id null, and the next request is answered as usual."""
    import json as _json

    lines = [
        "this is not json",
        '{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}',
        '{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        '"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}',
    ]
    proc = _raw_serve(coffer_home)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(("\n".join(lines) + "\n").encode())
    proc.stdin.flush()
    answers = [_json.loads(proc.stdout.readline()) for _ in range(3)]
    proc.stdin.close()
    proc.wait(30)
    assert answers[0]["id"] is None and answers[0]["error"]["code"] == -32700
    assert answers[1]["id"] is None and answers[1]["error"]["code"] == -32600
    assert answers[2]["id"] == 7 and answers[2]["result"]["serverInfo"]["name"] == "coffer"


def test_stdio_that_is_a_file_on_one_side_still_serves(coffer_home: Path, tmp_path: Path) -> None:
    """`coffer serve < requests.txt | ...` and `... | coffer serve > out.txt`: one side is not a pipe, so the
    SDK's transport serves it, on Coffer's pipe for the other side (fd 1 is diverted while serving)."""
    requests = tmp_path / "requests.jsonl"
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    requests.write_text("".join(json.dumps(m) + "\n" for m in lines))
    cmd = [sys.executable, "-m", "coffer", "serve"]
    env = serve_env(coffer_home)
    with requests.open("rb") as stdin:  # a file in, a pipe out
        done = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env, timeout=60)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2] and answers[0]["result"]["serverInfo"]["name"] == "coffer"
    out = tmp_path / "out.jsonl"
    with out.open("wb") as stdout:  # a pipe in, a file out
        subprocess.run(cmd, input=requests.read_bytes(), stdout=stdout, stderr=subprocess.DEVNULL, env=env, timeout=60)
    assert json.loads(out.read_text().splitlines()[0])["result"]["serverInfo"]["name"] == "coffer"


def test_large_calls_round_trip_and_an_over_limit_line_is_answered(coffer_home: Path) -> None:
    """Raw JSON-RPC: an 8 MB argument goes to the upstream and its 8 MB echo comes back whole (lines are
    split and written in pieces now); a line over the 64 MB limit gets -32700 and serving goes on."""
    import json as _json

    add_fixture(coffer_home, "up", timeout=60)
    with registry.edit(coffer_home / "coffer.toml") as doc:
        doc["settings"] = {"result_max_tokens": 0}  # the subject is framing: results pass whole, not kept
    proc = _raw_serve(coffer_home)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict) -> None:
        proc.stdin.write(_json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def answer() -> dict:
        while True:
            message = _json.loads(proc.stdout.readline())  # type: ignore[union-attr]
            if "id" in message:
                return message

    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert answer()["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        big = "".join(chr(0x61 + i % 26) for i in range(26 * 1024)) * 320  # 8.1 MB, not one repeated byte
        call = {"name": "up__echo", "arguments": {"text": big}}
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        echoed = answer()
        assert echoed["id"] == 2 and echoed["result"]["content"][0]["text"] == big
        proc.stdin.write(b'{"jsonrpc":"2.0","id":3,"method":"ping","pad":"' + b"x" * (65 * 1024 * 1024) + b'"}\n')
        proc.stdin.flush()
        refused = answer()
        assert refused["id"] is None and refused["error"]["code"] == -32700 and "64 MB" in refused["error"]["message"]
        send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
        assert answer() == {"jsonrpc": "2.0", "id": 4, "result": {}}
    finally:
        proc.stdin.close()
        proc.wait(30)


@pytest.mark.skipif(sys.platform != "linux", reason="the supervisor (subreaper, parent-death signal) is Linux-only")
@pytest.mark.one_mode("in-process")  # the engine's counterpart: tests/engine
@pytest.mark.parametrize("how", ["kill-9", "sigterm"])
async def test_every_process_of_an_upstream_dies_with_the_gateway(coffer_home: Path, tmp_path: Path, how: str) -> None:
    """A worker that escaped with setsid and ignores SIGTERM still ends when coffer serve is killed -9."""
    events = tmp_path / "events"
    add_fixture(coffer_home, "runaway", "escape", events=events)
    async with serve(coffer_home, args=("--standalone",)) as s:
        assert not (await s.call("runaway__pid")).is_error
        await wait_for(lambda: any(e.startswith("escapee:") for e in read_events(events)), 20, "the escapee")
        escapee = host_pid(next(e.split(":", 1)[1] for e in read_events(events) if e.startswith("escapee:")))
        assert alive(escapee)
        os.kill(s.pid, signal.SIGKILL if how == "kill-9" else signal.SIGTERM)
        await wait_for(s.exited.is_set, timeout=10, what="coffer serve to exit")
        await wait_for(lambda: not alive(escapee), timeout=10, what="the setsid escapee to be gone")


async def test_a_vault_edit_reaches_running_upstreams_at_once(coffer_home: Path, tmp_path: Path) -> None:
    """`coffer remove` and `coffer disable` stop what they affect while the gateway idles, not at its next
    request (a removed server kept running, 'ready' in `coffer status`, for minutes)."""
    from typer.testing import CliRunner

    from tests.conftest import run_cli

    add_fixture(coffer_home, "alpha", events=tmp_path / "alpha")
    add_fixture(coffer_home, "beta", events=tmp_path / "beta")
    async with serve(coffer_home) as s:
        alpha = host_pid(text(await s.call("alpha__pid")))
        beta = host_pid(text(await s.call("beta__pid")))
        assert alive(alpha) and alive(beta)
        await anyio.to_thread.run_sync(lambda: run_cli(CliRunner(), "remove", "alpha"))
        # bounded, not timed: the watcher looks twice a second, and the bug kept it for minutes
        await wait_for(lambda: not alive(alpha), timeout=20, what="the removed server to stop")
        await anyio.to_thread.run_sync(lambda: run_cli(CliRunner(), "disable", "beta"))
        await wait_for(lambda: not alive(beta), timeout=20, what="the disabled server to stop")


async def test_a_registry_that_does_not_parse_is_never_served_as_an_empty_vault(
    coffer_home: Path, tmp_path: Path, serve_mode: str
) -> None:
    """No last good registry to keep (no engine running, or in-process): `coffer serve` fails with the
    parse error and a non-zero exit. Through a running engine: it serves its last good registry, the new
    session is told so on stderr, and `coffer status` says so."""
    import subprocess

    from coffer.engine import control

    add_fixture(coffer_home, "alpha")
    good = (coffer_home / "coffer.toml").read_text()
    (coffer_home / "coffer.toml").write_text(good + "\n[servers.broken\n")
    done = subprocess.run(
        [sys.executable, "-m", "coffer", "serve"],
        env=serve_env(coffer_home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 5 and "coffer.toml" in done.stderr and "nothing is served" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    if serve_mode == "in-process":
        return
    (coffer_home / "coffer.toml").write_text(good)
    async with serve(coffer_home) as s:
        assert "alpha__echo" in await s.tool_names()
        (coffer_home / "coffer.toml").write_text(good + "\n[servers.broken\n")
        await wait_for(lambda: (control.status() or {}).get("registry_error") is not None, what="status to say")
        assert text(await s.call("alpha__echo", {"text": "still"})) == "still"  # the last good registry
        again = subprocess.run(
            [sys.executable, "-m", "coffer", "serve"],
            env=serve_env(coffer_home),
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "the running engine serves the last good registry" in again.stderr
