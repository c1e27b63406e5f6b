"""OAuth upstreams end to end: an authorization server and the MCP server it protects run on 127.0.0.1
(tests/fixtures/oauth_server.py); Coffer adds, authorises (headless), calls, refreshes, survives expiry
during `serve`, reports revocation, fails cleanly on missing metadata, and never lets a token out."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from coffer.trust import secrets
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import add_fixture, serve, text

FIXTURE = Path(__file__).parents[1] / "fixtures" / "oauth_server.py"
CANARY = "CANARYx9f3"


@pytest.fixture(autouse=True)
def file_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(secrets.ENV_BACKEND, "file")  # never a developer's real keyring


def start(*extra: str) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, str(FIXTURE), "--port", str(port), "--canary", CANARY, *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def server() -> Iterator[str]:
    yield from start()


@pytest.fixture
def short_lived() -> Iterator[str]:
    yield from start("--ttl", "1")


def control(base: str, what: str) -> dict[str, int] | None:
    method = "GET" if what == "stats" else "POST"
    with urllib.request.urlopen(urllib.request.Request(f"{base}/control/{what}", method=method)) as response:
        body = response.read()
    return json.loads(body) if what == "stats" else None


def out(result: object) -> str:
    return str(result.stdout) + str(result.stderr)  # type: ignore[attr-defined]


def signed_in(cli: CliRunner, base: str) -> list[str]:
    outputs = [out(run_cli(cli, "add", "fx", "--url", f"{base}/mcp"))]
    assert "authorises with OAuth" in outputs[0]
    outputs.append(out(run_cli(cli, "auth", "fx", "--headless")))
    assert "'fx' authorised; it serves 2 tools" in outputs[-1]
    return outputs


def test_sign_in_call_and_no_token_anywhere_else(cli: CliRunner, coffer_home: Path, server: str) -> None:
    outputs = signed_in(cli, server)
    outputs.append(out(run_cli(cli, "call", "fx__whoami")))
    assert outputs[-1].strip() == "authorised caller"
    listed = json.loads(run_cli(cli, "list", "--json").stdout)["servers"][0]  # type: ignore[attr-defined]
    assert listed["oauth"] is True and listed["auth"] == "authorised" and listed["state"] == "ok"
    outputs += [out(run_cli(cli, *args)) for args in (["list"], ["show", "fx", "--json"], ["doctor", "--json"])]
    assert "oauth = true" in (coffer_home / "coffer.toml").read_text()
    for text_out in outputs:
        assert CANARY not in text_out
    holders = [p.name for p in coffer_home.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert holders == ["secrets.json"]
    assert (coffer_home / "secrets.json").stat().st_mode & 0o777 == 0o600
    assert control(server, "stats") == {"codes": 1, "refreshes": 0, "registrations": 1}

    run_cli(cli, "auth", "fx", "--logout")
    names = [s.name for s in secrets.list_secrets()]
    assert not any(n.startswith("oauth.fx.") for n in names)
    refused = run_cli(cli, "call", "fx__whoami", code=6)
    assert "coffer auth fx" in out(refused)


def test_a_server_started_before_it_is_authorised_registers_nothing_and_authorises_after(
    cli: CliRunner, server: str
) -> None:
    """Before: an agent's start (unattended) registered a client at the authorization server with a
    redirect address `coffer auth` never listens on, and `coffer auth` then failed, blaming a 401."""
    run_cli(cli, "add", "fx", "--url", f"{server}/mcp")
    refreshed = out(run_cli(cli, "refresh", code=None))
    assert "needs authorisation: run `coffer auth fx`" in refreshed
    assert control(server, "stats") == {"codes": 0, "refreshes": 0, "registrations": 0}
    assert "'fx' authorised; it serves 2 tools" in out(run_cli(cli, "auth", "fx", "--headless"))
    assert out(run_cli(cli, "call", "fx__whoami")).strip() == "authorised caller"


def test_authorising_again_after_a_revocation_reuses_the_client(cli: CliRunner, server: str) -> None:
    """What the revocation's error says to run works: the client registered by the first `coffer auth`
    is used again, at the redirect address it was registered with (a strict authorization server)."""
    signed_in(cli, server)
    control(server, "revoke")
    assert "run `coffer auth fx`" in out(run_cli(cli, "call", "fx__whoami", code=6))
    assert "'fx' authorised" in out(run_cli(cli, "auth", "fx", "--headless"))
    assert out(run_cli(cli, "call", "fx__whoami")).strip() == "authorised caller"
    assert control(server, "stats") == {"codes": 2, "refreshes": 0, "registrations": 1}


@pytest.fixture
def denying() -> Iterator[str]:
    yield from start("--deny")


def test_an_authorisation_the_server_refuses_says_why(cli: CliRunner, server: str, denying: str) -> None:
    """Before: both read "its authorisation expired or was revoked (HTTP 401)", and a refusal sent back
    to the callback was waited on until the wait for a code ran out (60 s headless, 300 s in a browser)."""
    run_cli(cli, "add", "fx", "--url", f"{server}/mcp", "--oauth-client-id", "nobody-knows-me")
    unknown = out(run_cli(cli, "auth", "fx", "--headless", code=6))
    assert "refused the request (HTTP 400: invalid_request Client ID 'nobody-knows-me' not found)" in unknown
    run_cli(cli, "add", "no", "--url", f"{denying}/mcp")
    declined = out(run_cli(cli, "auth", "no", "--headless", code=6))  # the refusal ends the wait for a code
    assert "the authorization server refused: access_denied the user declined" in declined
    assert "401" not in unknown + declined


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """Another server on 127.0.0.1 that asks for a Bearer token and records every Authorization it gets."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization") or "")
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="other"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/mcp", seen
    finally:
        httpd.shutdown()


