"""Gateway benchmarks; prints figures, asserts nothing (speed targets live here, not in tests).

  python bench/bench_gateway.py              # added latency per tools/call + first tools/list with 16 upstreams
  python bench/bench_gateway.py --starts     # time to first/all ready for N upstreams at several start bounds
  python bench/bench_gateway.py --http       # tools/call through `coffer serve` on stdio vs `--http`, side by side

Upstreams are the bundled example server (coffer/examples/demo_server.py, an mcp 2.x SDK server), so
the figures include real SDK parsing on both hops. Each scenario uses its own temporary COFFER_HOME.
Latency is measured in pairs (one direct call, then one through coffer, alternating, both sessions
open), so load from other processes on a shared machine weighs on both sides alike; the added
latency is the median of the per-pair differences. It is measured with the one demo server alone,
and with the 222 real tools of 16 more servers (tests/data/real-servers.json) registered and
catalogued beside it, as in a real vault (those servers are never started: their command fails),
back to back and paced (`--pause-ms` between pairs, as an agent's calls are: the invocation log has
committed the last row before the next call arrives).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coffer.gateway.pool import Pool  # noqa: E402
from coffer.manage import servers as manage  # noqa: E402
from coffer.manage.demo import demo_server_path  # noqa: E402
from coffer.vault import catalogue, registry  # noqa: E402

DEMO = str(demo_server_path())
REAL = ROOT / "tests" / "data" / "real-servers.json"


@asynccontextmanager
async def session(command: str, args: list[str], env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command, args=args, env=env)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s


async def vault(n: int, real: bool = False) -> Path:
    """A temporary vault with `n` demo servers registered (approved) and catalogued in the snapshot.

    `real`: also the 16 servers of tests/data/real-servers.json, catalogued, with a failing command.
    """
    home = Path(tempfile.mkdtemp(prefix="coffer-bench-"))
    tools = await _list_direct()
    old = os.environ.get("COFFER_HOME")
    os.environ["COFFER_HOME"] = str(home)
    try:
        for i in range(n):
            manage.add_server(registry.ServerConfig(name=f"demo{i}", command=sys.executable, args=[DEMO]))
        for i in range(n):
            catalogue.save_server(f"demo{i}", tools=tools)
        if real:
            by_server: dict[str, list[dict[str, Any]]] = {}
            for tool in json.loads(REAL.read_text()):
                by_server.setdefault(tool.pop("server"), []).append(tool)
            for name, listed in by_server.items():
                cfg = registry.ServerConfig(name=name, command=sys.executable, args=["-c", "raise SystemExit(1)"])
                manage.add_server(cfg)
                catalogue.save_server(name, tools=listed)
    finally:
        if old is None:
            del os.environ["COFFER_HOME"]
        else:
            os.environ["COFFER_HOME"] = old
    return home


async def _list_direct() -> list[dict[str, Any]]:
    async with session(sys.executable, [DEMO]) as s:
        return [t.model_dump(by_alias=True, exclude_none=True) for t in (await s.list_tools()).tools]


def gateway_env(home: Path) -> dict[str, str]:
    # an engine a gateway started ends with its last session, not 10 minutes after the bench
    return dict(os.environ) | {"COFFER_HOME": str(home), "PYTHONPATH": str(ROOT), "COFFER_ENGINE_IDLE": "0"}


async def timed_call(s: ClientSession, tool: str, i: int) -> float:
    t0 = time.perf_counter()
    result = await s.call_tool(tool, {"text": f"call {i}"})
    elapsed = (time.perf_counter() - t0) * 1000
    assert not result.is_error, result
    return elapsed


def summary(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(0.95 * (len(values) - 1))]
    return f"median {statistics.median(values):.3f} ms, p95 {p95:.3f} ms"


async def bench_latency(n: int, real: bool, pause_s: float = 0.0) -> None:
    home = await vault(1, real)
    d, g = [], []
    async with (
        session(sys.executable, [DEMO]) as direct,
        session(sys.executable, ["-m", "coffer", "serve", "--standalone"], gateway_env(home)) as gw,
    ):
        for i in range(20):  # warm-up: upstream started, code paths hot
            await timed_call(direct, "echo", i)
            await timed_call(gw, "demo0__echo", i)
        for i in range(n):
            d.append(await timed_call(direct, "echo", i))
            g.append(await timed_call(gw, "demo0__echo", i))
            await anyio.sleep(pause_s)
    beside = " + 222 catalogued tools of 16 more servers" if real else ""
    paced = f", {pause_s * 1000:g} ms apart" if pause_s else ""
    print(f"tools/call, {n} pairs after warm-up{paced} (echo on the bundled demo server{beside}):")
    print(f"  direct session : {summary(d)}")
    print(f"  through coffer : {summary(g)}")
    added = [b - a for a, b in zip(d, g, strict=True)]
    print(f"  added          : {summary(added)} (per-pair difference)")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def http_session(argv: list[str], port: int, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """A server started as `argv` that listens on 127.0.0.1:`port`/mcp, and a streamable HTTP session to it."""
    import socket
    import subprocess

    from mcp.client.streamable_http import streamable_http_client

    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await anyio.sleep(0.05)
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            yield s
    finally:
        proc.terminate()
        proc.wait(10)


async def bench_http(n: int) -> None:
    """The same echo four ways in one run, calls interleaved: the demo server directly on stdio and on
    HTTP, and through `coffer serve` on stdio and on `--http` (the upstream on stdio in both)."""
    home = await vault(1, True)
    port, gw_port = _free_port(), _free_port()
    direct_http_argv = [
        sys.executable,
        "-c",
        f"import runpy; ns = runpy.run_path({DEMO!r}); ns['mcp'].run('streamable-http', port={port})",
    ]
    gw_http_argv = [sys.executable, "-m", "coffer", "serve", "--http", str(gw_port), "--no-auth"]
    runs: dict[str, list[float]] = {"ds": [], "dh": [], "gs": [], "gh": []}
    async with (
        session(sys.executable, [DEMO]) as ds,
        http_session(direct_http_argv, port) as dh,
        session(sys.executable, ["-m", "coffer", "serve", "--standalone"], gateway_env(home)) as gs,
        http_session(gw_http_argv, gw_port, gateway_env(home)) as gh,
    ):
        pairs = [("ds", ds, "echo"), ("dh", dh, "echo"), ("gs", gs, "demo0__echo"), ("gh", gh, "demo0__echo")]
        for i in range(20):
            for _, s, tool in pairs:
                await timed_call(s, tool, i)
        for i in range(n):
            for key, s, tool in pairs:
                runs[key].append(await timed_call(s, tool, i))

    def added(a: str, b: str) -> str:
        return summary([y - x for x, y in zip(runs[a], runs[b], strict=True)])

    print(f"tools/call, {n} rounds after warm-up (demo echo + 222 catalogued tools), stdio vs HTTP:")
    print(f"  direct, stdio        : {summary(runs['ds'])}")
    print(f"  direct, HTTP         : {summary(runs['dh'])}")
    print(f"  coffer serve         : {summary(runs['gs'])}")
    print(f"  coffer serve --http  : {summary(runs['gh'])}")
    print(f"  added on stdio       : {added('ds', 'gs')}  (coffer serve minus direct stdio)")
    print(f"  added on HTTP        : {added('dh', 'gh')}  (coffer serve --http minus direct HTTP)")
    print(f"  HTTP vs stdio added  : {added('ds', 'dh')} direct, {added('gs', 'gh')} through coffer")


async def bench_first_list(servers: int, runs: int) -> None:
    home = await vault(servers)
    init, first = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        async with session(sys.executable, ["-m", "coffer", "serve", "--standalone"], gateway_env(home)) as gw:
            t1 = time.perf_counter()
            listed = await gw.list_tools()
            t2 = time.perf_counter()
        init.append(t1 - t0)
        first.append(t2 - t0)
        built_in = sum(1 for t in listed.tools if t.name.startswith("coffer__"))  # as many as are on
        assert built_in >= 2 and len(listed.tools) - built_in == servers * 5, len(listed.tools)
    print(f"first tools/list with {servers} upstreams from the snapshot ({runs} runs, from spawning coffer serve):")
    print(f"  initialize answered : median {statistics.median(init):.3f} s")
    print(f"  tools/list answered : median {statistics.median(first):.3f} s ({len(listed.tools)} tools)")


async def bench_starts(n: int, bounds: list[int]) -> None:
    print(f"starting {n} SDK upstreams (spawn + initialize + list), by start bound:")
    for bound in bounds:
        cfgs = [registry.ServerConfig(name=f"s{i}", command=sys.executable, args=[DEMO], timeout=120) for i in range(n)]
        ready: list[float] = []
        async with Pool(limit=bound, slot_hold=120) as pool:
            t0 = anyio.current_time()
            pool.sync(cfgs)

            async with anyio.create_task_group() as tg:
                for up in pool.upstreams.values():
                    tg.start_soon(_ready_after, up, t0, ready)
            states = {up.state.value for up in pool.upstreams.values()}
        label = "all at once" if bound >= n else f"{bound} at a time"
        print(f"  {label:>12}: first ready {min(ready):.2f} s, all ready {max(ready):.2f} s  {sorted(states)}")


async def _ready_after(up: Any, t0: float, ready: list[float]) -> None:
    await up.wait_settled(180)
    ready.append(anyio.current_time() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--pause-ms", type=float, default=20.0, help="between pairs in the paced run")
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--starts", action="store_true", help="measure the start bound instead")
    parser.add_argument("--start-servers", type=int, default=8)
    parser.add_argument("--http", action="store_true", help="only the stdio vs HTTP comparison")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    if args.http:
        anyio.run(bench_http, args.calls)
        return
    if args.starts:
        n = args.start_servers
        anyio.run(bench_starts, n, sorted({1, 2, 4, n}))
        return
    anyio.run(bench_latency, args.calls, False)
    anyio.run(bench_latency, args.calls, True)
    anyio.run(bench_latency, args.calls, True, args.pause_ms / 1000)
    anyio.run(bench_http, args.calls)
    anyio.run(bench_first_list, args.servers, args.runs)


if __name__ == "__main__":
    main()
