"""`coffer serve --http` beside the HTTP peers users compare it with: mcp-proxy and mcp-hub.

    python bench/bench_http_peers.py --install   # once: the peers into bench/.peers (not project deps)
    python bench/bench_http_peers.py [--rounds 6] [--calls 40] [--runs 5]

Every gateway fronts the same upstream, the test suite's fixture server (an mcp 2.x SDK low-level server
on stdio: `echo`, and `big` for a large result), and is reached on 127.0.0.1 by the same client, the MCP
SDK's, whose httpx connection is kept alive. Gateways: Coffer through its engine (the default), Coffer
`--standalone`, mcp-proxy (PyPI, in its own venv since it needs mcp<2), mcp-hub (npm; its /mcp endpoint
speaks the older HTTP+SSE transport, so the SDK's SSE client reaches it). Coffer's vault sets
`result_max_tokens = 0`: the big result is relayed whole, as the peers relay it (kept results are
measured in bench_big_call.py). The baseline is the fixture called directly over stdio in the same run.
Measured in `--runs` runs, each with fresh gateway processes (the same code differs by up to 0.15 ms
from one process to the next), in interleaved rounds so machine load weighs on all alike:
  - added latency: p50 of an echo call through the gateway minus p50 direct; and the same from the
    minimal client (bench/http_clients/minimal.py: one socket, HTTP and JSON by hand, the same code for
    every gateway and for the direct baseline), which leaves out what one SDK client transport costs
    more than another (mcp-hub is reached by the SDK's SSE client, the others by its streamable one);
  - calls/s with 200 concurrent calls on one client session, with 4 sessions x 50, and with 8 x 25;
  - the gateway's CPU time per call during those three loads (its processes, the upstream's left out): what
    the gateway itself costs, apart from the client, which shares the machine's cores with it; and the
    client's (this process's) CPU time per call in the same loads, which differs by transport;
  - a 0.9 MB result (a small call, 0.9 MB back; the SDK's SSE client takes no event over 1 MB):
    p50 added over direct;
  - echo p50 from Node's global fetch (bench/http_clients/fetch_client.mjs), a kept-alive client as
    Node hosts make one, for the streamable HTTP gateways (the SDK's client opens a new connection after
    every answer that came as an SSE stream; Coffer answers JSON when nothing comes before the answer,
    coffer.gateway.httpshape, as mcp-proxy always does).
Figures, never asserts. A peer that is not installed is skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "http_clients"))

import minimal  # noqa: E402

from coffer.manage import servers as manage  # noqa: E402
from coffer.upstreams.reaper import tree  # noqa: E402
from coffer.vault import registry  # noqa: E402

UPSTREAM = [str(ROOT / "tests" / "fixtures" / "upstream_fixture.py"), "--mode", "big", "--name", "demo"]
PEERS = ROOT / "bench" / ".peers"
KEEPALIVE_S = 2.0
MB = {"kb": 900}  # under 1 MB a message: the SDK's SSE client (mcp-hub) takes no bigger event


def install(peers: Path) -> None:
    """mcp-proxy in its own venv (it needs mcp<2), mcp-hub in its own npm prefix."""
    peers.mkdir(parents=True, exist_ok=True)
    venv = peers / "proxy"
    if not (venv / "bin" / "mcp-proxy").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "mcp-proxy"], check=True)
    if not (peers / "hub" / "node_modules" / ".bin" / "mcp-hub").exists():
        subprocess.run(["npm", "install", "--silent", "--prefix", str(peers / "hub"), "mcp-hub"], check=True)
    print(f"peers installed under {peers}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def listening(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            await anyio.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


class Gateway:
    """One HTTP gateway process over the demo server."""

    def __init__(
        self, name: str, argv: list[str], port: int, tool: str, env: dict[str, str], sse: bool = False
    ) -> None:
        self.name, self.argv, self.port, self.tool, self.env, self.sse = name, argv, port, tool, env, sse
        self.proc: subprocess.Popen[bytes] | None = None

    async def __aenter__(self) -> Gateway:
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        await listening(self.port)
        return self

    def pids(self) -> list[int]:
        """The gateway's own processes' roots: its command, and for Coffer's engine mode the engine too."""
        assert self.proc is not None
        roots = [self.proc.pid]
        if self.name == OURS:
            argv = [sys.executable, "-m", "coffer", "status", "--json"]
            out = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60).stdout
            roots.append(int(json.loads(out)["engine"]["engine"]["pid"]))
        return roots

    async def __aexit__(self, *exc: Any) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.name == OURS:  # its engine now, not after its idle time: the next run starts on a quiet machine
            argv = [sys.executable, "-m", "coffer", "status", "--stop"]
            subprocess.run(argv, env=self.env, capture_output=True, timeout=60, check=False)

    @asynccontextmanager
    async def _streams(self) -> AsyncIterator[tuple[Any, Any]]:
        url = f"http://127.0.0.1:{self.port}/mcp"
        if self.sse:
            async with sse_client(url, timeout=60, httpx_client_factory=http_client) as (read, write):
                yield read, write
            return
        async with (
            http_client(timeout=httpx2.Timeout(60)) as http,
            streamable_http_client(url, http_client=http, max_sse_event_size=None) as (read, write),
        ):
            yield read, write

    @asynccontextmanager
    async def session(self) -> AsyncIterator[ClientSession]:
        async with self._streams() as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            names = [t.name for t in (await s.list_tools()).tools]
            deadline = time.monotonic() + 30
            while self.tool not in names and time.monotonic() < deadline:  # mcp-hub lists once its server is up
                await anyio.sleep(0.2)
                names = [t.name for t in (await s.list_tools()).tools]
            yield s


