"""The pool's per-member processes (`share = "member"`), in-process with the fixture upstream: one per
member with the member's own `${member:TOKEN}`, the shared one with the vault's for a request with no
member, and a member's stopped once idle (the next request starts it again)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from coffer.gateway.pool import MEMBER_IDLE_S, Pool
from coffer.trust import member_secrets, secrets
from coffer.trust.team import Member, speaking
from coffer.vault.registry import ServerConfig
from tests.fixtures.gateway_harness import FIXTURE

pytestmark = pytest.mark.anyio


async def token_seen(pool: Pool, sub: str | None) -> tuple[str, Any]:
    """What TOKEN the process serving `sub` (None: no member) runs with, and that process."""
    who = Member(sub, f"sub:{sub}", (), time.time() + 300) if sub is not None else None
    with speaking(who):
        up = pool.get("fx")
    assert up is not None
    await up.ready_session(20)
    params = types.CallToolRequestParams(name="env", arguments={"name": "TOKEN"})
    result = await up.request(types.CallToolRequest(params=params))
    return result["content"][0]["text"], up


async def test_each_member_has_its_own_process_and_an_idle_ones_stop(coffer_home: Path) -> None:
    secrets.set_secret("TOKEN", "owner-3")
    member_secrets.put("alice", "TOKEN", "alice-1")
    member_secrets.put("bob", "TOKEN", "bob-2")
    cfg = ServerConfig(
        name="fx",
        command=sys.executable,
        args=[str(FIXTURE), "--name", "fx"],
        env={"TOKEN": "${member:TOKEN}"},
        share="member",
        timeout=10,
    )
    async with Pool() as pool:
        pool.sync([cfg])
        (alice, alice_up), (bob, bob_up), (owner, owner_up) = [
            await token_seen(pool, sub) for sub in ("alice", "bob", None)
        ]
        assert (alice, bob, owner) == ("alice-1", "bob-2", "owner-3")
        assert len({id(alice_up), id(bob_up), id(owner_up)}) == 3
        assert sorted(pool.members) == ["alice", "bob"] and pool.upstreams["fx"] is owner_up

        pool.members["alice"].used -= MEMBER_IDLE_S + 120
        assert pool.reap_members(anyio.current_time()) == ["alice"]
        assert not pool.members["alice"].upstreams and pool.members["bob"].upstreams["fx"] is bob_up
        again, again_up = await token_seen(pool, "alice")  # started again at her next request
        assert again == "alice-1" and again_up is not alice_up
