"""`coffer serve --http` as hosts call it: kept-alive clients, beside the MCP SDK's client, in one run.

  python bench/bench_http_clients.py                # 300 echo calls per client
  python bench/bench_http_clients.py --calls 1000

Three clients call the same echo tool over one kept-alive connection each:
  - the MCP SDK's streamable HTTP client (httpx),
  - a raw keep-alive Python client (`http.client`, one connection, as a minimal host would),
  - Node's global `fetch` (undici, as Node-based hosts use it): bench/http_clients/fetch_client.mjs.
They run in alternating blocks (SDK, raw, Node, then again), so load from other processes weighs on
all alike, against `coffer serve --http` and, for reference, the bundled demo server served over HTTP
by the SDK itself (uvicorn's own listener). The figure the keep-alive fix is judged by is the ratio
of Node's p50 to the SDK client's p50 through `coffer serve --http` (at most 1.5x). Prints figures,
asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_gateway import DEMO, _free_port, gateway_env, http_session, timed_call, vault  # noqa: E402

FETCH_CLIENT = HERE / "http_clients" / "fetch_client.mjs"
BLOCKS = 5
WARM_UP = 20


class RawClient:
    """MCP over one kept-alive `http.client` connection: initialize, then tools/call, reading the whole body."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.session: str | None = None
        self.id = 0

    def post(self, body: dict[str, object]) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            headers |= {"Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"}
        self.conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
        response = self.conn.getresponse()
        data = response.read()
        self.session = response.getheader("mcp-session-id") or self.session
        if response.status >= 400:
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
        return data

    def initialize(self) -> None:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench-raw"}}
        self.request("initialize", params)
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method: str, params: dict[str, object]) -> bytes:
        self.id += 1
        return self.post({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})

    def timed_call(self, tool: str, i: int) -> float:
        t0 = time.perf_counter()
        data = self.request("tools/call", {"name": tool, "arguments": {"text": f"call {i}"}})
        elapsed = (time.perf_counter() - t0) * 1000
        assert f"call {i}".encode() in data, data[:200]
        return elapsed


def node_block(port: int, tool: str, calls: int) -> list[float]:
    """One Node process, one kept-alive connection: initialize, `calls` calls; the first WARM_UP dropped."""
    argv = ["node", str(FETCH_CLIENT), f"http://127.0.0.1:{port}/mcp", tool, str(calls + WARM_UP)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300).stdout
    return [float(x) for x in json.loads(out)["ms"][WARM_UP:]]


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    return f"p50 {statistics.median(ordered):7.3f} ms, p95 {ordered[int(0.95 * (len(ordered) - 1))]:7.3f} ms"


async def measure(label: str, argv: list[str], port: int, tool: str, n: int, env: dict[str, str] | None) -> None:
    per_block = max(1, n // BLOCKS)
    runs: dict[str, list[float]] = {"sdk": [], "raw": [], "node": []}
    async with http_session(argv, port, env) as sdk:
        raw = RawClient(port)
        raw.initialize()
        for i in range(WARM_UP):
            await timed_call(sdk, tool, i)
            raw.timed_call(tool, i)
        for block in range(BLOCKS):
            for i in range(per_block):
                runs["sdk"].append(await timed_call(sdk, tool, block * per_block + i))
            for i in range(per_block):
                runs["raw"].append(raw.timed_call(tool, block * per_block + i))
            if shutil.which("node"):
                runs["node"] += await anyio.to_thread.run_sync(node_block, port, tool, per_block)
        raw.conn.close()
    sdk_p50 = statistics.median(runs["sdk"])
    print(f"{label} ({BLOCKS} alternating blocks of {per_block} calls per client, after {WARM_UP} warm-up calls):")
    print(f"  MCP SDK client (httpx)        : {summary(runs['sdk'])}")
    raw_ratio = statistics.median(runs["raw"]) / sdk_p50
    print(f"  raw keep-alive (http.client)  : {summary(runs['raw'])}  ({raw_ratio:.2f}x SDK)")
    if runs["node"]:
        ratio = statistics.median(runs["node"]) / sdk_p50
        print(f"  Node fetch (undici keep-alive): {summary(runs['node'])}  ({ratio:.2f}x SDK)")
    else:
        print("  Node fetch                    : skipped (no `node` on PATH)")


async def main_async(n: int) -> None:
    home = await vault(1, False)
    gw_port, direct_port = _free_port(), _free_port()
    gateway = [sys.executable, "-m", "coffer", "serve", "--http", str(gw_port), "--no-auth"]
    direct = [
        sys.executable,
        "-c",
        f"import runpy; ns = runpy.run_path({DEMO!r}); ns['mcp'].run('streamable-http', port={direct_port})",
    ]
    await measure(
        "coffer serve --http, echo on the bundled demo server", gateway, gw_port, "demo0__echo", n, gateway_env(home)
    )
    await measure(
        "the demo server over HTTP by the SDK alone (uvicorn's own listener)", direct, direct_port, "echo", n, None
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="measured calls per client (after warm-up)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, node {_node_version()}")
    anyio.run(main_async, args.calls)


def _node_version() -> str:
    if not shutil.which("node"):
        return "absent"
    return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