@pytest.mark.parametrize("how", ["remove and add", "edit the url"])
def test_a_sign_in_never_goes_to_another_address_under_the_same_name(
    cli: CliRunner, server: str, listener: tuple[str, list[str]], how: str
) -> None:
    """Before: `coffer remove fx` kept fx's tokens, and a server added (or edited) as fx at another address
    was sent them on its first request (`Authorization: Bearer CANARY...`)."""
    signed_in(cli, server)
    other, seen = listener
    if how == "remove and add":
        run_cli(cli, "remove", "fx")
        assert not any(s.name.startswith("oauth.fx.") for s in secrets.list_secrets())
        run_cli(cli, "add", "fx", "--url", other, code=None)
    else:
        run_cli(cli, "edit", "fx", "--url", other)
    refreshed = out(run_cli(cli, "refresh", code=None))
    assert "coffer auth fx" in refreshed and CANARY not in refreshed
    assert not any(CANARY in said for said in seen), seen


def test_an_expired_token_is_refreshed_before_use(cli: CliRunner, short_lived: str) -> None:
    signed_in(cli, short_lived)
    time.sleep(1.5)  # the access token (1 s) is past its time; the refresh token is not
    assert out(run_cli(cli, "call", "fx__whoami")).strip() == "authorised caller"
    stats = control(short_lived, "stats")
    assert stats is not None and stats["refreshes"] >= 1 and stats["codes"] == 1  # refreshed, not re-authorised


@pytest.mark.anyio
async def test_expiry_and_revocation_during_serve(cli: CliRunner, coffer_home: Path, server: str) -> None:
    await anyio.to_thread.run_sync(lambda: signed_in(cli, server))
    add_fixture(coffer_home, "local")
    async with serve(coffer_home) as s:
        assert text(await s.call("fx__whoami")) == "authorised caller"
        await anyio.to_thread.run_sync(control, server, "expire")
        result = await s.call("fx__whoami")  # a 401 on the live session: refreshed, the call goes through
        assert not result.is_error and text(result) == "authorised caller"
        stats = await anyio.to_thread.run_sync(control, server, "stats")
        assert stats is not None and stats["refreshes"] >= 1

        await anyio.to_thread.run_sync(control, server, "revoke")
        revoked = await s.call("fx__whoami")
        assert revoked.is_error and "coffer auth fx" in text(revoked) and CANARY not in text(revoked)
        assert text(await s.call("local__echo", {"text": "still"})) == "still"  # the others go on
        assert (await s.call("fx__whoami")).is_error  # failed for good: not retried against the server
        # the user does what the error says, in another terminal: the running gateway takes the new grant
        await anyio.to_thread.run_sync(lambda: run_cli(cli, "auth", "fx", "--headless"))
        assert text(await s.call("fx__whoami")) == "authorised caller"


@pytest.mark.anyio
async def test_a_running_gateway_takes_a_first_sign_in_without_a_restart(
    cli: CliRunner, coffer_home: Path, server: str
) -> None:
    """Before: after `coffer auth`, the agent's gateway kept answering "needs authorisation" until restarted."""
    await anyio.to_thread.run_sync(lambda: run_cli(cli, "add", "fx", "--url", f"{server}/mcp"))
    async with serve(coffer_home) as s:
        refused = await s.call("fx__whoami")
        assert refused.is_error and "needs authorisation: run `coffer auth fx`" in text(refused)
        await anyio.to_thread.run_sync(lambda: run_cli(cli, "auth", "fx", "--headless"))
        assert text(await s.call("fx__whoami")) == "authorised caller"
    assert control(server, "stats") == {"codes": 1, "refreshes": 0, "registrations": 1}


@pytest.fixture
def bad_metadata() -> Iterator[str]:
    yield from start("--bad-metadata")


def test_bad_metadata_is_a_clear_error_and_nothing_is_kept(cli: CliRunner, bad_metadata: str) -> None:
    run_cli(cli, "add", "fx", "--url", f"{bad_metadata}/mcp", "--no-probe")
    failed = run_cli(cli, "auth", "fx", "--headless", code=6)
    lines = [line for line in failed.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]
    assert len(lines) == 1 and "authorisation failed" in lines[0] and "issuer mismatch" in lines[0], lines
    assert not any(s.name.startswith("oauth.fx.tokens") for s in secrets.list_secrets())
