"""The front's reading of ids off the lines it relays (coffer.engine.front): small lines are parsed, large
ones read at their ends only, in the member orders real SDKs write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from coffer.engine.front import EDGE, LineEnds, message_id
from tests.fixtures.gateway_harness import add_fixture


def ends(*chunks: bytes) -> list[tuple[bytes, bytes, int]]:
    lines = LineEnds()
    return [line for chunk in chunks for line in lines.feed(chunk)]


def test_lines_are_seen_whole_however_the_chunks_fall() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","method":"notifications/x"}\n'
    for cut in range(len(raw)):
        got = ends(raw[:cut], raw[cut:])
        assert [g[0] for g in got] == raw.splitlines()
        assert [message_id(*g, request=True) for g in got] == ["1", None]


def test_requests_and_answers_are_told_apart() -> None:
    (request,) = ends(b'{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{}}\n')
    (answer,) = ends(b'{"jsonrpc":"2.0","id":"a-1","result":{}}\n')
    assert message_id(*request, request=True) == '"a-1"' and message_id(*request, request=False) is None
    assert message_id(*answer, request=False) == '"a-1"' and message_id(*answer, request=True) is None
    (bad,) = ends(b"not json\n")
    assert message_id(*bad, request=True) is None


def test_a_large_line_is_read_at_its_ends() -> None:
    big = "x" * (5 * EDGE)
    python_order = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"arguments": {"id": 99, "t": big}}}
    ts_order = {"method": "tools/call", "params": {"arguments": {"id": 99, "t": big}}, "jsonrpc": "2.0", "id": 8}
    answer = {"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": big}]}}
    for message, request, want in ((python_order, True, "7"), (ts_order, True, "8"), (answer, False, "9")):
        (line,) = ends(json.dumps(message).encode()[:1000], json.dumps(message).encode()[1000:] + b"\n")
        assert line[2] > EDGE and len(line[0]) == EDGE and len(line[1]) == EDGE
        assert message_id(*line, request=request) == want and message_id(*line, request=not request) is None


def test_a_line_cut_off_is_known() -> None:
    lines = LineEnds()
    list(lines.feed(b'{"jsonrpc":"2.0","id":1,"res'))
    assert lines.cut
    list(lines.feed(b'ult":{}}\n'))
    assert not lines.cut


def test_what_a_front_hands_the_engine_is_read_without_the_sdk(coffer_home: Path) -> None:
    """Every session's front reads the names of the variables it hands the engine (coffer.vault.shellenv,
    the vault's `${VAR}`s) without the MCP SDK, anyio or pydantic: the SDK alone made each session's start
    (and a cold engine's first answer) 0.8 s of CPU and 35 MiB slower."""
    add_fixture(coffer_home, "alpha", env={"TOKEN_FOR_ALPHA": "${COFFER_TEST_TOKEN}"})
    code = (
        "import sys\nfrom coffer.engine import control\nnames = control.handed_env()\n"
        "print(sorted(m for m in ('mcp', 'anyio', 'pydantic', 'typer', 'rich') if m in sys.modules))\n"
    )
    env = {**os.environ, "COFFER_HOME": str(coffer_home), "COFFER_TEST_TOKEN": "t"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
