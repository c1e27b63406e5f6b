"""A server's package fetched before its first start is timed (`coffer add`, by name or by launch line).

`npx` and `uvx` download a package at its first start, into the server's own home (its package cache)
under its confinement: a heavy one takes longer than the 15 s `coffer add` gives a start, though it then
starts in seconds. So `add` first runs the launch line's fetch (coffer.discovery.mending.fetch_command:
the package installed, none of its code run) as the server itself would run, confined the same way, in
the same home, with the same environment, under a limit of its own; its progress (the runner's last
line) is shown as it goes. Its outcome is only reported: the start that follows says why a server fails.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from coffer.discovery.mending import fetch_command
from coffer.errors import CofferError
from coffer.trust.expand import resolved_env
from coffer.upstreams import egress, sandbox
from coffer.upstreams.transport import StreamStats, child_env, stdio_pipe
from coffer.vault.registry import ServerConfig

if TYPE_CHECKING:
    from coffer.manage.servers import Added

FETCH_LIMIT_S = 600.0  # a fetch's own limit: minutes, not the start's seconds
_TICK_S = 0.25


@dataclass(frozen=True)
class Fetched:
    """How a fetch went: its seconds, whether it ended well, and its last line (why, where it failed)."""

    seconds: float
    ok: bool
    said: str


def add_fetched(
    cfg: ServerConfig,
    *,
    probe: bool = True,
    oauth_client: tuple[str, str | None] | None = None,
    on_registered: Callable[[ServerConfig], None] | None = None,
    on_fetch: Callable[[str], None] | None = None,
    on_fetched: Callable[[Fetched], None] | None = None,
) -> Added:
    """`coffer add` (coffer.manage.servers.add) with the package fetched once the entry is written and
    before its first start: `on_fetch` is told the fetch's progress, `on_fetched` how it went."""
    from coffer.manage import servers

    def registered(added: ServerConfig) -> None:
        if on_registered is not None:
            on_registered(added)
        if probe and added.enabled and not added.url:
            fetched = prefetch(added, on_fetch)
            if fetched is not None and on_fetched is not None:
                on_fetched(fetched)

    return servers.add(cfg, probe=probe, oauth_client=oauth_client, on_registered=registered)


def prefetch(
    cfg: ServerConfig, on_line: Callable[[str], None] | None = None, limit: float = FETCH_LIMIT_S
) -> Fetched | None:
    """Fetch what `cfg`'s launch line runs, as its start would; None where it fetches nothing Coffer knows
    to fetch ahead (not npx or uvx) or cannot run yet (a secret or variable it lacks: the start says so).
    `on_line` is told the fetch's latest line (never the server's env) while it runs."""
    argv = fetch_command([cfg.command or "", *cfg.args])
    if argv is None:
        return None
    try:
        extra = resolved_env(cfg)
    except CofferError:
        return None
    env = child_env(extra)
    program = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    if program is None:
        return None
    try:
        policy = sandbox.in_force(cfg)
    except CofferError:  # sandbox_required where nothing confines: the start refuses it, with the reason
        return None
    start = sandbox.prepare(cfg, policy, program, env) if policy is not None else None
    try:
        return anyio.run(_fetch, cfg, [program, *argv[1:]], env, tuple(extra.values()), start, on_line, limit)
    finally:
        if start is not None:
            sandbox.cleanup(start)


async def _fetch(
    cfg: ServerConfig,
    argv: list[str],
    env: dict[str, str],
    secrets: tuple[str, ...],
    start: sandbox.Start | None,
    on_line: Callable[[str], None] | None,
    limit: float,
) -> Fetched:
    stats = StreamStats(secrets=secrets)
    ended = anyio.Event()
    began = time.monotonic()
    async with AsyncExitStack() as stack:
        if start is not None:
            env = start.env
            if start.mechanism == "bubblewrap" and isinstance(start.policy.network, tuple):
                env.update(sandbox.proxy_env())
                proxy = egress.filtering_proxy(sandbox.proxy_socket(start.tmp), start.policy.network, _ignore)
                await stack.enter_async_context(proxy)
        cwd = start.cwd if start is not None else cfg.cwd
        confine = start.confine if start is not None else None
        await stack.enter_async_context(stdio_pipe(argv, env, cwd, stats, ended.set, confine=confine))
        with anyio.move_on_after(limit):
            while not ended.is_set():
                if on_line is not None:
                    on_line(_last(stats))
                with anyio.move_on_after(_TICK_S):
                    await ended.wait()
    seconds = time.monotonic() - began
    if not ended.is_set():
        return Fetched(seconds, False, f"the fetch did not end within {limit:.0f}s")
    return Fetched(seconds, stats.returncode == 0, _last(stats))


def _last(stats: StreamStats) -> str:
    lines = [line.strip() for line in stats.stderr_tail().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _ignore(_host: str) -> None:
    """A host the fetch was refused: the start that follows is refused it too, and says so."""
