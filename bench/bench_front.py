"""What one agent session costs through the engine: the `coffer serve` front's start and memory, and the
engine's hop, against `coffer serve --standalone` in the same run.

  python bench/bench_front.py                  # 8 fronts, 1500 call pairs
  python bench/bench_front.py --fronts 8 --calls 3000 --runs 3

One vault (a temporary COFFER_HOME) with the test suite's fixture server (an mcp 2.x SDK low-level
server: `echo`). The engine is started once and kept warm, as a user's is after their first session.
  - front start: `coffer serve` (this interpreter's console script, as a host spawns it) is spawned
    and sent `initialize` at once; the time from spawn to its answer, over `--fronts` fronts opened
    one after another and all kept open;
  - front memory: each front's PSS (shared pages split between their users) with all of them open,
    and the engine's;
  - the hop: echo calls by the same minimal client (bench/http_clients/minimal.py: one JSON line each
    way) to the fixture directly, through a front to the engine, and through `--standalone`,
    rotated call by call so machine load weighs on all alike; added p50 = p50 through minus p50 direct.
Targets (issue #62): initialize <= 150 ms, PSS <= 15 MiB per front, the engine's hop <= 0.2 ms over
standalone. Figures, never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "http_clients"))

import minimal  # noqa: E402

UPSTREAM = [sys.executable, str(ROOT / "tests" / "fixtures" / "upstream_fixture.py"), "--name", "demo"]
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench-front", "version": "1"}}


def coffer_argv() -> list[str]:
    """`coffer` as a host runs it: the console script beside this interpreter (else `python -m coffer`)."""
    script = Path(sys.executable).parent / "coffer"
    return [str(script)] if script.exists() else [sys.executable, "-m", "coffer"]


def pss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith("Pss:")) / 1024


def engine_pid(home: str) -> int | None:
    """The engine serving `home` (it detaches, so it is found by its environment)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if b"coffer.engine.daemon" in cmd and f"COFFER_HOME={home}\0".encode() in env:
            return int(entry)
    return None


def open_front(argv: list[str]) -> tuple[subprocess.Popen[bytes], float]:
    """A front spawned and initialized; the seconds from spawn to its answer."""
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}).encode() + b"\n"
    t0 = time.perf_counter()
    proc = subprocess.Popen([*argv, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line)
    proc.stdin.flush()
    answer = proc.stdout.readline()
    took = time.perf_counter() - t0
    if b'"result"' not in answer:
        raise RuntimeError(f"the front did not answer initialize: {answer[:200]!r}")
    return proc, took


def fronts(argv: list[str], n: int, home: str) -> tuple[list[float], list[float], float]:
    """(start seconds, PSS MiB) of `n` fronts on a warm engine, and the engine's PSS with them open."""
    warm, _ = open_front(argv)  # starts the engine: not counted
    warm.stdin.close()  # type: ignore[union-attr]
    warm.wait()
    opened, starts = [], []
    for _ in range(n):
        proc, took = open_front(argv)
        opened.append(proc)
        starts.append(took)
    time.sleep(0.5)  # each front's handover settled
    pss = [pss_mib(p.pid) for p in opened]
    engine = engine_pid(home)
    engine_pss = pss_mib(engine) if engine else float("nan")
    for p in opened:
        p.stdin.close()  # type: ignore[union-attr]
        p.wait()
    return starts, pss, engine_pss


async def hop(argv: list[str], calls: int) -> dict[str, list[float]]:
    """Echo latency (ms) direct, through the engine and standalone, rotated call by call."""
    clients = {
        "direct": await minimal.stdio(UPSTREAM, "echo"),
        "engine": await minimal.stdio([*argv, "serve"], "demo__echo"),
        "standalone": await minimal.stdio([*argv, "serve", "--standalone"], "demo__echo"),
    }
    order = list(clients)
    times: dict[str, list[float]] = {name: [] for name in order}
    try:
        for _ in range(100):  # warm-up: the standalone gateway starts its upstream on the first call
            for client in clients.values():
                await client.call()
        for i in range(calls):
            for name in order[i % 3 :] + order[: i % 3]:
                t0 = time.perf_counter()
                await clients[name].call()
                times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        for client in clients.values():
            await client.aclose()
        await asyncio.sleep(0.5)  # the killed processes reaped while the loop runs
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fronts", type=int, default=8)
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    argv = coffer_argv()
    print(f"coffer: {' '.join(argv)}")
    for run in range(1, args.runs + 1):
        home = tempfile.mkdtemp(prefix="coffer-bench-front-")
        os.environ.update(COFFER_HOME=home, COFFER_ENGINE_IDLE="60")
        try:
            subprocess.run([*argv, "add", "demo", "--", *UPSTREAM], check=True, capture_output=True)
            starts, pss, engine_pss = fronts(argv, args.fronts, home)
            times = asyncio.run(hop(argv, args.calls))
        finally:
            subprocess.run([*argv, "status", "--stop"], capture_output=True)
            shutil.rmtree(home, ignore_errors=True)
        p50 = {name: statistics.median(values) for name, values in times.items()}
        print(f"\nrun {run} of {args.runs}:")
        print(
            f"  front start (spawn -> initialize answered, warm engine): median "
            f"{statistics.median(starts) * 1000:.0f} ms, max {max(starts) * 1000:.0f} ms  (target <= 150 ms)"
        )
        print(
            f"  front PSS with {args.fronts} open: median {statistics.median(pss):.1f} MiB, max {max(pss):.1f} MiB "
            f"(target <= 15 MiB); the engine: {engine_pss:.1f} MiB; "
            f"{args.fronts} sessions in all: {sum(pss) + engine_pss:.0f} MiB"
        )
        engine, standalone = p50["engine"] - p50["direct"], p50["standalone"] - p50["direct"]
        print(
            f"  echo p50 ({args.calls} calls each): direct {p50['direct']:.3f} ms; added through the engine "
            f"{engine:.3f} ms, --standalone {standalone:.3f} ms; the engine's hop {engine - standalone:+.3f} ms "
            f"(target <= 0.2 ms)"
        )


if __name__ == "__main__":
    main()
