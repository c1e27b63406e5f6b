"""Sessions × servers: `coffer serve` (through the engine) against `coffer serve --standalone`, in one run.

  python bench/bench_engine.py                      # 1 and 5 sessions over 16 servers
  python bench/bench_engine.py --sessions 1,5,10 --servers 16

Each scenario opens N agent sessions (SDK clients over stdio) on one vault of S servers, waits until
every session's tools/list holds every server's tools, then reads from /proc: the processes under
this bench (it is their child subreaper, so the engine, which detaches, is counted too) and their
total PSS (shared pages split between their users). Added latency: echo calls through one session,
engine vs standalone, alternating. The servers are the bundled demo server (an mcp 2.x SDK server),
so the figures hold for any set of upstreams of that size: the 16 real servers of the catalogue need
network and tokens. Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from coffer.engine.daemon import pss_kib  # noqa: E402
from coffer.gateway.reaper import tree  # noqa: E402
from coffer.manage import servers as manage  # noqa: E402
from coffer.manage.demo import demo_server_path  # noqa: E402
from coffer.vault import registry  # noqa: E402

DEMO = str(demo_server_path())


def vault(n: int) -> Path:
    home = Path(tempfile.mkdtemp(prefix="coffer-bench-engine-"))
    os.environ["COFFER_HOME"] = str(home)
    for i in range(n):
        manage.add_server(registry.ServerConfig(name=f"demo{i}", command=sys.executable, args=[DEMO]))
    return home


def pss_mib(pids: list[int]) -> float:
    return sum(pss_kib(pid) for pid in pids) / 1024


async def scenario(home: Path, sessions: int, servers: int, engine: bool) -> dict[str, float]:
    env = dict(os.environ) | {"COFFER_HOME": str(home), "PYTHONPATH": str(ROOT), "COFFER_ENGINE_IDLE": "0"}
    args = ["-m", "coffer", "serve", *([] if engine else ["--standalone"])]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    firsts: list[float] = []
    with open(os.devnull, "w") as errlog:
        async with AsyncExitStack() as stack:
            t0 = time.perf_counter()
            opened = []
            for _ in range(sessions):
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                opened.append(session)
            for session in opened:
                while True:  # complete: every server's tools listed
                    names = {t.name for t in (await session.list_tools()).tools}
                    if all(f"demo{i}__echo" in names for i in range(servers)):
                        break
                    await anyio.sleep(0.1)
                firsts.append(time.perf_counter() - t0)
            # settled: every upstream started (a supervisor and a server each, per gateway), then 1 s more
            gateways = 1 if engine else sessions
            expected = sessions + (1 if engine else 0) + gateways * servers * (2 if sys.platform == "linux" else 1)
            with anyio.move_on_after(300):
                while len(tree(os.getpid())) < expected:
                    await anyio.sleep(0.2)
            await anyio.sleep(1.0)
            pids = tree(os.getpid())
            latency = []
            for i in range(200):
                c0 = time.perf_counter()
                await opened[0].call_tool("demo0__echo", {"text": f"x{i}"})
                latency.append((time.perf_counter() - c0) * 1000)
            return {
                "processes": len(pids),
                "pss_mib": pss_mib(pids),
                "first_list_s": statistics.median(firsts),
                "last_list_s": max(firsts),
                "echo_p50_ms": statistics.median(latency),
            }


async def main_async(session_counts: list[int], servers: int) -> None:
    home = vault(servers)
    print(f"{servers} demo servers; sessions opened one after another; PSS over every process under the bench")
    head = ("sessions", "mode", "processes", "PSS MiB", "1st list s", "last list s", "echo p50 ms")
    print(f"{head[0]:>8}  {head[1]:<10} {head[2]:>9} {head[3]:>9} {head[4]:>10} {head[5]:>11} {head[6]:>11}")
    for n in session_counts:
        rows = {}
        for engine in (False, True):
            rows[engine] = row = await scenario(home, n, servers, engine)
            await anyio.sleep(2.0)  # the idle engine (COFFER_ENGINE_IDLE=0) and its upstreams are gone
            mode = "engine" if engine else "standalone"
            print(
                f"{n:>8}  {mode:<10} {row['processes']:>9} {row['pss_mib']:>9.0f} {row['first_list_s']:>10.2f} "
                f"{row['last_list_s']:>11.2f} {row['echo_p50_ms']:>11.3f}"
            )
        ratio_p = rows[True]["processes"] / rows[False]["processes"]
        ratio_m = rows[True]["pss_mib"] / rows[False]["pss_mib"]
        added = rows[True]["echo_p50_ms"] - rows[False]["echo_p50_ms"]
        print(f"{n:>8}  engine/standalone: processes {ratio_p:.2f}x, memory {ratio_m:.2f}x, echo p50 {added:+.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="1,5", help="comma-separated session counts")
    parser.add_argument("--servers", type=int, default=16)
    args = parser.parse_args()
    if sys.platform == "linux":  # the detached engine is re-parented to us, so it is counted
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    anyio.run(main_async, [int(x) for x in args.sessions.split(",")], args.servers)


if __name__ == "__main__":
    main()
