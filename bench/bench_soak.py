"""Soak: `coffer serve` under steady calls for ten minutes while faults are injected. Not run in CI.

    python bench/bench_soak.py [--minutes 10] [--workers 4]

Upstreams (the fixture server, real subprocesses): two healthy ones (`good1`, `good2`) that the
workers call without pause (echo and add, checked for the right answer), and a faulty one (`rough`)
that every 2 s gets one of: a tool error (isError), a JSON-RPC error, a call that outlives its 3 s
timeout (so Coffer cancels it upstream), non-JSON noise on its stdout, and every 30 s a call that
kills the process mid-call (Coffer restarts it). Every 10 s the gateway's resident size and open file
descriptors are sampled, and so are the process count under it (a restart must not leave any behind).

Printed: calls and errors per kind, latency p50/p99 of the healthy calls, and RSS, fds and
processes at the start (after the first minute, when caches are warm), the end and their maximum.
The healthy calls should see no error at all, and RSS, fds and processes should stay flat.
Linux only (/proc). Figures, not asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FAULTS = ("fail", "boom", "slow", "noisy")


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def soak(minutes: float, workers: int) -> dict[str, Any]:
    from tests.fixtures.gateway_harness import add_fixture, descendants, serve

    home = Path(tempfile.mkdtemp(prefix="coffer-soak-"))
    os.environ["COFFER_HOME"] = str(home)
    for name in ("good1", "good2"):
        add_fixture(home, name)
    add_fixture(home, "rough", "normal", timeout=3.0)
    latencies: list[tuple[float, float]] = []  # (seconds since start, ms)
    first_error: dict[str, str] = {}
    counts: Counter[str] = Counter()
    samples: list[tuple[float, float, int, int]] = []
    started = time.monotonic()
    deadline = started + minutes * 60
    counts["healthy errors"] = 0
    async with serve(home, timeout=60) as s:
        # s.pid is its supervisor: under it, the `coffer serve` front and (re-parented to it) the engine,
        # which is the gateway; in-process, the front is
        children = [p for p in descendants(s.pid) if _parent(p) == s.pid]
        gateway = next(
            (p for p in children if b"coffer.engine" in Path(f"/proc/{p}/cmdline").read_bytes()), children[0]
        )

        async def healthy(worker: int) -> None:
            i = 0
            while time.monotonic() < deadline:
                i += 1
                server = f"good{1 + (worker + i) % 2}"
                t0 = time.perf_counter()
                try:
                    if i % 2:
                        result = await s.call(f"{server}__echo", {"text": f"w{worker}-{i}"})
                        ok = not result.is_error and result.content[0].text == f"w{worker}-{i}"
                    else:
                        result = await s.call(f"{server}__add", {"a": worker, "b": i})
                        ok = not result.is_error and float(result.content[0].text) == worker + i
                except Exception:
                    ok = False
                latencies.append((time.monotonic() - started, (time.perf_counter() - t0) * 1000.0))
                counts["healthy calls"] += 1
                if not ok:
                    counts["healthy errors"] += 1

        async def faults() -> None:
            i, last_crash = 0, time.monotonic()
            while time.monotonic() < deadline:
                await anyio.sleep(2)
                if time.monotonic() - last_crash >= 30:
                    tool, last_crash = "crash", time.monotonic()
                else:
                    tool = FAULTS[i % len(FAULTS)]
                    i += 1
                args = {"seconds": 6} if tool == "slow" else {}
                try:
                    result = await s.call(f"rough__{tool}", args)
                    key = f"fault {tool}: {'error result' if result.is_error else 'answered'}"
                    counts[key] += 1
                    if result.is_error and result.content:
                        first_error.setdefault(key, str(getattr(result.content[0], "text", ""))[:100])
                except Exception as exc:
                    counts[f"fault {tool}: {type(exc).__name__}"] += 1

        async def sampler() -> None:
            t0 = time.monotonic()
            while time.monotonic() < deadline:
                samples.append((time.monotonic() - t0, _rss_mib(gateway), _fds(gateway), len(descendants(gateway))))
                await anyio.sleep(10)

        async with anyio.create_task_group() as tg:
            for w in range(workers):
                tg.start_soon(healthy, w)
            tg.start_soon(faults)
            tg.start_soon(sampler)
    return {"latencies": latencies, "counts": counts, "samples": samples, "minutes": minutes, "errors": first_error}


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=4, help="concurrent healthy callers (default 4)")
    args = parser.parse_args(argv)
    out = anyio.run(soak, args.minutes, args.workers)
    lat = sorted(ms for _, ms in out["latencies"])
    warm_lat = sorted(ms for at, ms in out["latencies"] if at >= 10)
    print(f"soak: {out['minutes']:g} minutes, {args.workers} healthy workers, faults on one upstream")
    for key, value in sorted(out["counts"].items()):
        print(f"  {key:32} {value}")
    if lat:
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        print(f"  healthy latency ms              p50 {statistics.median(lat):.2f}  p99 {p99:.2f}  max {lat[-1]:.1f}")
        if warm_lat:
            print(f"  (after the first 10 s)          max {warm_lat[-1]:.1f}")
    for key, text in sorted(out["errors"].items()):
        print(f"  first {key}: {text}")
    samples = out["samples"]
    warm = [x for x in samples if x[0] >= 60] or samples
    if warm:
        first, last = warm[0], warm[-1]
        for label, index in (("RSS MiB", 1), ("open fds", 2), ("processes under serve", 3)):
            top = max(x[index] for x in warm)
            print(f"  {label:32} at 1 min {first[index]:.0f}  at end {last[index]:.0f}  max {top:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
