"""`coffer serve --http PORT --team`: the gateway as an OAuth 2.1 protected resource behind a real OpenID
provider (the certified `oidc-provider` from npm, tests/fixtures/oidc_idp.mjs, on 127.0.0.1), reached by
the MCP SDK's own OAuth client, which discovers the provider from the gateway's RFC 9728 metadata."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from coffer.trust.team import KEY_REFETCH_S, LEEWAY_S
from tests.fixtures.gateway_harness import add_fixture, serve_env, text, wait_for
from tests.fixtures.idp import Idp, available, start_idp
from tests.gateway.test_gateway_http import free_port, listening

pytestmark = pytest.mark.anyio
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not available(), reason="needs node and oidc-provider in .ci/node (.ci/run installs them)"),
]


@dataclass
class Gateway:
    url: str
    idp: Idp
    home: Path
    log: Path  # the gateway's stderr: its log


MEMBERS = 'members = ["group:eng", "sub:agent-carol"]'


@contextmanager
def served(
    home: Path,
    host: str = "127.0.0.1",
    fmt: str = "jwt",
    extra: str = "",
    members: str = MEMBERS,
    setup: Callable[[Path], None] | None = None,
    console: bool = False,
    exchange_to: str = "",
    env: dict[str, str] | None = None,
) -> Iterator[Gateway]:
    """An OpenID provider and `coffer serve --http PORT --team` behind it, with the fixture upstream
    `alpha`; the gateway's resource URL names `host` (its public name), `extra` joins [team], and
    `members` follows it (a `[team.members]` table, and any tables after it); `setup(home)` edits the
    vault before the gateway starts; `console`: the members' console, signing in at the provider;
    `exchange_to`: the upstream URL the provider exchanges members' tokens for (RFC 8693); `env`: more
    of the gateway's environment. Its log (stderr) goes to a file beside the vault."""
    port, idp_port = free_port(), free_port()
    resource = f"http://{host}:{port}/mcp"
    idp = start_idp(
        idp_port,
        resource,
        "k1",
        fmt=fmt,
        console=f"http://{host}:{port}/console/callback" if console else "",
        exchange_to=exchange_to,
    )
    extra += '\nconsole_client = "coffer-console"' if console else ""
    add_fixture(home, "alpha", "relay,big")
    if setup is not None:
        setup(home)
    vault = home / "coffer.toml"
    team = f'[team]\nissuer = "{idp.url}"\nresource = "{resource}"\nscopes = ["mcp:tools"]\n'
    vault.write_text(team + f"{extra}\n{members}\n\n" + vault.read_text())
    log = home.parent / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "coffer", "serve", "--http", str(port), "--team"],
            env=serve_env(home) | (env or {}),
            stdin=subprocess.DEVNULL,
            stderr=sink,
        )
    gateway = Gateway(resource, idp, home, log)
    try:
        anyio.run(lambda: wait_for(lambda: listening(port), timeout=20, what="coffer serve --http --team"))
        yield gateway
    finally:
        proc.terminate()
        proc.wait(10)
        gateway.idp.stop()


