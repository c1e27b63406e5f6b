"""A team on one gateway: M members × S sessions each calling a tool through `coffer serve --http --team`,
against the same load through today's one-token `coffer serve --http`, in one run.

Each session is the MCP SDK's streamable HTTP client with its member's access token (from the real
OpenID provider the tests use, tests/fixtures/oidc_idp.mjs, with --members M); the tool is the bundled
demo server's echo. Sessions run concurrently, each making C calls one after another. Printed: calls/s
and the per-call p50/p95 of both gateways, and what the team gateway adds. Without node or
oidc-provider in .ci/node the bench says so and exits 0.

  python bench/bench_team_load.py [--members 50] [--sessions 4] [--calls 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_gateway import _free_port, gateway_env, vault  # noqa: E402

from tests.fixtures.idp import available, start_idp  # noqa: E402


async def load(port: int, tokens: list[str], sessions: int, calls: int) -> tuple[list[float], float]:
    """Every token's `sessions` sessions at once, each `calls` calls; (per-call ms, seconds in all)."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    times: list[float] = []

    async def one(token: str) -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for i in range(calls):
                t0 = time.perf_counter()
                result = await session.call_tool("demo0__echo", {"text": f"call {i}"})
                times.append((time.perf_counter() - t0) * 1000)
                assert not result.is_error, result

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for token in tokens:
            for _ in range(sessions):
                tg.start_soon(one, token)
    return times, time.perf_counter() - t0


def started(argv: list[str], port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    import socket

    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{argv[:6]} did not listen on {port}")


def line(label: str, times: list[float], seconds: float) -> str:
    ordered = sorted(times)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    rate = len(times) / seconds
    p50 = statistics.median(times)
    return f"{label:32s} {len(times):6d} calls  {rate:8.1f} calls/s  p50 {p50:7.2f} ms  p95 {p95:7.2f} ms"


async def main_async(members: int, sessions: int, calls: int) -> None:
    home = await vault(1)
    env = gateway_env(home) | {"COFFER_STANDALONE": "1", "COFFER_REGISTRY_REFRESH": "off"}
    idp_port, team_port, token_port = _free_port(), _free_port(), _free_port()
    resource = f"http://127.0.0.1:{team_port}/mcp"
    idp = start_idp(idp_port, resource, "load", members=members)  # bounded: a provider that never listens fails
    procs: list[subprocess.Popen[Any]] = [idp.proc]
    try:
        issuer = idp.url
        vault_file = home / "coffer.toml"
        team = (
            f'[team]\nissuer = "{issuer}"\nresource = "{resource}"\nscopes = ["mcp:tools"]\nmembers = ["group:eng"]\n\n'
        )
        vault_file.write_text(team + vault_file.read_text())
        tokens = [idp.token(f"member-{i + 1}", resource) for i in range(members)]
        static = subprocess.run(
            [sys.executable, "-m", "coffer", "serve", "--print-token"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        procs.append(
            started([sys.executable, "-m", "coffer", "serve", "--http", str(team_port), "--team"], team_port, env)
        )
        procs.append(started([sys.executable, "-m", "coffer", "serve", "--http", str(token_port)], token_port, env))
        await load(token_port, [static], 1, 5)  # warm both: upstream started, indexes loaded
        await load(team_port, tokens[:1], 1, 5)
        n = members * sessions
        print(f"{members} members x {sessions} sessions = {n} concurrent sessions, {calls} echo calls each")
        one_times, one_s = await load(token_port, [static] * members, sessions, calls)
        team_times, team_s = await load(team_port, tokens, sessions, calls)
        print(line("serve --http (one token)", one_times, one_s))
        print(line("serve --http --team (members)", team_times, team_s))
        added = statistics.median(team_times) - statistics.median(one_times)
        print(f"the team gateway adds {added:+.2f} ms at p50 ({(one_s / team_s):.2f}x the one-token throughput)")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    if not available():
        print("bench_team_load: needs node and oidc-provider in .ci/node (.ci/run installs them); nothing measured")
        return 0
    anyio.run(main_async, args.members, args.sessions, args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
