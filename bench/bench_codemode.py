"""What reaches the agent, direct calls against one `coffer__run`, for bulk and multi-step tasks.

Through a real `coffer serve --standalone` (stdio, the MCP SDK's client) with the real npm servers
server-filesystem and server-memory (from .ci/node, else npx). Three tasks, each done both ways:

  bulk read    which of 20 notes (2 KB each) say "size: large": list_directory, then 20 read_text_file
  tree count   files per extension in a 300-file tree: directory_tree, counted
  graph hop    who works at Acme in a 120-entity memory graph: search_nodes, then open_nodes

and first, the cost of the sandbox alone: a script that calls nothing (a fresh worker, under
bubblewrap where the machine has it, per run).

Per task and way: the bytes and tokens that reach the agent (every result as the host receives it:
content and structuredContent, counted with the result cap's tokenizer, coffer.results.tokens), the
tokens the agent must write (the calls' arguments, or the script), the tool calls the agent makes,
and the wall time of the calls alone (direct: one after another, as an agent's turns make them; each
would also cost a model turn, which is not counted here). Figures, not asserts.

    python bench/bench_codemode.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NPM = ROOT / ".ci/node/node_modules/@modelcontextprotocol"


def launch(package: str) -> list[str]:
    local = NPM / package / "dist" / "index.js"
    return (
        [shutil.which("node") or "node", str(local)]
        if local.exists()
        else ["npx", "-y", f"@modelcontextprotocol/{package}"]
    )


def build(home: Path, data: Path) -> None:
    from coffer.manage import servers
    from coffer.vault import registry

    notes = data / "notes"
    notes.mkdir(parents=True)
    for i in range(20):
        size = "large" if i % 4 == 0 else "small"
        (notes / f"note{i:02}.txt").write_text(f"note {i}\nsize: {size}\n" + "a line of the note's body\n" * 80)
    tree = data / "tree"
    for i in range(300):
        folder = tree / f"dir{i % 12}" / f"sub{i % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i}.{('py', 'md', 'json', 'txt', 'toml')[i % 5]}").write_text("x")
    graph = data / "memory.jsonl"
    lines = []
    for i in range(120):
        employer = "Acme" if i % 10 == 0 else f"Company{i % 7}"
        observations = [f"works at {employer}", f"joined in {2000 + i % 25}", "likes long walks " * 3]
        lines.append({"type": "entity", "name": f"Person{i}", "entityType": "person", "observations": observations})
    graph.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    path = home / "coffer.toml"
    fs = launch("server-filesystem")
    memory = launch("server-memory")
    servers.add_server(registry.ServerConfig(name="fs", command=fs[0], args=[*fs[1:], str(data)]), path=path)
    memory_env = {"MEMORY_FILE_PATH": str(graph)}
    servers.add_server(
        registry.ServerConfig(name="memory", command=memory[0], args=memory[1:], env=memory_env), path=path
    )
    with registry.edit(path) as doc:
        doc["settings"] = {"code_mode": True}


def received(result: Any) -> str:
    """The result as the host gets it on the wire."""
    return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False)


Calls = list[tuple[str, dict[str, Any]]]


def tasks(data: Path) -> dict[str, tuple[Callable[[Any], Awaitable[Calls]], str]]:
    notes, tree = str(data / "notes"), str(data / "tree")

    async def bulk_direct(s: Any) -> Calls:
        listing = await s.call_tool("fs__list_directory", {"path": notes})
        names = [ln.split(" ", 1)[1] for ln in listing.content[0].text.splitlines() if ln.startswith("[FILE]")]
        calls: Calls = [("fs__list_directory", {"path": notes})]
        for name in names:
            args = {"path": f"{notes}/{name}"}
            calls.append(("fs__read_text_file", args))
        return calls

    bulk_script = f"""
listing = call_tool("fs__list_directory", {{"path": {notes!r}}})
names = [l.split(" ", 1)[1] for l in listing["content"].splitlines() if l.startswith("[FILE]")]
texts = call_tools([["fs__read_text_file", {{"path": {notes!r} + "/" + n}}] for n in names])
[n for n, t in zip(names, texts) if "size: large" in t["content"]]
"""

    async def tree_direct(s: Any) -> Calls:
        return [("fs__directory_tree", {"path": tree})]

    tree_script = f"""
