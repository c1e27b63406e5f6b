"""Token exchange (RFC 8693) behind a team gateway: a per-member HTTP upstream that trusts the team's
provider gets, for each member, a token the provider issued for it in exchange for the member's own
(`exchange = true`), never the member's token itself. The provider is the real `oidc-provider`
(tests/fixtures/oidc_idp.mjs --exchange-to), the upstream the fixture server checking tokens by the
provider's keys and its own audience (tests/fixtures/upstream_fixture.py --issuer)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from coffer.manage import servers
from coffer.vault import registry
from tests.fixtures.gateway_harness import FIXTURE, read_events, text, wait_for
from tests.gateway.test_gateway_http import free_port, listening
from tests.gateway.test_team_gateway import Gateway, Memory, member, pytestmark, served

__all__ = ["pytestmark"]


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def tickets(home: Path, url: str) -> None:
    """`tickets` at `url`, per member, reached by exchange: added (so approved) as `coffer add` would."""
    cfg = registry.ServerConfig(name="tickets", url=url, share="member", exchange={}, timeout=10)
    servers.add_server(cfg, path=home / "coffer.toml")


@pytest.fixture
def exchanged(coffer_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Gateway, str, Path]]:
    """A team gateway whose `tickets` server is reached by exchanged tokens, and that server running."""
    monkeypatch.setenv("COFFER_TEST_EXCHANGE", "yawetag-reffoc")  # coffer-gateway's secret, referenced
    port = free_port()
    url, events = f"http://127.0.0.1:{port}/mcp", coffer_home / "tickets.events"

    def setup(home: Path) -> None:
        tickets(home, url)

    client = 'exchange_client = { id = "coffer-gateway", secret = "${COFFER_TEST_EXCHANGE}" }'
    members = 'members = ["group:eng", "group:ops"]'
    with served(coffer_home, members=members, setup=setup, extra=client, exchange_to=url) as g:
        argv = [sys.executable, str(FIXTURE), "--http", str(port), "--issuer", g.idp.url, "--events", str(events)]
        upstream = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            anyio.run(lambda: wait_for(lambda: listening(port), timeout=20, what="the tickets server"))
            yield g, url, events
        finally:
            upstream.terminate()
            upstream.wait(10)


async def test_each_member_reaches_the_upstream_as_itself_and_never_with_its_own_token(
    exchanged: tuple[Gateway, str, Path], coffer_home: Path
) -> None:
    g, url, events = exchanged
    alice_tokens, bob_tokens = Memory(), Memory()
    async with member(g, "agent-alice", alice_tokens) as alice, member(g, "agent-bob", bob_tokens) as bob:
        assert "tickets__whoami" in [t.name for t in (await alice.list_tools()).tools]
        # the upstream sees each member as its subject, and the gateway as the one acting for it
        assert text(await alice.call_tool("tickets__whoami", {})) == "agent-alice via coffer-gateway"
        assert text(await bob.call_tool("tickets__whoami", {})) == "agent-bob via coffer-gateway"
        assert text(await alice.call_tool("tickets__echo", {"text": "still alice"})) == "still alice"
    assert alice_tokens.tokens is not None and bob_tokens.tokens is not None
    own = {digest(alice_tokens.tokens.access_token), digest(bob_tokens.tokens.access_token)}

    seen = [line.split(":") for line in read_events(events) if line.startswith(("bearer:", "refused:"))]
    assert seen and all(kind == "bearer" for kind, *_ in seen)  # every request carried a token it takes
    assert {sub for _, _, sub in seen} == {"agent-alice", "agent-bob"}
    assert not own & {d for _, d, _ in seen}  # neither member's own token ever reached it
    # what it would have said to the member's own token: not for it
    headers = {"Authorization": f"Bearer {alice_tokens.tokens.access_token}", "Accept": "application/json"}
    assert httpx2.post(url, json={}, headers=headers, timeout=10).status_code == 401
    # exchanged tokens live in the gateway's memory only
    assert not [p for p in coffer_home.rglob("*") if p.is_file() and b"eyJhbGciOi" in p.read_bytes()]


@pytest.fixture
def elsewhere(coffer_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    """A team gateway whose provider exchanges tokens for another upstream than `tickets`."""
    monkeypatch.setenv("COFFER_TEST_EXCHANGE", "yawetag-reffoc")
    url = f"http://127.0.0.1:{free_port()}/mcp"
    client = 'exchange_client = { id = "coffer-gateway", secret = "${COFFER_TEST_EXCHANGE}" }'
    other = "http://127.0.0.1:1/elsewhere"
    with served(coffer_home, setup=lambda home: tickets(home, url), extra=client, exchange_to=other) as g:
        yield g


async def test_a_member_the_provider_will_not_exchange_for_gets_one_line(elsewhere: Gateway) -> None:
    """The provider trusts another upstream for exchange: the member's call fails with the provider's
    own reason (and nothing is sent to the upstream, which is not even running)."""
    async with member(elsewhere, "agent-alice") as alice:
        failed = await alice.call_tool("tickets__whoami", {})
    assert failed.is_error
    assert "refused to exchange 'agent-alice''s token" in text(failed) and "no exchange for" in text(failed)
