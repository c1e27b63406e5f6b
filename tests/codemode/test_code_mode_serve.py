"""coffer__run through `coffer serve` with real npm servers (filesystem and memory, from .ci/node): bulk
reads in one step, a search chained into calls, escape attempts, a write refused until allowed, and
every inner call in the invocation log under its run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from coffer.log.calls import open_log
from coffer.log.query import query
from coffer.manage import servers
from coffer.vault import registry
from tests.fixtures.gateway_harness import serve, text

pytestmark = [pytest.mark.anyio, pytest.mark.serve_modes]

NPM = Path(__file__).resolve().parents[2] / ".ci/node/node_modules/@modelcontextprotocol"
FILESYSTEM = NPM / "server-filesystem" / "dist" / "index.js"
MEMORY = NPM / "server-memory" / "dist" / "index.js"
needs_servers = pytest.mark.skipif(
    not (FILESYSTEM.exists() and MEMORY.exists()) or shutil.which("node") is None,
    reason="run .ci/run for server-filesystem and server-memory",
)


def vault(home: Path, files: Path, code_mode: bool = True) -> None:
    node = shutil.which("node") or "node"
    path = home / "coffer.toml"
    servers.add_server(registry.ServerConfig(name="fs", command=node, args=[str(FILESYSTEM), str(files)]), path=path)
    memory_file = {"MEMORY_FILE_PATH": str(files / "memory.jsonl")}
    memory = registry.ServerConfig(name="memory", command=node, args=[str(MEMORY)], env=memory_file)
    servers.add_server(memory, path=path)
    with registry.edit(home / "coffer.toml") as doc:
        doc["settings"] = {"code_mode": code_mode, "code_mode_timeout_s": 20}


def notes(tmp_path: Path, n: int = 20) -> Path:
    files = tmp_path / "notes"
    files.mkdir()
    for i in range(n):
        size = "large" if i % 4 == 0 else "small"
        (files / f"note{i:02}.txt").write_text(f"note {i}\nsize: {size}\n" + "filler line\n" * 50)
    return files


def payload(result: Any) -> dict[str, Any]:
    data = json.loads(text(result))
    assert result.structured_content == data
    return dict(data)


async def wait_listed(s: Any, name: str) -> None:
    for _ in range(100):
        if name in await s.tool_names():
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"{name} was never listed")


@needs_servers
async def test_a_script_reads_twenty_files_and_returns_a_summary(coffer_home: Path, tmp_path: Path) -> None:
    files = notes(tmp_path)
    vault(coffer_home, files)
    script = f"""
listing = call_tool("fs__list_directory", {{"path": {str(files)!r}}})
names = [line.split(" ", 1)[1] for line in listing["content"].splitlines() if line.startswith("[FILE]")]
texts = call_tools([["fs__read_text_file", {{"path": {str(files)!r} + "/" + n}}] for n in names])
large = [n for n, t in zip(names, texts) if "size: large" in t["content"]]
print("read", len(texts), "files")
{{"files": len(names), "large": sorted(large)}}
"""
    async with serve(coffer_home) as s:
        assert "coffer__run" in await s.tool_names()
        result = await s.call("coffer__run", {"code": script})
        assert not result.is_error, text(result)
        data = payload(result)
        assert data["result"] == {"files": 20, "large": [f"note{i:02}.txt" for i in range(0, 20, 4)]}
        assert data["printed"] == "read 20 files\n"
        assert data["calls"] == 21
        # the agent got a summary, not twenty files
        assert len(text(result)) < 400 < sum(p.stat().st_size for p in files.iterdir())

    rows = query(open_log(), limit=100)
    (run,) = [r for r in rows if r["server"] == "coffer" and r["tool"] == "run"]
    inner = [r for r in rows if r["parent"] is not None]
    assert run["outcome"] == "ok" and run["run"] and len(inner) == 21
    assert {r["parent"] for r in inner} == {run["run"]}
    assert {(r["server"], r["tool"]) for r in inner} == {("fs", "list_directory"), ("fs", "read_text_file")}


@needs_servers
async def test_a_script_chains_a_search_into_calls(coffer_home: Path, tmp_path: Path) -> None:
    vault(coffer_home, notes(tmp_path, 2))
    script = """