import json
counts = {{}}
def walk(nodes):
    for n in nodes:
        if n["type"] == "file":
            ext = n["name"].rsplit(".", 1)[-1]
            counts[ext] = counts.get(ext, 0) + 1
        else:
            walk(n.get("children", []))
walk(json.loads(call_tool("fs__directory_tree", {{"path": {tree!r}}})["content"]))
counts
"""

    async def graph_direct(s: Any) -> Calls:
        found = await s.call_tool("memory__search_nodes", {"query": "Acme"})
        names = [e["name"] for e in (found.structured_content or {}).get("entities", [])]
        return [("memory__search_nodes", {"query": "Acme"}), ("memory__open_nodes", {"names": names})]

    graph_script = """
found = call_tool("memory__search_nodes", {"query": "Acme"})
nodes = call_tool("memory__open_nodes", {"names": [e["name"] for e in found["entities"]]})
sorted(e["name"] for e in nodes["entities"] if "works at Acme" in e["observations"])
"""
    return {
        "bulk read": (bulk_direct, bulk_script),
        "tree count": (tree_direct, tree_script),
        "graph hop": (graph_direct, graph_script),
    }


async def measure(home: Path, data: Path, runs: int) -> list[dict[str, Any]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from coffer.results.tokens import count

    env = dict(os.environ, COFFER_HOME=str(home))
    params = StdioServerParameters(command=sys.executable, args=["-m", "coffer", "serve", "--standalone"], env=env)
    rows = []
    async with stdio_client(params) as (read, write), ClientSession(read, write, read_timeout_seconds=120) as s:
        await s.initialize()
        for _ in range(100):  # both servers listed
            names = [t.name for t in (await s.list_tools()).tools]
            if "fs__directory_tree" in names and "memory__open_nodes" in names:
                break
            await anyio.sleep(0.1)
        empty = []
        for _ in range(runs * 4):  # the sandbox's own cost: a fresh confined worker, a script with no call
            t0 = time.perf_counter()
            await s.call_tool("coffer__run", {"code": "1"})
            empty.append(time.perf_counter() - t0)
        rows.append({"task": "empty", "wall": statistics.median(empty)})
        for task, (plan, script) in tasks(data).items():
            calls = await plan(s)
            direct_s, script_s = [], []
            for _ in range(runs):
                t0 = time.perf_counter()
                results = [await s.call_tool(name, args) for name, args in calls]
                direct_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                ran = await s.call_tool("coffer__run", {"code": script})
                script_s.append(time.perf_counter() - t0)
                assert not ran.is_error, ran.content[0].text  # type: ignore[union-attr]
            direct_in = "".join(received(r) for r in results)
            direct_out = "".join(json.dumps({"name": n, "arguments": a}) for n, a in calls)
            run_in = received(ran)
            run_out = json.dumps({"name": "coffer__run", "arguments": {"code": script}})
            rows.append(
                {
                    "task": task,
                    "direct": (
                        len(calls),
                        len(direct_in),
                        count(direct_in),
                        count(direct_out),
                        statistics.median(direct_s),
                    ),
                    "run": (1, len(run_in), count(run_in), count(run_out), statistics.median(script_s)),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, data = Path(tmp) / "vault", Path(tmp) / "data"
        os.environ["COFFER_HOME"] = str(home)
        build(home, data)
        rows = anyio.run(measure, home, data, args.runs)
    print(f"{'task':11} {'way':7} {'calls':>5} {'bytes in':>9} {'tokens in':>9} {'tokens out':>10} {'wall ms':>8}")
    for row in rows:
        if row["task"] == "empty":
            print(f"(a coffer__run that calls nothing: {row['wall'] * 1000:.1f} ms, its worker's start included)")
            continue
        for way in ("direct", "run"):
            calls, size, tokens_in, tokens_out, wall = row[way]
            label = "direct" if way == "direct" else "run"
            print(f"{row['task']:11} {label:7} {calls:5} {size:9,} {tokens_in:9,} {tokens_out:10,} {wall * 1000:8.1f}")
        d, r = row["direct"], row["run"]
        print(
            f"{'':11} {'ratio':7} {'':5} {r[1] / d[1]:9.3f} {r[2] / d[2]:9.3f} {r[3] / d[3]:10.2f} {r[4] / d[4]:8.2f}"
        )


if __name__ == "__main__":
    main()