def http_client(
    headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
) -> httpx2.AsyncClient:
    """The SDK client's httpx client, dropping a connection idle `KEEPALIVE_S`: mcp-proxy's and
    mcp-hub's servers close one idle 5 s, httpx's own expiry is that same 5 s, and a call sent on a
    connection as the server closes it ends the SDK's session (ReadError) - a gateway idle for about
    5 s while the others are measured met it now and then."""
    limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=KEEPALIVE_S)
    return httpx2.AsyncClient(headers=headers, timeout=timeout or httpx2.Timeout(60), auth=auth, limits=limits)


def coffer_vault() -> tuple[Path, dict[str, str]]:
    home = Path(tempfile.mkdtemp(prefix="coffer-bench-peers-"))
    old = os.environ.get("COFFER_HOME")
    os.environ["COFFER_HOME"] = str(home)
    try:
        manage.add_server(registry.ServerConfig(name="demo", command=sys.executable, args=UPSTREAM))
        with registry.edit() as doc:
            doc["settings"] = {"result_max_tokens": 0}  # relay the 1 MB whole, as the peers do
    finally:
        if old is None:
            del os.environ["COFFER_HOME"]
        else:
            os.environ["COFFER_HOME"] = old
    env = dict(os.environ, COFFER_HOME=str(home), COFFER_ENGINE_IDLE="5")
    return home, env


