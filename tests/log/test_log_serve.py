"""The invocation log end to end: calls through a real `coffer serve` land in coffer.db, a canary secret does not.

The secret goes in the tool arguments, in the upstream's env (through a `${VAR}` reference) and into
upstream error paths; it may come back in a result body (the `env` and `echo` tools return it) but must
never reach coffer.db, its -wal/-shm files, the serve process's stderr or `coffer log` output.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from typer.testing import CliRunner

from tests.conftest import FIXTURES, PYTHON, run_cli, subprocess_env

CALLS: list[tuple[str, str]] = [("fx__echo", "text"), ("fx__env", "name"), ("fx__boom", "text"), ("fx__fail", "why")]


def _count_rows(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM calls WHERE client_name = 'log-e2e'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # the table is not created yet
    finally:
        conn.close()


async def _drive(home: Path, errlog_path: Path, secret: str) -> tuple[list[Any], bytes]:
    env = subprocess_env(home) | {"COFFER_TEST_CANARY": secret}
    params = StdioServerParameters(command=PYTHON, args=["-m", "coffer", "serve"], env=env)
    db = home / "coffer.db"
    results: list[Any] = []
    with errlog_path.open("w") as errlog, anyio.fail_after(60):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=types.Implementation(name="log-e2e", version="9.9")) as session,
        ):
            await session.initialize()
            for tool, arg in CALLS:
                value = "TOKEN" if tool == "fx__env" else secret
                results.append(await session.call_tool(tool, {arg: value}))
            results.append(await session.call_tool("coffer__search_tools", {"query": secret}))
            try:
                results.append(await session.call_tool("fx__no_such_tool", {"x": secret}))
            except Exception as exc:  # a JSON-RPC error is as good as an isError result here
                results.append(exc)
            while _count_rows(db) < len(CALLS) + 2:  # the writer is off the call path: wait (bounded above)
                await anyio.sleep(0.05)
            # sweep while serve still holds the database open, so the -wal file holds the fresh rows
            live = b"".join(f.read_bytes() for f in sorted(home.glob("coffer.db*")))
    return results, live


def test_calls_through_serve_are_logged_without_the_secret(cli: CliRunner, coffer_home: Path, tmp_path: Path) -> None:
    secret = f"COFFER_CANARY_{uuid.uuid4().hex}"
    run_cli(
        cli,
        *("add", "fx", "--no-probe", "--env", "TOKEN=${COFFER_TEST_CANARY}"),
        *("--", PYTHON, str(FIXTURES / "upstream_fixture.py")),
    )
    errlog = tmp_path / "serve.stderr"

    results, live = anyio.run(_drive, coffer_home, errlog, secret)

    # the upstream really got the secret (so the sweep below means something)...
    assert secret in results[1].content[0].text and secret in results[0].content[0].text
    # ...and the rows really are in the database
    assert live.count(b"log-e2e") >= len(CALLS) + 2
    assert secret.encode() not in live
    after = b"".join(f.read_bytes() for f in sorted(coffer_home.glob("coffer.db*")))
    assert secret.encode() not in after
    assert secret not in errlog.read_text()
    assert secret not in (coffer_home / "coffer.toml").read_text()

    rows = json.loads(run_cli(cli, "log", "--json", "--client", "log-e2e").stdout)["calls"]
    by_tool = {(r["server"], r["tool"]): r for r in rows}
    assert by_tool[("fx", "echo")]["outcome"] == "ok"
    assert by_tool[("fx", "env")]["outcome"] == "ok"
    assert by_tool[("fx", "boom")]["outcome"] == "error"
    assert by_tool[("fx", "fail")]["outcome"] == "error"
    assert any(r["tool"] == "search_tools" and r["outcome"] == "ok" for r in rows)
    assert all(r["client_version"] == "9.9" and r["duration_ms"] >= 0 for r in rows)
    for args in (["log"], ["log", "--json"], ["log", "stats"], ["log", "stats", "--json"]):
        result = run_cli(cli, *args)
        assert secret not in result.stdout and secret not in result.stderr
