"""Sessions × servers: `coffer serve` (through the engine) against `coffer serve --standalone`, in one run.

  python bench/bench_engine.py                      # 1 and 5 sessions over 16 servers
  python bench/bench_engine.py --sessions 1,5,10 --servers 16
  python bench/bench_engine.py --install-real bench/.real   # once: the 12 npm servers of the catalogue
  python bench/bench_engine.py --real bench/.real --sessions 1,5,10   # the 16 real servers

Each scenario opens N agent sessions (SDK clients over stdio) on one vault of S servers, waits until
every session's tools/list holds every server's tools, then reads from /proc: the processes under
this bench (it is their child subreaper, so the engine, which detaches, is counted too) and their
total PSS (shared pages split between their users). Added latency: echo calls through one session,
engine vs standalone, alternating. The servers are the bundled demo server (an mcp 2.x SDK server), or
with `--real DIR` the 16 real servers of shared/data/catalogue (their npm packages installed in DIR,
browsers not downloaded; the four Python ones through uvx; placeholder tokens, since listing needs
none): a session is complete when every server that lists at all has listed (one that cannot start
here, e.g. for want of a newer Node, is reported and left out). Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from coffer.engine.report import pss_kib  # noqa: E402
from coffer.gateway import sessions  # noqa: E402
from coffer.manage import servers as manage  # noqa: E402
from coffer.manage.demo import demo_server_path  # noqa: E402
from coffer.upstreams.reaper import tree  # noqa: E402
from coffer.vault import registry  # noqa: E402

DEMO = str(demo_server_path())
NPM = [
    "@modelcontextprotocol/server-everything",
    "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/server-memory",
    "@modelcontextprotocol/server-sequential-thinking",
    "@modelcontextprotocol/server-github",
    "@playwright/mcp",
    "@upstash/context7-mcp",
    "@notionhq/notion-mcp-server",
    "@sentry/mcp-server",
    "@wonderwhy-er/desktop-commander",
    "mcp-server-kubernetes",
    "firecrawl-mcp",
]


def real_servers(prefix: Path, work: Path) -> list[registry.ServerConfig]:
    """The catalogue's 16 servers, launched as shared/data/catalogue/README.md says (placeholder tokens)."""
    import subprocess

    bin_ = prefix / "node_modules" / ".bin"
    repo = work / "repo"
    repo.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    token = "placeholder-token-for-listing"

    def npm(name: str, program: str, *args: str, **env: str) -> registry.ServerConfig:
        return registry.ServerConfig(name=name, command=str(bin_ / program), args=list(args), env=env, timeout=60)

    def uvx(name: str, *args: str) -> registry.ServerConfig:
        return registry.ServerConfig(name=name, command="uvx", args=list(args), timeout=60)

    return [
        npm("everything", "mcp-server-everything", "stdio"),
        npm("filesystem", "mcp-server-filesystem", str(work)),
        npm("memory", "mcp-server-memory", MEMORY_FILE_PATH=str(work / "memory.jsonl")),
        npm("sequential-thinking", "mcp-server-sequential-thinking"),
        npm("github", "mcp-server-github", GITHUB_PERSONAL_ACCESS_TOKEN=token),
        npm("playwright", "playwright-mcp", "--headless"),
        npm("context7", "context7-mcp"),
        npm("notion", "notion-mcp-server", NOTION_TOKEN=token),
        npm("sentry", "sentry-mcp", f"--access-token={token}"),
        npm("desktop-commander", "desktop-commander"),
        npm("kubernetes", "mcp-server-kubernetes"),
        npm("firecrawl", "firecrawl-mcp", FIRECRAWL_API_KEY=token),
        uvx("git", "mcp-server-git", "--repository", str(repo)),
        uvx("time", "mcp-server-time", "--local-timezone", "UTC"),
        uvx("fetch", "mcp-server-fetch"),
        uvx("sqlite", "--with", "mcp<2", "mcp-server-sqlite", "--db-path", str(work / "bench.db")),
    ]


def vault(n: int, real: Path | None = None, share: str = "auto") -> tuple[Path, list[str]]:
    """A vault of `n` demo servers, or of the real ones (`real`: their npm prefix), each with `share`; and
    the names that list."""
    home = Path(tempfile.mkdtemp(prefix="coffer-bench-engine-"))
    os.environ["COFFER_HOME"] = str(home)
    if real is None:
        for i in range(n):
            manage.add_server(registry.ServerConfig(name=f"demo{i}", command=sys.executable, args=[DEMO]))
        return home, [f"demo{i}" for i in range(n)]
    listed = []
    for cfg in real_servers(real, home):
        cfg.share = share
        added = manage.add(cfg)  # started once and catalogued, as `coffer add` does
        if added.failure is None:
            listed.append(cfg.name)
        else:
            print(f"  {cfg.name}: cannot start here ({str(added.failure)[:100]}); left out")
            manage.remove_server(cfg.name)
    return home, listed


def pss_mib(pids: list[int]) -> float:
    return sum(pss_kib(pid) for pid in pids) / 1024


def per_session(names: list[str]) -> list[str]:
    """The servers the engine runs once per session (`coffer.gateway.sessions`): started at a session's first call."""
    reg = registry.load()
    return [n for n in names if sessions.decide(reg.get(n)).per_session]