def gateways(peers: Path) -> list[Gateway]:
    home, env = coffer_vault()
    coffer = [sys.executable, "-m", "coffer", "serve", "--no-auth", "--http"]
    out = []
    port = free_port()
    out.append(Gateway(OURS, [*coffer, str(port)], port, "demo__echo", env))
    port = free_port()
    out.append(Gateway("coffer --standalone", [*coffer, str(port), "--standalone"], port, "demo__echo", env))
    proxy = peers / "proxy" / "bin" / "mcp-proxy"
    if proxy.exists():
        port = free_port()
        argv = [str(proxy), "--port", str(port), "--host", "127.0.0.1", "--", sys.executable, *UPSTREAM]
        out.append(Gateway("mcp-proxy", argv, port, "echo", dict(os.environ)))
    else:
        print(f"mcp-proxy: not installed under {peers} (--install): skipped")
    hub = peers / "hub" / "node_modules" / ".bin" / "mcp-hub"
    if hub.exists() and shutil.which("node"):
        port = free_port()
        config = home / "mcp-hub.json"
        config.write_text(json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": UPSTREAM}}}))
        hub_env = dict(os.environ, XDG_STATE_HOME=str(home / "state"), XDG_CONFIG_HOME=str(home / "config"))
        argv = [str(hub), "--port", str(port), "--config", str(config)]
        out.append(Gateway("mcp-hub", argv, port, "demo__echo", hub_env, sse=True))
    else:
        print(f"mcp-hub: not installed under {peers} (--install), or no node: skipped")
    return out


async def timed(s: ClientSession, tool: str, args: dict[str, Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = await s.call_tool(tool, args)
        out.append((time.perf_counter() - t0) * 1000.0)
        assert not result.is_error, result
    return out


async def bare_timed(client: minimal.Client, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await client.call()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


async def rate(sessions: list[ClientSession], tool: str, per_session: int) -> float:
    async def burst(s: ClientSession) -> None:
        async with anyio.create_task_group() as tg:
            for i in range(per_session):
                tg.start_soon(s.call_tool, tool, {"text": f"c{i}"})

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for s in sessions:
            tg.start_soon(burst, s)
    return len(sessions) * per_session / (time.perf_counter() - t0)


def cpu_seconds(roots: list[int]) -> float:
    """User and system CPU seconds of `roots` and their descendants, the upstream fixture's left out."""
    total = 0
    for pid in {p for root in roots for p in (root, *tree(root))}:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(arg.endswith(b"upstream_fixture.py") for arg in argv[:2]):  # the upstream itself
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def fetch_p50(gw: Gateway, calls: int) -> float | None:
    """p50 ms of `calls` echo calls from Node's fetch (None without node or for an SSE-only gateway)."""
    node = shutil.which("node")
    if node is None or gw.sse:
        return None
    script = ROOT / "bench" / "http_clients" / "fetch_client.mjs"
    url = f"http://127.0.0.1:{gw.port}/mcp"
    out = subprocess.run([node, str(script), url, gw.tool, str(calls)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return None
    return float(statistics.median(json.loads(out.stdout)["ms"]))


async def open_sessions(stack: AsyncExitStack, gw: Gateway, n: int) -> list[ClientSession] | None:
    """`n` client sessions on `gw`, each given three tries (mcp-hub answers an SSE connect with 500 now
    and then); None, said, when one cannot be opened: that gateway is left out of the run."""
    sessions = []
    for _ in range(n):
        for attempt in range(3):
            try:
                sessions.append(await stack.enter_async_context(gw.session()))
                break
            except Exception as exc:  # an ExceptionGroup from the client's task group, an HTTP error
                if attempt == 2:
                    print(f"{gw.name}: could not open a session ({type(exc).__name__}): left out of this run")
                    return None
                await anyio.sleep(0.5)
    return sessions


Figures = dict[str, dict[str, float]]  # gateway -> figure -> value (a figure a gateway lacks is absent)
COLUMNS = (
    *("added p50", "added p95", "minimal added", "0.9 MB added", "200 conc/s", "4x50 /s", "8x25 /s", "fetch p50"),
    *("CPU/call", "client CPU"),
)
LOWER_IS_BETTER = {"added p50", "added p95", "minimal added", "0.9 MB added", "fetch p50", "CPU/call", "client CPU"}
# the speed line, and CPU
COMPARED = ("added p50", "minimal added", "200 conc/s", "4x50 /s", "8x25 /s", "CPU/call")
OURS = "coffer (engine)"


async def one_run(args: argparse.Namespace, n: int) -> Figures:
    """Run `n`: fresh gateway processes, measured in interleaved rounds; its table is printed before
    they close, so an error on the way out loses no figures."""
    gws = gateways(args.peers)
    lat: dict[str, list[float]] = {"direct": []}
    big: dict[str, list[float]] = {"direct": []}
    one: dict[str, list[float]] = {}
    many: dict[str, list[float]] = {}
    eight: dict[str, list[float]] = {}
    fetched: dict[str, list[float]] = {}
    cost: dict[str, list[float]] = {}
    client_cost: dict[str, list[float]] = {}
    bare: dict[str, list[float]] = {"direct": []}
    params = StdioServerParameters(command=sys.executable, args=UPSTREAM)
    async with AsyncExitStack() as stack:
        errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115 (closed by the stack)
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        direct = await stack.enter_async_context(ClientSession(read, write))
        await direct.initialize()
        opened: list[tuple[Gateway, list[ClientSession]]] = []
        roots: dict[str, list[int]] = {}
        for gw in gws:
            await stack.enter_async_context(gw)
            sessions = await open_sessions(stack, gw, 8)
            if sessions is None:
                continue
            opened.append((gw, sessions))
            roots[gw.name] = gw.pids()
            for s in sessions:  # warm: every upstream started, every connection open
                await s.call_tool(gw.tool, {"text": "warm"})
        minimals = {"direct": await minimal.stdio([sys.executable, *UPSTREAM], "echo")}
        for gw, _ in opened:
            minimals[gw.name] = await (minimal.sse if gw.sse else minimal.streamable)(gw.port, gw.tool)
        for client in minimals.values():
            stack.push_async_callback(client.aclose)
            await bare_timed(client, args.calls)  # warm
        for r in range(args.rounds):
            order = opened if r % 2 == 0 else opened[::-1]
            await timed(direct, "echo", {"text": "hi"}, 3)
            lat["direct"] += await timed(direct, "echo", {"text": "hi"}, args.calls)
            big["direct"] += await timed(direct, "big", MB, 3)
            await bare_timed(minimals["direct"], 3)
            bare["direct"] += await bare_timed(minimals["direct"], args.calls)
            for gw, sessions in order:
                s = sessions[0]
                tool = gw.tool
                await timed(s, tool, {"text": "hi"}, 3)  # not timed: the first calls after another's turn
                lat.setdefault(gw.name, []).extend(await timed(s, tool, {"text": "hi"}, args.calls))
                await bare_timed(minimals[gw.name], 3)
                bare.setdefault(gw.name, []).extend(await bare_timed(minimals[gw.name], args.calls))
                big.setdefault(gw.name, []).extend(await timed(s, tool.replace("echo", "big"), MB, 3))
                cpu, mine = cpu_seconds(roots[gw.name]), time.process_time()
                one.setdefault(gw.name, []).append(await rate([s], tool, 200))
                many.setdefault(gw.name, []).append(await rate(sessions[:4], tool, 50))
                eight.setdefault(gw.name, []).append(await rate(sessions, tool, 25))
                cost.setdefault(gw.name, []).append((cpu_seconds(roots[gw.name]) - cpu) * 1000 / 600)
                client_cost.setdefault(gw.name, []).append((time.process_time() - mine) * 1000 / 600)
                got = await anyio.to_thread.run_sync(fetch_p50, gw, args.calls * 2)
                if got is not None:
                    fetched.setdefault(gw.name, []).append(got)
        base, base_big = statistics.median(lat["direct"]), statistics.median(big["direct"])
        p95_base = statistics.quantiles(lat["direct"], n=20)[18]
        figures: Figures = {}
        for gw, _ in opened:
            name = gw.name
            row = figures[name] = {
                "added p50": statistics.median(lat[name]) - base,
                "added p95": statistics.quantiles(lat[name], n=20)[18] - p95_base,
                "minimal added": statistics.median(bare[name]) - statistics.median(bare["direct"]),
                "0.9 MB added": statistics.median(big[name]) - base_big,
                "200 conc/s": statistics.median(one[name]),
                "4x50 /s": statistics.median(many[name]),
                "8x25 /s": statistics.median(eight[name]),
                "CPU/call": statistics.median(cost[name]),
                "client CPU": statistics.median(client_cost[name]),
            }
            if fetched.get(name):
                row["fetch p50"] = statistics.median(fetched[name])
        print(f"\nrun {n} of {args.runs}: direct stdio echo p50 {base:.2f} ms, 0.9 MB result p50 {base_big:.1f} ms")
        table(figures)
        return figures


async def main(args: argparse.Namespace) -> None:
    """`--runs` runs, each with fresh gateway processes: one process's figures differ from the next
    one's of the same code by up to 0.15 ms (its memory layout, where the scheduler puts it), more than
    the gaps measured here, so a ranking is only told by how it holds over runs."""
    runs: list[Figures] = []
    for n in range(args.runs):
        runs.append(await one_run(args, n + 1))
    if args.runs > 1:
        print(f"\nmedian of {args.runs} runs ({args.rounds} rounds x {args.calls} calls each)")
        names = list(dict.fromkeys(name for figures in runs for name in figures))
        table({name: _medians([f[name] for f in runs if name in f]) for name in names})
        ahead(runs)


def _medians(rows: list[dict[str, float]]) -> dict[str, float]:
    return {col: statistics.median(r[col] for r in rows if col in r) for col in COLUMNS if any(col in r for r in rows)}


def table(figures: Figures) -> None:
    print(f"{'gateway':22}" + "".join(f" {col:>12}" for col in COLUMNS))
    for name, row in figures.items():
        cells = []
        for col in COLUMNS:
            value = row.get(col)
            if value is None:
                cells.append(f" {'-':>12}")
            elif col.endswith("/s"):
                cells.append(f" {value:12.0f}")
            else:
                cells.append(f" {value:10.2f}ms")
        print(f"{name:22}" + "".join(cells))


def ahead(runs: list[Figures]) -> None:
    """In how many runs Coffer (engine) did better than each peer, figure by figure."""
    peers = list(dict.fromkeys(name for figures in runs for name in figures if name != OURS))
    for peer in peers:
        both = [f for f in runs if OURS in f and peer in f]
        if not both:
            continue
        counts = []
        for col in COMPARED:
            better = sum(
                (f[OURS][col] < f[peer][col]) if col in LOWER_IS_BETTER else (f[OURS][col] > f[peer][col]) for f in both
            )
            counts.append(f"{col} {better}/{len(both)}")
        print(f"{OURS} did better than {peer} in: " + ", ".join(counts))


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--install", action="store_true", help="install the peers into --peers and exit")
    parser.add_argument("--peers", type=Path, default=PEERS)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5, help="runs, each with fresh gateway processes")
    ns = parser.parse_args()
    if ns.install:
        install(ns.peers)
    else:
        try:
            anyio.run(main, ns)
        except BaseException as exc:  # one line per error, not a ten-deep exception group
            for leaf in leaves(exc):
                print(f"bench stopped: {type(leaf).__name__}: {leaf}", file=sys.stderr)
            sys.exit(1)
