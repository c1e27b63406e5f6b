"""What `coffer status` shows of a running engine: this process, its sessions, and each upstream's
process, share mode, state and memory (PSS: shared pages split between their users)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from coffer.upstreams.reaper import tree

if TYPE_CHECKING:
    from coffer.gateway.server import Gateway


def status(gateway: Gateway, sessions: Iterable[Any], started: float) -> dict[str, Any]:
    """What `coffer status` shows: this process, its `sessions` (the engine's `Session`s), each upstream's
    process and memory."""
    sessions = list(sessions)
    owners = {id(s.pool): s.pid for s in sessions if s.pool is not None}
    ups = []
    for pool, up in sorted(gateway.pool.every(), key=lambda item: item[1].name):
        pids = sorted(up.pids)
        shared = pool is gateway.pool
        ups.append(
            {
                "name": up.name,
                "state": up.state.value,
                "share": "shared" if shared else "session",
                "why": gateway.share_of(up.cfg).reason,
                "session": None if shared else owners.get(id(pool)),
                "pids": pids,
                "pss_kib": sum(pss_kib(p) for p in _tree(pids)),
                "transport": up.cfg.transport,
                "ready_since": up.ready_since,
                "last_error": up.last_error,
                "restarts": max(0, up.spawns - 1),
                "sandbox": _sandbox(up),
            }
        )
    return {
        "version": 1,
        "engine": {"pid": os.getpid(), "started": started, "pss_kib": pss_kib(os.getpid())},
        "registry_error": gateway.view.registry_error,
        "sessions": [{"pid": s.pid, "profile": s.profile, "since": s.since, "http_port": s.port} for s in sessions],
        "upstreams": ups,
    }


def _sandbox(up: Any) -> str | None:
    """How a started stdio upstream runs: its mechanism and policy, or "unconfined" (None: no start got as
    far as deciding, or HTTP)."""
    if up.cfg.transport != "stdio" or up.confined is None:
        return None
    if not up.confined or up.policy is None:
        return "unconfined"
    mechanism = up.confinement.mechanism if up.confinement is not None else "confined"
    return f"{mechanism}: {up.policy.describe()}"


def _tree(roots: list[int]) -> list[int]:
    """`roots` and every process below them (the supervisor, the server, its workers)."""
    return [p for root in roots for p in (root, *tree(root))]


def pss_kib(pid: int) -> int:
    """Proportional set size in KiB (shared pages split between their users); 0 when unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0