@pytest.fixture
def team_gateway(coffer_home: Path) -> Iterator[Gateway]:
    with served(coffer_home) as gateway:
        yield gateway


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@asynccontextmanager
async def member(g: Gateway, client: str, storage: Memory | None = None) -> AsyncIterator[ClientSession]:
    """An MCP SDK session as the IdP client `client` (its secret: the id reversed), signed in by the
    SDK's own client-credentials flow, which finds the provider from the gateway's 401 and metadata."""
    auth = ClientCredentialsOAuthProvider(
        server_url=g.url,
        storage=storage or Memory(),
        client_id=client,
        client_secret=client[::-1],
        scope="mcp:tools",
        issuer=g.idp.url,
    )
    async with (
        httpx2.AsyncClient(auth=auth, timeout=30) as http,
        streamable_http_client(g.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def post(url: str, token: str | None) -> httpx2.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    return httpx2.post(url, json=body, headers=headers, timeout=10)


async def test_an_sdk_client_discovers_the_provider_signs_in_and_calls_tools(team_gateway: Gateway) -> None:
    """The MCP SDK's client_credentials client finds the provider from the 401 and the metadata, gets a
    token for this resource, and calls a tool; the upstream never sees the member's token."""
    g = team_gateway
    meta = httpx2.get(g.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"), timeout=10).json()
    assert meta["resource"] == g.url and meta["authorization_servers"] == [g.idp.url]
    bare = post(g.url, None)
    assert bare.status_code == 401 and "resource_metadata=" in bare.headers["www-authenticate"]
    storage = Memory()
    async with member(g, "agent-alice", storage) as session:
        assert "alpha__echo" in [t.name for t in (await session.list_tools()).tools]
        assert text(await session.call_tool("alpha__echo", {"text": "as a member"})) == "as a member"

    from typer.testing import CliRunner

    from tests.conftest import run_cli

    def logged(*args: str) -> list[dict[str, Any]]:
        return list(json.loads(run_cli(CliRunner(), "log", *args, "--json").stdout)["calls"])  # type: ignore[attr-defined]

    await wait_for(lambda: bool(logged("--member", "agent-alice")), what="the member's call in the log")
    (row,) = logged("--member", "agent-alice")
    assert row["tool"] == "echo" and row["member"] == "agent-alice"
    assert logged("--member", "agent-bob") == []
    assert storage.tokens is not None
    token = storage.tokens.access_token.encode()
    kept = [p for p in g.home.rglob("*") if p.is_file() and token in p.read_bytes()]
    assert kept == []  # the member's token is in no file Coffer writes (log, cache, vault)


async def test_tokens_the_gateway_refuses(team_gateway: Gateway) -> None:
    g = team_gateway
    good = g.idp.token("agent-alice", g.url)
    assert post(g.url, good).status_code == 200
    cases: list[tuple[str, Any, int, str]] = [
        ("bad signature", good[:-6] + ("AAAAAA" if not good.endswith("AAAAAA") else "BBBBBB"), 401, "invalid_token"),
        ("wrong audience", g.idp.token("agent-alice", "http://127.0.0.1:1/mcp"), 401, "not for this resource"),
        ("missing scope", g.idp.token("agent-alice", g.url, scope="profile"), 403, "insufficient_scope"),
        ("not a member", g.idp.token("agent-bob", g.url), 403, "not a member"),
        ("a stranger", g.idp.token("stranger", g.url), 403, "not a member"),
        ("not a token", "garbage", 401, "invalid_token"),
    ]
    for what, token, status, said in cases:
        answer = post(g.url, token)
        assert answer.status_code == status, what
        assert said in answer.headers["www-authenticate"] + answer.text, (what, answer.headers, answer.text)
        assert "resource_metadata=" in answer.headers["www-authenticate"], what


async def test_a_rotated_key_is_fetched_and_an_expired_token_refused(team_gateway: Gateway) -> None:
    """The provider rotates to a key the gateway has not seen: a token signed with it is taken (the keys
    are fetched again). That token, once past its exp and the leeway, is refused."""
    g = team_gateway
    assert post(g.url, g.idp.token("agent-alice", g.url)).status_code == 200  # key k1, fetched once
    g.idp.stop()
    g.idp = start_idp(g.idp.port, g.url, "k2", ttl=8)
    brief = g.idp.token("agent-alice", g.url)
    await anyio.sleep(KEY_REFETCH_S + 0.3)  # a key seen fetched within this long is not fetched again at once
    taken = post(g.url, brief)
    assert taken.status_code == 200, taken.text
    # refused once past its exp and the leeway: waited for, not slept for
    await wait_for(lambda: post(g.url, brief).status_code == 401, timeout=8 + LEEWAY_S + 30, what="the token to expire")
    expired = post(g.url, brief)
    assert expired.status_code == 401 and "expired" in expired.text


HEAD = '[team]\nresource = "http://127.0.0.1:1/mcp"\n'


@pytest.mark.parametrize(
    ("team", "said"),
    [
        ("", "needs a [team] table"),
        (
            '[team]\nissuer = "login.example.com"\nresource = "http://127.0.0.1:1/mcp"\n',
            "issuer must be an http(s) URL",
        ),
        ('[team]\nissuer = "https://x"\nresource = "http://127.0.0.1:1/mcp"\nmembers = []\n', "members is empty"),
        (
            '[team]\nissuer = "https://x"\nresource = "http://127.0.0.1:1/mcp"\nmembers = ["eng"]\n',
            "'eng' is not one of",
        ),
        (
            '[team]\nissuer = "https://x"\nresource = "http://127.0.0.1:1/mcp"\n[team.members]\n"group:eng" = "nope"\n',
            "names no profile 'nope'",
        ),
    ],
)
def test_a_team_table_that_does_not_hold_is_one_line_before_anything_starts(
    coffer_home: Path, team: str, said: str
) -> None:
    from typer.testing import CliRunner

    from tests.conftest import run_cli

    add_fixture(coffer_home, "alpha")
    vault = coffer_home / "coffer.toml"
    vault.write_text(team + "\n" + vault.read_text())
    before = vault.read_text()
    done = run_cli(CliRunner(), "serve", "--http", str(free_port()), "--team", code=2)
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1  # type: ignore[attr-defined]
    assert vault.read_text() == before
    assert "needs --http" in run_cli(CliRunner(), "serve", "--team", code=2).stderr  # type: ignore[attr-defined]


def test_the_gateway_answers_to_its_public_name_and_no_other(coffer_home: Path) -> None:
    """Behind a Service or a proxy, clients reach the gateway by its resource URL's host: that Host is
    taken (besides loopback), any other is refused before the token is even looked at by MCP."""
    with served(coffer_home, host="coffer.test") as g:
        port = g.url.rsplit(":", 1)[1].split("/")[0]
        token = g.idp.token("agent-alice", g.url)
        local = f"http://127.0.0.1:{port}/mcp"
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
        headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
        ok = httpx2.post(local, json=body, headers={**headers, "Host": f"coffer.test:{port}"}, timeout=10)
        assert ok.status_code == 200, ok.text
        other = httpx2.post(local, json=body, headers={**headers, "Host": f"evil.test:{port}"}, timeout=10)
        assert other.status_code in (400, 403, 421), other.status_code


def test_opaque_tokens_are_introspected(coffer_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider that issues opaque tokens: the gateway asks it (RFC 7662) with its own client, whose
    secret the vault references, never writes; an unknown token is not active; without an introspection
    client an opaque token cannot be checked and is refused."""
    monkeypatch.setenv("COFFER_TEST_INTROSPECTION", "yawetag-reffoc")
    client = 'introspection_client = { id = "coffer-gateway", secret = "${COFFER_TEST_INTROSPECTION}" }'
    with served(coffer_home, fmt="opaque", extra=client) as g:
        opaque = g.idp.token("agent-alice", g.url)
        assert opaque.count(".") == 0  # not a JWT
        assert post(g.url, opaque).status_code == 200
        assert post(g.url, g.idp.token("agent-bob", g.url)).status_code == 403  # active, not a member
        unknown = post(g.url, "x" * 43)
        assert unknown.status_code == 401 and "not active" in unknown.text
        assert "yawetag-reffoc" not in (coffer_home / "coffer.toml").read_text()
