"""What confinement costs, and that real servers work under it: each server's policy, its start confined
and not, one call answered, and a call's round trip confined and not, all in one run.

  python bench/bench_sandbox.py                       # the bundled demo server
  python bench/bench_engine.py --install-real bench/.real   # once: the catalogue's npm servers
  python bench/bench_sandbox.py --real bench/.real    # the 16 real servers of shared/data/catalogue

Start = spawn through the supervisor to the answer of `initialize` plus `tools/list` (the best of
`--starts` runs each way, alternating). Confined as a gateway's start is: the default policy (reads by
allow-list, its own home and package cache, web ports), under bubblewrap, or Landlock alone (`--landlock`).
A call: one tool each server answers without credentials or a
network (its answer may be a tool error, e.g. a missing token: it counts as answered, a crash or a
timeout does not). Round trip: `--calls` calls to the demo server's echo, p50, confined and not.
"""

from __future__ import annotations

import argparse
import functools
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
from mcp import ClientSession, MCPError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_engine import real_servers
from coffer.manage.demo import demo_server_path
from coffer.trust.expand import resolved_env
from coffer.upstreams import lockdown, sandbox
from coffer.upstreams.transport import StreamStats, child_env, stdio_pipe
from coffer.vault import registry

# A call each real server answers with no account and no network (name -> tool, arguments).
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "demo": ("echo", {"text": "hi"}),
    "everything": ("echo", {"message": "hi"}),
    "filesystem": ("list_allowed_directories", {}),
    "memory": ("read_graph", {}),
    "sequential-thinking": (
        "sequentialthinking",
        {"thought": "one", "nextThoughtNeeded": False, "thoughtNumber": 1, "totalThoughts": 1},
    ),
    "time": ("get_current_time", {"timezone": "UTC"}),
    "git": ("git_status", {}),
    "sqlite": ("list_tables", {}),
    "desktop-commander": ("get_config", {}),
}


@asynccontextmanager
async def session(cfg: registry.ServerConfig, confined: bool) -> AsyncIterator[ClientSession]:
    env = child_env(resolved_env(cfg))
    argv = [cfg.command or "", *cfg.args]
    if argv[0] and "/" not in argv[0]:
        import shutil

        argv[0] = shutil.which(argv[0], path=env.get("PATH")) or argv[0]
    confine, cwd, start = None, cfg.cwd, None
    if confined:  # as a gateway's start: its own home, private temp, the allow-list
        start = sandbox.prepare(cfg, sandbox.policy_for(cfg), argv[0], env)
        env, confine, cwd = start.env, start.confine, start.cwd
    try:
        stats = StreamStats()
        async with (
            stdio_pipe(argv, env, cwd, stats, lambda: None, confine=confine) as (read, write),
            ClientSession(read, write, read_timeout_seconds=cfg.timeout) as client,
        ):
            yield client
    finally:
        if start is not None:
            sandbox.cleanup(start)


async def start_s(cfg: registry.ServerConfig, confined: bool) -> tuple[float, int, str]:
    """Seconds to initialize and list; the tool count; what one call answered."""
    t0 = time.perf_counter()
    async with session(cfg, confined) as client:
        await client.initialize()
        tools = (await client.list_tools()).tools
        elapsed = time.perf_counter() - t0
        answer = "-"
        name, args = CALLS.get(cfg.name, (tools[0].name if tools else "", {}))
        if cfg.name == "git":
            args = {"repo_path": cfg.args[-1]}
        if name:
            try:
                result = await client.call_tool(name, args)
            except MCPError as exc:  # answered, with a JSON-RPC error (arguments it will not take)
                return elapsed, len(tools), f"JSON-RPC error: {exc.message[:50]}"
            text = "".join(getattr(c, "text", "") for c in result.content)[:50].replace("\n", " ")
            answer = ("error: " if result.is_error else "ok: ") + text
    return elapsed, len(tools), answer


