"""`coffer demo`: the whole loop on a bundled example server, in a throwaway vault.

Registers `coffer/examples/demo_server.py` in a temporary COFFER_HOME, starts `coffer serve` as a
subprocess, and talks to it through a real MCP client: initialize, tools/list, coffer__search_tools,
then a call to the top hit. The temporary vault is deleted afterwards, whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from coffer.errors import UpstreamError
from coffer.manage import servers
from coffer.vault import paths, registry

QUERY = "what time is it right now"
EXAMPLE_ARGS: dict[str, dict[str, Any]] = {
    "demo__current_time": {"timezone": "UTC"},
    "demo__echo": {"text": "hello from coffer"},
    "demo__add": {"a": 2, "b": 40},
    "demo__add_note": {"text": "try coffer search"},
}


def demo_server_path() -> Path:
    return Path(__file__).resolve().parents[1] / "examples" / "demo_server.py"


def run_demo(timeout: float = 60.0) -> dict[str, Any]:
    """Run the demo and return what happened. Raises UpstreamError when the gateway misbehaves."""
    import anyio

    home = Path(tempfile.mkdtemp(prefix="coffer-demo-"))
    try:
        with _vault(home):  # registering approves the launch config: in the demo's vault, not the user's
            cfg = registry.ServerConfig(name="demo", command=sys.executable, args=[str(demo_server_path())])
            servers.add_server(cfg)
        return anyio.run(_drive, home, timeout)
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def _vault(home: Path) -> Iterator[None]:
    old = os.environ.get(paths.ENV_HOME)
    os.environ[paths.ENV_HOME] = str(home)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(paths.ENV_HOME, None)
        else:
            os.environ[paths.ENV_HOME] = old


async def _drive(home: Path, timeout: float) -> dict[str, Any]:
    import anyio
    import mcp_types as types
    from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

    env = dict(os.environ) | {"COFFER_HOME": str(home)}
    # standalone: a throwaway vault must not leave an engine behind it
    params = StdioServerParameters(command=sys.executable, args=["-m", "coffer", "serve", "--standalone"], env=env)
    report: dict[str, Any] = {"server": "demo", "launch": f"{sys.executable} {demo_server_path()}"}

    def text(result: types.CallToolResult) -> str:
        return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))

    started = time.perf_counter()
    with open(home / "serve.stderr", "w") as errlog:
        try:
            with anyio.fail_after(timeout):
                async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                    init = await session.initialize()
                    report["gateway"] = f"{init.server_info.name} {init.server_info.version}"
                    report["protocol"] = init.protocol_version
                    report["initialize_seconds"] = round(time.perf_counter() - started, 3)
                    listed = await session.list_tools()
                    report["tools"] = [{"name": t.name, "description": t.description or ""} for t in listed.tools]
                    found = await session.call_tool("coffer__search_tools", {"query": QUERY, "top_k": 3})
                    hits = (found.structured_content or json.loads(text(found)))["tools"]
                    report["search"] = {
                        "query": QUERY,
                        "results": [{"name": h["name"], "score": h["score"]} for h in hits],
                    }
                    target = hits[0]["name"] if hits else "demo__echo"
                    args = EXAMPLE_ARGS.get(target, {})
                    called = await session.call_tool(target, args)
                    report["call"] = {
                        "tool": target,
                        "arguments": args,
                        "result": text(called),
                        "is_error": called.is_error,
                    }
        except (TimeoutError, MCPError, OSError) as exc:
            tail = (home / "serve.stderr").read_text(errors="replace").strip().splitlines()[-3:]
            detail = f"; stderr: {' | '.join(tail)}" if tail else ""
            raise UpstreamError(f"the demo gateway failed: {type(exc).__name__}: {exc}{detail}") from exc
    report["total_seconds"] = round(time.perf_counter() - started, 3)
    return report
