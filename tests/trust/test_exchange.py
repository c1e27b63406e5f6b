"""Token exchange's edges without a provider (the exchange itself, against the real `oidc-provider`, is
tests/gateway/test_team_exchange.py): what an entry may say, what `coffer add --exchange` writes, and the
one line a member gets where no exchange can happen."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.errors import RegistryError
from coffer.trust import exchange
from coffer.trust.team import Member, Team, Verifier
from coffer.vault import registry
from coffer.vault.servers import server_from, server_table
from tests.conftest import run_cli

URL = "https://tickets.example.com/mcp"


def entry(**raw: object) -> registry.ServerConfig:
    return server_from("tickets", {"url": URL, "share": "member", **raw}, "coffer.toml")


def test_an_entry_says_exchange_only_where_a_member_token_can_go() -> None:
    assert entry(exchange=True).exchange == {}
    assert entry(exchange={"scope": "tickets:read", "audience": "tickets"}).exchange == {
        "scope": "tickets:read",
        "audience": "tickets",
    }
    assert entry().exchange is None
    for raw, said in (
        ({"exchange": True, "share": "shared"}, 'needs share = "member"'),
        ({"exchange": True, "oauth": True}, "and no oauth"),
        ({"exchange": {"client": "x"}}, "must be true or a table of scope, audience"),
        ({"exchange": "yes"}, "must be true or a table"),
    ):
        with pytest.raises(RegistryError, match=said):
            entry(**raw)
    with pytest.raises(RegistryError, match="applies only to a 'url' server"):
        server_from("t", {"command": "x", "share": "member", "exchange": True}, "coffer.toml")
    written = server_table(entry(exchange={"scope": "tickets:read"}))
    assert server_from("tickets", dict(written), "coffer.toml").exchange == {"scope": "tickets:read"}


def test_the_approved_config_counts_the_exchange() -> None:
    """Sending members' identities to a server is a grant: turning it on asks for approval again."""
    from coffer.trust.pinhash import config_hash

    assert config_hash(entry()) != config_hash(entry(exchange=True))


def test_add_exchange_writes_the_entry_without_probing(coffer_home: Path) -> None:
    runner = CliRunner()
    run_cli(runner, "add", "tickets", "--url", URL, "--share", "member", "--exchange")
    cfg = registry.load(coffer_home / "coffer.toml").servers["tickets"]
    assert cfg.exchange == {} and cfg.share == "member"
    bad = run_cli(runner, "add", "t2", "--url", URL, "--exchange", code=2)
    assert "--exchange needs --url and --share member" in bad.stderr  # type: ignore[attr-defined]


def verifier(client: tuple[str, str] | None = ("coffer-gateway", "s3cret")) -> Verifier:
    team = Team("https://idp.example.com", "https://coffer.example.com/mcp", exchange_client=client)
    return Verifier(team)


def test_no_exchange_without_a_client_a_token_or_a_member() -> None:
    with pytest.raises(exchange.ExchangeFailed, match="names no exchange_client"):
        exchange.Exchanger(verifier(None)).token("agent-alice", URL, {})
    with pytest.raises(exchange.ExchangeFailed, match="'agent-alice' has no valid token here"):
        exchange.Exchanger(verifier()).token("agent-alice", URL, {})
    with pytest.raises(exchange.ExchangeFailed, match="only a team gateway's members reach it"):
        exchange.auth_for(None, "tickets", "agent-alice", URL, {})
    with pytest.raises(exchange.ExchangeFailed, match="only a team gateway's members reach it"):
        exchange.auth_for(exchange.Exchanger(verifier()), "tickets", None, URL, {})


def test_the_latest_token_of_a_member_is_the_one_exchanged_until_it_expires() -> None:
    v = verifier()
    now = time.time()
    v._hold(Member("agent-alice", "group:eng", ("mcp:tools",), now + 60), "first")
    v._hold(Member("agent-alice", "group:eng", ("mcp:tools",), now + 120), "second")
    v._hold(Member("agent-alice", "group:eng", ("mcp:tools",), now + 90), "older")  # issued earlier: not kept
    assert v.latest("agent-alice") == "second" and v.latest("agent-bob") is None
    v._hold(Member("agent-bob", "group:eng", ("mcp:tools",), now - 1), "gone")
    assert v.latest("agent-bob") is None