found = search_tools("search the knowledge graph for entities", top_k=5)
tool = [t for t in found if t["callable"]][0]["name"]
graph = call_tool(tool, {"query": "anything"})
[tool, graph, sorted(t["name"] for t in found if not t["callable"])[:1]]
"""
    async with serve(coffer_home) as s:
        await wait_listed(s, "memory__search_nodes")
        result = await s.call("coffer__run", {"code": script})
        assert not result.is_error, text(result)
        tool, graph, refused = payload(result)["result"]
        assert tool == "memory__search_nodes"
        assert graph == {"entities": [], "relations": []}
        assert refused and refused[0].startswith("memory__")  # write tools are found, and marked not callable


@needs_servers
async def test_a_write_tool_is_refused_until_the_user_allows_it(coffer_home: Path, tmp_path: Path) -> None:
    vault(coffer_home, notes(tmp_path, 1))
    script = """
try:
    call_tool("memory__create_entities", {"entities": [{"name": "Bob", "entityType": "person", "observations": []}]})
    made = "made"
except PermissionError as e:
    made = str(e)
made
"""
    async with serve(coffer_home) as s:
        refused = payload(await s.call("coffer__run", {"code": script}))["result"]
        assert "not marked read-only" in refused and 'code_mode = ["create_entities"]' in refused
        with registry.edit(coffer_home / "coffer.toml") as doc:
            doc["servers"]["memory"]["code_mode"] = ["create_entities"]
        allowed = None
        for _ in range(50):  # the gateway sees the edit within a poll
            allowed = payload(await s.call("coffer__run", {"code": script}))["result"]
            if allowed == "made":
                break
            await anyio.sleep(0.2)
        assert allowed == "made"
        graph = payload(await s.call("coffer__run", {"code": 'call_tool("memory__read_graph")'}))["result"]
        assert [e["name"] for e in graph["entities"]] == ["Bob"]

    rows = query(open_log(), limit=100)
    outcomes = [(r["tool"], r["outcome"], r["error_class"]) for r in rows if r["parent"]]
    assert ("create_entities", "refused", "code_mode") in outcomes
    assert ("create_entities", "ok", None) in outcomes


ESCAPES = {
    "import os": "import of 'os' refused",
    "open('/etc/passwd').read()": "PermissionError",
    "().__class__.__bases__": "dunder",
    "x = [1]\nx.__class__": "dunder",
    "getattr(print, '__globals__')": "AttributeError",
    "eval('__import__(\"os\")')": "",  # whatever the sandbox says: it must fail
    "while True:\n    pass": "TimeoutError",
    "x = []\nwhile True:\n    x.append('a' * 1000000)": "MemoryError",
    "for i in range(10**5):\n    print('x' * 100)": "printed more than",  # 10 MB, well inside 2 s
    "def (": "SyntaxError",
    "call_tool('fs__write_file', {'path': '/tmp/x', 'content': 'x'})": "not marked read-only",
    "call_tool('coffer__run', {'code': '1'})": "unknown tool",
}


@needs_servers
async def test_escape_attempts_fail_cleanly_and_the_gateway_is_unharmed(coffer_home: Path, tmp_path: Path) -> None:
    vault(coffer_home, notes(tmp_path, 1))
    with registry.edit(coffer_home / "coffer.toml") as doc:
        doc["settings"]["code_mode_timeout_s"] = 2
    async with serve(coffer_home) as s:
        for code, said in ESCAPES.items():
            result = await s.call("coffer__run", {"code": code})
            assert result.is_error, code
            assert said in payload(result)["error"], (code, text(result))
        assert payload(await s.call("coffer__run", {"code": "sum(range(10))"}))["result"] == 45
    runs = {r["outcome"]: r["error_class"] for r in query(open_log(), limit=100) if r["tool"] == "run"}
    assert runs["timeout"] == "script_timeout", "a run past its time limit is logged as a timeout, not an error"
    assert runs["error"] == "tool_error"


@needs_servers
async def test_code_mode_is_off_until_the_user_turns_it_on(coffer_home: Path, tmp_path: Path) -> None:
    vault(coffer_home, notes(tmp_path, 1), code_mode=False)
    async with serve(coffer_home) as s:
        assert "coffer__run" not in await s.tool_names()
        refused = await s.call("coffer__run", {"code": "1"})
        assert refused.is_error and "code mode is off" in text(refused) and "code_mode = true" in text(refused)
