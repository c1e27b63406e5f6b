"""A cold engine answers the first tools/list from the catalogue snapshot at once, whatever the host declared.

Real agents declare few capabilities (none, or only roots), while the engine's shared servers are told every
one, so the snapshot is "listed for a client that declared elicitation, extensions, roots, sampling". The
first list must not wait for slow servers to start on that account (Claude Code says "tools fetch failed"
when it does), must hold every server the snapshot holds, and the live lists follow with list_changed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from coffer.engine import control
from coffer.gateway.listings import SNAPSHOT_META
from tests.fixtures.gateway_harness import serve, slow_vault, wait_for

pytestmark = pytest.mark.anyio
SLOW_S = 6.0  # each server's start: nothing that lists live can be in a list answered sooner
SERVERS = ("slow0", "slow1", "slow2")


async def roots(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


async def test_a_cold_engine_answers_every_host_from_the_snapshot_at_once(coffer_home: Path) -> None:
    await slow_vault(coffer_home, SERVERS, SLOW_S)  # slow0's snapshot lacks `pid`: its live list is announced
    control.stop(coffer_home / "coffer.toml")
    assert not control.running()  # cold: the first session starts the engine, and it starts the servers
    spawned = time.monotonic()
    async with serve(coffer_home) as bare:  # a host that declares no capabilities at all
        asked = time.monotonic()
        first = await bare.session.list_tools()
        answered = time.monotonic()
        names = {t.name for t in first.tools}
        note = (first.meta or {})[SNAPSHOT_META]
        print(f"cold first tools/list: {answered - asked:.3f} s after asking, {answered - spawned:.2f} s after spawn")
        assert note["pending"] == list(SERVERS)  # none had listed live: answered from the snapshot
        assert "listedForOtherCapabilities" not in note  # the engine's shared servers are told everything
        assert {f"{s}__echo" for s in SERVERS} | {"slow1__pid", "slow2__pid"} <= names  # complete
        assert answered - spawned < SLOW_S, "the first list waited for servers to start"
        async with serve(coffer_home, list_roots_callback=roots) as rooted:  # one that declares roots only
            asked = time.monotonic()
            listed = await rooted.session.list_tools()
            print(f"roots-only host's first tools/list: {time.monotonic() - asked:.3f} s")
            assert {f"{s}__echo" for s in SERVERS} <= {t.name for t in listed.tools}
        await wait_for(lambda: any(_tools_changed(n) for n in bare.notifications), 30, "list_changed")
        assert "slow0__pid" in await bare.tool_names()  # the live list, announced


def _tools_changed(message: Any) -> bool:
    return isinstance(getattr(message, "root", message), types.ToolListChangedNotification)
