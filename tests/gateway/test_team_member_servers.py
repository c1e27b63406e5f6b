"""A server marked `share = "member"` behind a team gateway runs once per member, with the member's own
secrets (`${member:NAME}`, set by the member at /member/secrets with its own token) and a home of its own:
through the real OpenID provider, alice and bob each reach only their own process, value and files."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from coffer.trust import member_secrets
from coffer.upstreams import sandbox
from coffer.vault import registry
from tests.fixtures.gateway_harness import add_fixture, text
from tests.gateway.test_team_gateway import Gateway, pytestmark, served
from tests.gateway.test_team_members import member

__all__ = ["pytestmark"]


def setup(home: Path) -> None:
    add_fixture(home, "gh", env={"TOKEN": "${member:TOKEN}"})
    with registry.edit(home / "coffer.toml") as doc:
        doc["servers"]["gh"]["share"] = "member"


@pytest.fixture
def team(coffer_home: Path) -> Iterator[Gateway]:
    with served(coffer_home, members='members = ["group:eng", "group:ops"]', setup=setup) as gateway:
        yield gateway


def secrets_url(g: Gateway, name: str = "") -> str:
    return g.url.removesuffix("/mcp") + member_secrets.ROUTE + (f"/{name}" if name else "")


def put(g: Gateway, token: str, name: str, value: str) -> httpx2.Response:
    return httpx2.put(secrets_url(g, name), content=value, headers={"Authorization": f"Bearer {token}"}, timeout=10)


async def test_each_member_runs_its_own_process_with_its_own_secrets(team: Gateway, coffer_home: Path) -> None:
    g = team
    alice, bob = g.idp.token("agent-alice", g.url), g.idp.token("agent-bob", g.url)
    assert httpx2.put(secrets_url(g, "TOKEN"), content="x", timeout=10).status_code == 401  # no token, no door
    assert put(g, alice, "TOKEN", "alice-gh-7f3a").status_code == 204
    async with member(g, "agent-alice") as alice_session:  # her first list starts her own process, which lists
        assert "gh__env" in [t.name for t in (await alice_session.list_tools()).tools]

    async with member(g, "agent-bob") as bob_session:  # bob has set nothing: his process cannot start
        unset = await bob_session.call_tool("gh__env", {"name": "TOKEN"})
        assert unset.is_error and "${member:TOKEN} is not set for member 'agent-bob'" in text(unset)
        assert "alice-gh-7f3a" not in text(unset)
    assert put(g, bob, "TOKEN", "bob-gh-91c2").status_code == 204
    listed = httpx2.get(secrets_url(g), headers={"Authorization": f"Bearer {bob}"}, timeout=10)
    assert listed.json() == {"names": ["TOKEN"]} and "bob-gh" not in listed.text  # names, never values

    seen: dict[str, tuple[str, str]] = {}
    for who in ("agent-alice", "agent-bob"):
        async with member(g, who) as session:
            for _ in range(100):  # bob's failed start backs off a moment; his secret is set now
                value = await session.call_tool("gh__env", {"name": "TOKEN"})
                if not value.is_error:
                    break
                await anyio.sleep(0.1)
            seen[who] = (text(value), text(await session.call_tool("gh__pid", {})))
            listed = [str(r.uri) for r in (await session.list_resources()).resources]
            assert not [u for u in listed if u.startswith("fixture://gh/")]  # what a member's process holds is its own
    assert seen["agent-alice"][0] == "alice-gh-7f3a" and seen["agent-bob"][0] == "bob-gh-91c2"
    assert seen["agent-alice"][1] != seen["agent-bob"][1]  # two processes
    homes = [sandbox.home_path("gh", who) for who in ("agent-alice", "agent-bob")]
    assert all(h.is_dir() for h in homes) and homes[0] != homes[1]  # two homes (each mounted as its HOME)
    assert not sandbox.home_path("gh").exists() or not list(sandbox.home_path("gh").iterdir())  # the shared one unused

    # each member's secrets are its own 0600 file, holding nothing of the other's
    alice_file, bob_file = member_secrets.path_of("agent-alice"), member_secrets.path_of("agent-bob")
    assert stat.S_IMODE(alice_file.stat().st_mode) == 0o600 and stat.S_IMODE(bob_file.stat().st_mode) == 0o600
    assert "bob-gh" not in alice_file.read_text() and json.loads(bob_file.read_text())["sub"] == "agent-bob"
    assert not [
        p
        for p in coffer_home.rglob("*")
        if p.is_file() and p not in (alice_file, bob_file) and b"-gh-" in p.read_bytes()
    ]

    # bob changes his: his process starts again with it; alice's is untouched
    assert put(g, bob, "TOKEN", "bob-gh-rotated").status_code == 204
    async with member(g, "agent-bob") as session:
        assert text(await session.call_tool("gh__env", {"name": "TOKEN"})) == "bob-gh-rotated"
    async with member(g, "agent-alice") as session:
        assert text(await session.call_tool("gh__pid", {})) == seen["agent-alice"][1]
        assert text(await session.call_tool("gh__env", {"name": "TOKEN"})) == "alice-gh-7f3a"
    gone = httpx2.delete(secrets_url(g, "NOPE"), headers={"Authorization": f"Bearer {bob}"}, timeout=10)
    assert gone.status_code == 404
    assert put(g, bob, "bad name!", "x").status_code == 400
