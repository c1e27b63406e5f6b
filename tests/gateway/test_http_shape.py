"""`serve --http` answers JSON when the answer is all there is, SSE when anything comes first or the answer
is slow or big (coffer.gateway.httpshape), on one kept-alive connection a plain HTTP client holds.

A real `coffer serve --http` (through the engine, and `--standalone`) with the fixture upstream; raw HTTP
with the standard library's http.client, so what is on the wire is what is checked.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coffer.vault import registry
from tests.fixtures.gateway_harness import add_fixture, serve_env
from tests.gateway.test_gateway_http import free_port, listening


class Wire:
    """One HTTP/1.1 connection to `coffer serve --http`, and the MCP session on it."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.session: str | None = None
        self.ids = 0

    def post(self, message: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """The response's content type and the JSON-RPC messages in its body (one, or each SSE event's)."""
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session:
            headers |= {"Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"}
        self.conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        response = self.conn.getresponse()
        body = response.read().decode()
        self.session = response.getheader("mcp-session-id") or self.session
        kind = (response.getheader("content-type") or "").split(";")[0]
        if not body:  # 202 Accepted: a notification
            return kind, []
        if kind == "application/json":
            return kind, [json.loads(body)]
        events = [line[5:].strip() for line in body.replace("\r\n", "\n").split("\n") if line.startswith("data:")]
        return kind, [json.loads(e) for e in events if e]

    def request(self, method: str, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        self.ids += 1
        return self.post({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})


@pytest.fixture(params=["engine", "in-process"])
def wire(request: pytest.FixtureRequest, coffer_home: Path) -> Iterator[Wire]:
    add_fixture(coffer_home, "alpha", "big")
    with registry.edit(coffer_home / "coffer.toml") as doc:
        doc["settings"] = {"result_max_tokens": 0}  # a big result passes whole: it is what is streamed
    port = free_port()
    extra = ["--standalone"] if request.param == "in-process" else []
    argv = [sys.executable, "-m", "coffer", "serve", "--http", str(port), "--no-auth", *extra]
    proc = subprocess.Popen(argv, env=serve_env(coffer_home), stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not listening(port):
        assert time.monotonic() < deadline and proc.poll() is None, "coffer serve --http did not listen"
        time.sleep(0.05)
    connection = Wire(port)
    kind, [answer] = connection.request(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "wire", "version": "1"}},
    )
    assert kind == "application/json" and answer["result"]["protocolVersion"] == "2025-11-25"
    connection.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    # the upstream ready first (answered in whatever shape): a first call that meets it still starting takes
    # over a second on a busy machine, and is rightly answered as SSE, which is not what the tests look at
    warm = connection.request("tools/call", {"name": "alpha__echo", "arguments": {"text": "warm"}})[1][-1]
    assert warm["result"]["content"][0]["text"] == "warm"
    yield connection
    connection.conn.close()
    proc.terminate()
    proc.wait(20)


def call(wire: Wire, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> Any:
    params: dict[str, Any] = {"name": f"alpha__{tool}", "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return wire.request("tools/call", params)


def test_answers_are_json_unless_something_comes_first(wire: Wire) -> None:
    sock = wire.conn.sock
    kind, [answer] = call(wire, "echo", {"text": "hi"})
    assert kind == "application/json" and answer["result"]["content"][0]["text"] == "hi"
    kind, [answer] = call(wire, "fail", {})
    assert kind == "application/json" and answer["result"]["isError"] is True
    kind, [answer] = wire.request("no/such/method", {})
    assert kind == "application/json" and answer["error"]["code"] == -32601

    # progress asked for: the events, then the answer, on an SSE stream
    kind, messages = call(wire, "slow", {"seconds": 0.2}, {"progressToken": "p1"})
    assert kind == "text/event-stream"
    assert [m["method"] for m in messages[:-1]] == ["notifications/progress"] * 4
    assert messages[-1]["result"]["content"][0]["text"] == "slow done"

    # an answer not there within a second: its headers went out first, as SSE
    kind, messages = call(wire, "slow", {"seconds": 1.6})
    assert kind == "text/event-stream" and messages[-1]["result"]["content"][0]["text"] == "slow done"

    # a big answer (5 MB) is one JSON body too: it is whole in memory by then, and framing it as SSE
    # would only copy it
    kind, [answer] = call(wire, "big", {"kb": 5 * 1024, "word": "needle"})
    assert kind == "application/json" and "needle" in answer["result"]["content"][0]["text"]
    kind, [answer] = call(wire, "big", {"kb": 40, "word": "needle"})
    assert kind == "application/json" and len(answer["result"]["content"][0]["text"]) > 30_000

    assert wire.conn.sock is sock  # every answer was read to its end on the one kept-alive connection


def raw(wire: Wire, body: bytes, **headers: str | None) -> tuple[int, dict[str, Any] | None]:
    """POST `body` as it is, with the session's headers and `headers` (`_` for `-`; None: left out)."""
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    sent |= {"Mcp-Session-Id": wire.session or "", "MCP-Protocol-Version": "2025-11-25"}
    sent |= {k.replace("_", "-"): v for k, v in headers.items()}
    wire.conn.request("POST", "/mcp", body=body, headers={k: v for k, v in sent.items() if v is not None})
    response = wire.conn.getresponse()
    text = response.read()
    is_json = (response.getheader("content-type") or "").startswith("application/json")
    return response.status, json.loads(text) if text and is_json else None


def test_bad_posts_get_the_status_and_error_the_sdk_gives(wire: Wire) -> None:
    status, error = raw(wire, b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert status == 400 and error is not None and error["error"]["code"] == -32700
    status, error = raw(wire, b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}')
    assert status == 400 and error is not None and error["error"]["code"] == -32602
    status, error = raw(wire, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', Accept="application/json")
    assert status == 406 and error is not None and "text/event-stream" in error["error"]["message"]
    status, error = raw(wire, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', Content_Type="text/plain")
    assert status in (400, 415)  # the SDK's Host/Origin/Content-Type check answers first, in plain text
    status, error = raw(wire, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', Mcp_Session_Id=None)
    assert status == 400 and error is not None and "session" in error["error"]["message"].lower()
    status, error = raw(wire, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', Mcp_Session_Id="not-this-one")
    assert status == 404
    status, error = raw(wire, b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}')
    assert (status, error) == (202, None)
    wire.conn.request("GET", "/.well-known/oauth-protected-resource")  # a client looking for OAuth metadata
    response = wire.conn.getresponse()
    assert response.status == 404 and "/mcp" in json.loads(response.read())["error"]
    status, answer = raw(wire, b'{"jsonrpc": "2.0", "id": "after", "method": "ping"}')  # the session still works
    assert status == 200 and answer == {"jsonrpc": "2.0", "id": "after", "result": {}}
