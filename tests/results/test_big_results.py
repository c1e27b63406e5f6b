"""Big results through `coffer serve` (stdio, through the engine, and --http): a result over the cap is
kept whole and the agent gets a preview and a `coffer://results/<id>` link; one under it passes as it
came. Real processes: the fixture upstream (mode `big`) called directly and through the gateway, a real
results store, invocation log and coffer__ask index in a temporary COFFER_HOME.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from coffer.results import archive, tokens
from coffer.vault import registry
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import FIXTURE, add_fixture, serve, serve_env, wait_for

pytestmark = pytest.mark.anyio
WORD = "zebracorn"


def texts(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def link(result: types.CallToolResult) -> types.ResourceLink:
    (found,) = [c for c in result.content if isinstance(c, types.ResourceLink)]
    return found


@asynccontextmanager
async def direct() -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE), "--mode", "big", "--name", "logs"])
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s


def set_settings(home: Path, **values: Any) -> None:
    with registry.edit(home / "coffer.toml") as doc:
        settings = doc.setdefault("settings", {})
        for key, value in values.items():
            settings[key] = value  # type: ignore[index]


async def kept_rows() -> list[dict[str, Any]]:
    from coffer.log import calls, query

    return [r for r in query.query(calls.open_log()) if r["tool"] == "big"]


async def test_under_the_cap_a_result_passes_unchanged(coffer_home: Path) -> None:
    add_fixture(coffer_home, "logs", "big")
    async with direct() as d, serve(coffer_home) as s:
        want = await d.call_tool("big", {"kb": 40})
        got = await s.call("logs__big", {"kb": 40})
        assert got.model_dump() == want.model_dump()  # 40 KB of log lines is ~12k tokens: under 25,000
    assert not archive.listing()


async def test_over_the_cap_the_agent_gets_a_preview_and_the_whole_stays_reachable(coffer_home: Path) -> None:
    add_fixture(coffer_home, "logs", "big")
    async with direct() as d, serve(coffer_home) as s:
        original = texts(await d.call_tool("big", {"kb": 2048, "word": WORD}))
        got = await s.call("logs__big", {"kb": 2048, "word": WORD})
        assert not got.is_error
        shown = texts(got)
        assert tokens.count(shown) <= 25_000 and original.startswith(shown.split("the start:\n", 1)[1][:2000])
        kept = link(got)
        rid = str(kept.uri).removeprefix("coffer://results/")
        assert str(kept.uri).startswith("coffer://results/") and kept.size and kept.size > 2_000_000
        assert f'"id": "{rid}"' in shown and "coffer__read_result" in shown and " MB (over " in shown
        whole = await s.session.read_resource(str(kept.uri))
        (contents,) = whole.contents
        assert isinstance(contents, types.TextResourceContents) and contents.text == original  # byte for byte
        grep = texts(await s.call("coffer__read_result", {"id": rid, "pattern": WORD}))
        assert "1 matching lines" in grep and "ERROR worker-" in grep and WORD in grep
        part = texts(await s.call("coffer__read_result", {"id": rid, "offset": 100, "length": 500}))
        assert part.split("\n", 1)[1] == original[100:600] and "next: offset 600" in part
        bad = await s.call("coffer__read_result", {"id": "0" * 32})
        assert bad.is_error and "no kept result" in texts(bad)
        asked = json.loads(texts(await s.call("coffer__ask", {"question": f"which worker hit {WORD}?"})))
        top = asked["passages"][0]
        assert WORD in top["text"] and top["source"] == {"type": "result", "uri": str(kept.uri)}
    path = archive.directory() / f"{rid}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(archive.directory().stat().st_mode) == 0o700
    assert not list(archive.directory().glob(".spill-*"))  # the 2 MB string was decoded to a file: gone once kept
    rows = await wait_rows(1)
    assert rows[0]["kept"] == rid and rows[0]["result_bytes"] == path.stat().st_size
    assert WORD not in json.dumps(rows)  # sizes and the id only: never the content


async def test_a_pattern_in_one_long_line_shows_each_match_in_its_context(coffer_home: Path) -> None:
    """Minified JSON is one line: a match is shown with the characters around it, and where it is."""
    add_fixture(coffer_home, "api", "big")
    async with direct() as d, serve(coffer_home) as s:
        original = texts(await d.call_tool("big", {"kb": 1024, "kind": "json", "word": WORD}))
        assert "\n" not in original and len(original) > 1_000_000
        got = await s.call("api__big", {"kb": 1024, "kind": "json", "word": WORD})
        rid = str(link(got).uri).removeprefix("coffer://results/")
        found = texts(await s.call("coffer__read_result", {"id": rid, "pattern": WORD}))
        assert "1 matching lines of 1" in found
        at = original.index(WORD)
        assert f"(offset {at:,})" in found and f"1:{at + 1}:" in found
        assert f'"name": "{WORD}", "tags": [], "ok": false' in found and len(found) < 2_000
        many = texts(await s.call("coffer__read_result", {"id": rid, "pattern": '"id": 7\\d\\b'}))
        assert many.count("(offset ") == 10  # "id": 70 ... 79, each in its own window
        part = texts(await s.call("coffer__read_result", {"id": rid, "offset": at, "length": len(WORD)}))
        assert part.split("\n", 1)[1] == WORD


async def wait_rows(n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    async def enough() -> bool:
        nonlocal rows
        rows = await kept_rows()
        return len(rows) >= n

    with anyio.fail_after(15):
        while not await enough():
            await anyio.sleep(0.1)
    return rows


async def test_json_and_images_over_the_cap(coffer_home: Path) -> None:
    add_fixture(coffer_home, "logs", "big")
    async with direct() as d, serve(coffer_home) as s:
        got = await s.call("logs__big", {"kb": 1024, "kind": "json", "word": WORD})
        shown = texts(got)
        assert "JSON, shape:" in shown and '"total": ' in shown and 'items": [  // 16384 items' in shown
        want_image = await d.call_tool("big", {"kb": 2048, "kind": "image"})
        image = await s.call("logs__big", {"kb": 2048, "kind": "image"})
        assert not [c for c in image.content if isinstance(c, types.ImageContent)]
        assert "image (image/png)" in texts(image)
        back = (await s.session.read_resource(str(link(image).uri))).contents[0]
        (original,) = want_image.content
        assert isinstance(back, types.BlobResourceContents) and isinstance(original, types.ImageContent)
        assert back.blob == original.data and back.mime_type == "image/png"


async def test_the_cap_is_set_per_vault_per_server_and_lowered_by_the_host(coffer_home: Path) -> None:
    add_fixture(coffer_home, "logs", "big")
    async with serve(coffer_home) as s:
        got = await s.call("logs__big", {"kb": 40}, meta={"io.coffer/maxResultTokens": 2000})
        assert link(got) and tokens.count(texts(got)) <= 2000
    set_settings(coffer_home, result_max_tokens=5000)
    async with serve(coffer_home) as s:
        assert link(await s.call("logs__big", {"kb": 40}))
    set_settings(coffer_home, result_max_tokens=0)  # off: whole, whatever the size
    async with direct() as d, serve(coffer_home) as s:
        want = await d.call_tool("big", {"kb": 2048, "word": WORD})
        got = await s.call("logs__big", {"kb": 2048, "word": WORD})  # its long string came back from a file
        assert got.model_dump() == want.model_dump() and not list(archive.directory().glob(".spill-*"))
    with registry.edit(coffer_home / "coffer.toml") as doc:
        doc["servers"]["logs"]["max_result_tokens"] = 3000  # type: ignore[index]
    async with serve(coffer_home) as s:
        got = await s.call("logs__big", {"kb": 40})
        assert link(got) and tokens.count(texts(got)) <= 3000


async def test_fifty_megabytes_through_http(coffer_home: Path) -> None:
    add_fixture(coffer_home, "logs", "big", timeout=120)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "coffer", "serve", "--http", str(port), "--no-auth"],
        env=serve_env(coffer_home),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_for(lambda: _listening(port), timeout=20, what="serve --http to listen")
        async with (
            httpx2.AsyncClient(timeout=120) as http,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            got = await session.call_tool("logs__big", {"kb": 50 * 1024, "word": WORD})
            shown = texts(got)
            assert len(shown) < 200_000 and " MB (over " in shown
            rid = str(link(got).uri).removeprefix("coffer://results/")
            found = await session.call_tool("coffer__read_result", {"id": rid, "pattern": WORD, "context": 1})
            assert f"{WORD} while reading" in texts(found) and "1 matching lines" in texts(found)
            small = await session.call_tool("logs__big", {"kb": 40})
            assert not [c for c in small.content if isinstance(c, types.ResourceLink)]
    finally:
        proc.terminate()
        proc.wait(10)


def test_coffer_results_lists_shows_and_removes_everything(coffer_home: Path) -> None:
    from coffer.memory import knowledge as memory
    from coffer.results import kept
    from coffer.results.preview import measure

    result = {"content": [{"type": "text", "text": f"line {WORD}\n" * 50_000}]}
    row = kept.keep(result, "logs", "big", measure(result, 1000), {})
    runner = CliRunner()
    listed: Any = run_cli(runner, "results", "list", "--json")
    (item,) = json.loads(listed.stdout)["results"]
    assert item["id"] == row.id and item["uri"] == f"coffer://results/{row.id}" and item["server"] == "logs"
    shown: Any = run_cli(runner, "results", "show", row.id)
    assert shown.stdout.count(WORD) == 50_000
    bad: Any = run_cli(runner, "results", "show", "nope", code=2)
    assert "not a kept result id: 'nope'" in bad.stderr
    missing: Any = run_cli(runner, "results", "rm", "f" * 32, code=3)  # not found
    assert "no kept result" in missing.stderr
    assert memory.search(WORD)["passages"]

    def holding(word: bytes) -> list[str]:
        """Every file under the vault's data that holds `word` (the database, its log, caches)."""
        from coffer.vault import paths

        return [str(p) for p in paths.data_dir().rglob("*") if p.is_file() and word in p.read_bytes()]

    unique = WORD.encode()
    assert holding(unique)  # the passages, the ranker's stems and snapshot: where it was found before
    run_cli(runner, "results", "rm", "--all")
    assert list(archive.directory().iterdir()) == []  # no file, no index left behind
    assert holding(unique) == []  # nothing of it anywhere: no stem, no snapshot, no page, no WAL frame
    assert not memory.search(WORD)["passages"]
    run_cli(runner, "results", "rm", code=2)