async def round_trip_ms(cfg: registry.ServerConfig, calls: int, rounds: int = 5) -> dict[bool, float]:
    """p50 of a call's round trip, confined and not: both sessions open at once, measured in alternating
    rounds so that a slow spell of the machine falls on both."""
    times: dict[bool, list[float]] = {False: [], True: []}
    async with session(cfg, False) as plain, session(cfg, True) as boxed:
        clients = {False: plain, True: boxed}
        for client in clients.values():
            await client.initialize()
            for _ in range(20):
                await client.call_tool("echo", {"text": "warm"})
        for _ in range(rounds):
            for confined, client in clients.items():
                for _ in range(calls // rounds):
                    t0 = time.perf_counter()
                    await client.call_tool("echo", {"text": "x"})
                    times[confined].append((time.perf_counter() - t0) * 1000)
    return {k: statistics.median(v) for k, v in times.items()}


async def main_async(servers: list[registry.ServerConfig], starts: int, calls: int) -> None:
    found = sandbox.support()
    print(f"confinement: {found.describe()}")
    rows = []
    cold: dict[str, float] = {}
    disk: dict[str, int] = {}
    for cfg in servers:
        policy = sandbox.policy_for(cfg)
        best: dict[bool, float] = {}
        counts: dict[bool, int] = {}
        answer = ""
        sandbox.forget(cfg.name)  # its own home starts empty: the first confined start fills its cache
        try:
            cold[cfg.name] = (await start_s(cfg, True))[0]
            for _ in range(starts):
                for confined in (False, True):
                    s, counts[confined], got = await start_s(cfg, confined)
                    best[confined] = min(best.get(confined, s), s)
                    answer = got if confined else answer
        except Exception as exc:  # a server that fails is a row, not the end of the bench
            answer = f"FAILED: {type(exc).__name__}: {str(exc)[:60]}"
        plain, boxed = best.get(False), best.get(True)
        extra = f"{(boxed - plain) * 1000:+.0f} ms" if plain is not None and boxed is not None else "-"
        tools = f"{counts.get(True, '-')}" + ("" if counts.get(True) == counts.get(False) else f"/{counts.get(False)}!")
        rows.append((cfg.name, policy.describe(), plain, boxed, extra, tools, answer))
        disk[cfg.name] = _disk(sandbox.home_of(cfg.name))
    print(f"{'server':20} {'unconfined':>10} {'confined':>9} {'extra':>8} {'tools':>5}  policy / a call confined")
    for name, policy_text, plain, boxed, extra, tools, answer in rows:
        p = f"{plain:.3f}s" if plain is not None else "-"
        b = f"{boxed:.3f}s" if boxed is not None else "-"
        print(f"{name:20} {p:>10} {b:>9} {extra:>8} {tools:>5}  {policy_text}")
        first = (
            f"first confined start {cold[name]:.3f}s, its home {disk.get(name, 0) / 1e6:.1f} MB" if name in cold else ""
        )
        print(f"{'':20} {'':>10} {'':>9} {'':>8} {'':>5}  {answer}")
        print(f"{'':20} {'':>10} {'':>9} {'':>8} {'':>5}  {first}")
    extras = [(r[3] - r[2]) * 1000 for r in rows if r[2] is not None and r[3] is not None]
    if extras:
        print(f"extra start time confined: median {statistics.median(extras):+.1f} ms, max {max(extras):+.1f} ms")
    plain_s, boxed_s = bare_start_s()
    print(
        f"the sandbox alone (/bin/true, 40 runs each, median): unconfined {plain_s * 1000:.1f} ms, "
        f"confined {boxed_s * 1000:.1f} ms, +{(boxed_s - plain_s) * 1000:.1f} ms"
    )
    p50 = await round_trip_ms(_demo(), calls)
    print(f"echo round trip p50 over {calls} calls each: unconfined {p50[False]:.3f} ms, confined {p50[True]:.3f} ms")


def bare_start_s(runs: int = 40) -> tuple[float, float]:
    """What confinement itself adds to a start, without a server's own start to hide it: `/bin/true`
    run directly and confined as a server is (the same bubblewrap line, Landlock applied in the child
    before exec as the supervisor does), alternating."""
    import subprocess

    times: dict[bool, list[float]] = {False: [], True: []}
    probe = registry.ServerConfig(name="bench-true", command="/bin/true")
    start = sandbox.prepare(probe, sandbox.Policy(), "/bin/true", child_env({}))
    line = start.confine(["/bin/true"])
    rules: dict[str, Any] | None = None
    found = lockdown.split(line)
    if found is not None:  # Landlock is applied by the supervisor in the child before exec: so here
        rules, line = found
    try:
        for _ in range(runs):
            for confined, argv in ((False, ["/bin/true"]), (True, line)):
                hook = functools.partial(lockdown.confine, rules) if confined and rules is not None else None
                t0 = time.perf_counter()
                subprocess.run(argv, check=True, preexec_fn=hook)
                times[confined].append(time.perf_counter() - t0)
    finally:
        sandbox.cleanup(start)
    return statistics.median(times[False]), statistics.median(times[True])


def _disk(folder: Path) -> int:
    """Bytes under `folder` (a server's own home: its package cache and state)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _demo() -> registry.ServerConfig:
    return registry.ServerConfig(name="demo", command=sys.executable, args=[str(demo_server_path())])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real", type=Path, default=None, help="the npm prefix of the real servers")
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--landlock", action="store_true", help="hide bubblewrap: Landlock alone confines")
    args = parser.parse_args()
    if args.landlock:
        os.environ[sandbox.BWRAP_ENV] = "none"
        sandbox.support.cache_clear()
    if not sandbox.support().available:
        raise SystemExit(f"no confinement here: {sandbox.support().unconfined_why}")
    with tempfile.TemporaryDirectory(prefix="coffer-bench-work-") as work, tempfile.TemporaryDirectory() as vault:
        os.environ.setdefault("COFFER_HOME", vault)  # the servers' own homes, not the user's vault
        servers = [_demo()]
        if args.real is not None:
            servers += real_servers(args.real.resolve(), Path(work))
        anyio.run(main_async, servers, args.starts, args.calls)


if __name__ == "__main__":
    main()
