"""Which Coffer modules one tools/call passes through, from the host's line in to the answer out.

`python bench/bench_call_walk.py [--mode standalone|engine]` registers the bundled demo server in a
throwaway COFFER_HOME, starts `coffer serve` with a profiler in the process that serves the call (the
in-process gateway, or the engine), calls `demo__echo` once to warm up, then once more with the
profiler recording, and prints the modules whose functions were called for it, in the order they were
first entered (a coroutine woken up on its await chain does not count as its module's code called).
Run it on two checkouts to compare how far a maintainer must read to follow a call.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]

# Runs in the serving process: SIGUSR1 starts recording the coffer modules entered, SIGUSR2 writes them.
PROFILER = r"""
import json, os, signal, sys
seen, order, on = set(), [], [False]
def profile(frame, event, arg):
    if frame.f_code.co_flags & 0x2A0 and frame.f_lasti > 4:
        return  # a suspended coroutine or generator woken up, not a module's code called (CPython 3.11+)
    if event == "call":
        name = frame.f_globals.get("__name__", "")
        if name.startswith("coffer") and name not in seen:
            seen.add(name); order.append(name)
def start(*_):
    seen.clear(); order.clear(); sys.setprofile(profile)
def stop(*_):
    sys.setprofile(None)
    with open(os.environ["WALK_OUT"], "w") as fh:
        json.dump(order, fh)
argv = open("/proc/self/cmdline", "rb").read().split(b"\0")
role = "engine" if b"coffer.engine.daemon" in argv else "standalone" if b"serve" in argv else None
if role is not None:
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    def note_pid():
        with open(os.environ["WALK_OUT"] + "." + role, "w") as fh:
            fh.write(str(os.getpid()))
    note_pid()
    os.register_at_fork(after_in_child=note_pid)  # the engine detaches by forking
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("standalone", "engine"), default="standalone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        out = Path(tmp) / "walk.json"
        env = dict(os.environ, COFFER_HOME=str(home), WALK_OUT=str(out), COFFER_ENGINE_IDLE="0")
        demo = ROOT / "coffer" / "examples" / "demo_server.py"
        subprocess.run(
            [sys.executable, "-m", "coffer", "add", "demo", "--no-probe", "--", sys.executable, str(demo)],
            env=env,
            check=True,
            capture_output=True,
        )
        sitecustomize = Path(tmp) / "site"
        sitecustomize.mkdir()
        (sitecustomize / "sitecustomize.py").write_text(PROFILER)
        env["PYTHONPATH"] = os.pathsep.join([str(sitecustomize), str(ROOT), env.get("PYTHONPATH", "")])
        if args.mode == "standalone":
            env["COFFER_STANDALONE"] = "1"
        order = anyio.run(_drive, env, out, args.mode)
    print(f"{len(order)} coffer modules called for one tools/call ({args.mode}):")
    for name in order:
        print(f"  {name}")


async def _drive(env: dict[str, str], out: Path, mode: str) -> list[str]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "coffer", "serve"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        await session.call_tool("demo__echo", {"text": "warm"})
        await anyio.sleep(0.5)  # a detaching engine has written its own pid by now
        pid = _serving_pid(env, mode)
        os.kill(pid, signal.SIGUSR1)
        await anyio.sleep(0.2)
        await session.call_tool("demo__echo", {"text": "walk"})
        os.kill(pid, signal.SIGUSR2)
        for _ in range(100):
            if out.exists() and out.stat().st_size:
                break
            await anyio.sleep(0.05)
    names: list[str] = json.loads(out.read_text())
    return [n for n in names if n != "sitecustomize"]


def _serving_pid(env: dict[str, str], mode: str) -> int:
    """The process that serves the call: `coffer serve` itself in-process, else the engine."""
    marker = Path(env["WALK_OUT"] + "." + mode)
    for _ in range(100):
        if marker.exists() and marker.read_text():
            return int(marker.read_text())
        time.sleep(0.05)
    raise SystemExit(f"no {mode} process started")


if __name__ == "__main__":
    main()