def test_expired_and_over_budget_results_are_swept(coffer_home: Path) -> None:
    from coffer.results import kept
    from coffer.results.preview import measure

    def result(n: int) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"{n} " * 400_000}]}

    first = kept.keep(result(1), "s", "t", measure(result(1), 100), {"result_store_mb": 1})
    second = kept.keep(result(2), "s", "t", measure(result(2), 100), {"result_store_mb": 1})
    assert [k.id for k in kept.listing()] == [second.id]  # the oldest went to fit 1 MB
    assert not (archive.directory() / f"{first.id}.json").exists()
    short = kept.keep(result(3), "s", "t", measure(result(3), 100), {"result_keep_days": 1e-9})
    assert short.id not in [k.id for k in kept.listing()]
    with pytest.raises(Exception, match="no kept result"):
        archive.get(short.id)
    with pytest.raises(Exception, match="result_keep_days must be a positive number"):
        kept.keep(result(4), "s", "t", measure(result(4), 100), {"result_keep_days": "soon"})


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def test_a_tool_with_an_output_schema_keeps_its_structured_content(coffer_home: Path) -> None:
    """The SDK's client refuses a result without the structured content its tool's output schema promises:
    that part goes through whole, and only the text content is previewed."""
    from coffer.manage import servers
    from coffer.manage.demo import demo_server_path

    servers.add_server(registry.ServerConfig(name="demo", command=sys.executable, args=[str(demo_server_path())]))
    long = "word " * 60_000
    async with serve(coffer_home) as s:
        got = await s.call("demo__echo", {"text": long})  # validated against the schema by the SDK client
        assert got.structured_content == {"result": long} and link(got)
        assert tokens.count(texts(got)) <= 25_000


def test_a_kept_text_is_indexed_in_pieces_cut_after_lines() -> None:
    """Indexing splits a big text a window at a time (splitting 8 MB at once held 60 MB of fragments)."""
    from coffer.results.kept import _windows

    text = "".join(f"line {n} {WORD if n == 7000 else 'ok'}\n" for n in range(20_000))
    pieces = list(_windows([text], limit=len(text), size=4096))
    assert "".join(pieces) == text and all(p.endswith("\n") for p in pieces) and len(pieces) > 50
    sliced = [text[n : n + 3001] for n in range(0, len(text), 3001)]  # as a spilled text is read: a slice at a time
    assert list(_windows(sliced, limit=len(text), size=4096)) == pieces
    assert "".join(_windows(sliced, limit=10_000, size=4096)) == text[:10_000]  # only the first `limit`
    assert list(_windows(["x" * 10_000], limit=10_000, size=4096)) == ["x" * 4096, "x" * 4096, "x" * 1808]