async def use_once(session: ClientSession, servers: list[str], tools: list[types.Tool]) -> None:
    """One call to each of `servers` (the tool asking least of its arguments; its answer does not matter:
    the call is what starts a per-session server)."""
    for server in servers:
        mine = [t for t in tools if t.name.split("__", 1)[0] == server]
        if mine:
            tool = min(mine, key=lambda t: len(t.input_schema.get("required") or []))
            with contextlib.suppress(Exception):
                await session.call_tool(tool.name, {})


async def scenario(
    home: Path, sessions: int, names: list[str], engine: bool, echo: str, use: list[str] | None = None
) -> dict[str, float]:
    """`use`: each session calls each of these servers once after listing (its own processes start)."""
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
                    tools = (await session.list_tools()).tools
                    if set(names) <= {t.name.split("__", 1)[0] for t in tools}:
                        break
                    await anyio.sleep(0.1)
                firsts.append(time.perf_counter() - t0)
                await use_once(session, use or [], tools)
            # settled: every upstream started (a supervisor and a server each, per gateway; real servers
            # have wrappers of their own, so for them the count stops growing), then 1 s more
            own = per_session(names) if engine else []  # started only by a call (`use`)
            running = len(names) - len(own) + (sessions * len(own) if use else 0) if engine else sessions * len(names)
            expected = sessions + (1 if engine else 0) + running * (2 if sys.platform == "linux" else 1)
            with anyio.move_on_after(300):
                seen, steady = -1, 0
                while len(tree(os.getpid())) < expected or steady < 10:
                    now = len(tree(os.getpid()))
                    steady = steady + 1 if now == seen else 0
                    seen = now
                    await anyio.sleep(0.2)
            await anyio.sleep(1.0)
            pids = tree(os.getpid())
            latency = []
            for i in range(200):
                c0 = time.perf_counter()
                await opened[0].call_tool(echo, {"message" if echo.startswith("everything") else "text": f"x{i}"})
                latency.append((time.perf_counter() - c0) * 1000)
            return {
                "processes": len(pids),
                "pss_mib": pss_mib(pids),
                "first_list_s": statistics.median(firsts),
                "last_list_s": max(firsts),
                "echo_p50_ms": statistics.median(latency),
            }


async def main_async(session_counts: list[int], servers: int, real: Path | None, home: Path, names: list[str]) -> None:
    echo = "everything__echo" if real is not None else "demo0__echo"
    shares = sorted({registry.load().get(n).share for n in names})
    what = f"{len(names)} real servers (share {', '.join(shares)})" if real is not None else f"{servers} demo servers"
    print(f"{what}; sessions opened one after another; PSS over every process under the bench")
    head = ("sessions", "mode", "processes", "PSS MiB", "1st list s", "last list s", "echo p50 ms")
    print(f"{head[0]:>8}  {head[1]:<10} {head[2]:>9} {head[3]:>9} {head[4]:>10} {head[5]:>11} {head[6]:>11}")
    own = per_session(names)
    if own:
        print(f"run once per session: {', '.join(own)}; 'engine+use': each session also called each of them once")
    for n in session_counts:
        rows = {}
        modes = [("standalone", False, None), ("engine", True, None)] + ([("engine+use", True, own)] if own else [])
        for mode, engine, use in modes:
            rows[mode] = row = await scenario(home, n, names, engine, echo, use)
            await anyio.sleep(2.0)  # the idle engine (COFFER_ENGINE_IDLE=0) and its upstreams are gone
            print(
                f"{n:>8}  {mode:<10} {row['processes']:>9} {row['pss_mib']:>9.0f} {row['first_list_s']:>10.2f} "
                f"{row['last_list_s']:>11.2f} {row['echo_p50_ms']:>11.3f}"
            )
        base = rows["standalone"]
        for mode in [m for m, engine, _ in modes if engine]:
            ratio_p = rows[mode]["processes"] / base["processes"]
            ratio_m = rows[mode]["pss_mib"] / base["pss_mib"]
            added = rows[mode]["echo_p50_ms"] - base["echo_p50_ms"]
            figures = f"processes {ratio_p:.2f}x, memory {ratio_m:.2f}x, echo p50 {added:+.3f} ms"
            print(f"{n:>8}  {mode}/standalone: {figures}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="1,5", help="comma-separated session counts")
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--real", type=Path, default=None, help="the npm prefix of the real servers")
    parser.add_argument("--share", default="auto", choices=registry.SHARE_MODES, help="every real server's share")
    parser.add_argument("--install-real", type=Path, default=None, help="install the real servers' npm packages")
    args = parser.parse_args()
    if args.install_real is not None:
        import subprocess

        env = dict(os.environ, PUPPETEER_SKIP_DOWNLOAD="1", PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
        subprocess.run(
            ["npm", "install", "--prefix", str(args.install_real), "--no-audit", "--no-fund", *NPM], env=env, check=True
        )
        return
    if sys.platform == "linux":  # the detached engine is re-parented to us, so it is counted
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    home, names = vault(args.servers, args.real, args.share)  # `coffer add` runs its own event loop
    anyio.run(main_async, [int(x) for x in args.sessions.split(",")], args.servers, args.real, home, names)


if __name__ == "__main__":
    main()
