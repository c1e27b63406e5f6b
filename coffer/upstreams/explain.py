"""What a confined server may read, write and reach, in a person's words (`coffer show`, `coffer doctor`).

Computed as a start would compute it (coffer.upstreams.sandbox.prepare), without starting anything or
making its home, so what `show` says is what the next start gets.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from coffer.upstreams import runtimes, sandbox, walls
from coffer.upstreams.policy import WEB_PORTS, Policy, policy_for
from coffer.upstreams.transport import child_env
from coffer.vault.registry import ServerConfig


def access(cfg: ServerConfig) -> dict[str, Any]:
    """{"confined", "mechanism", "reads", "writes", "network", "why", "note"} for a stdio server."""
    policy = policy_for(cfg)
    found = sandbox.support()
    if policy.off:
        return {"confined": False, "mechanism": None, "why": policy.why, "summary": policy.describe(), "note": ""}
    env = child_env({})
    program = cfg.command or ""
    if os.sep not in program:
        program = shutil.which(program, path=env.get("PATH")) or program
    home = str(sandbox.home_path(cfg.name))
    runtime = [d for d in sandbox.runtime_reads(program, env) if os.path.exists(d)] if program else []
    reads = list(
        runtimes.unique(
            ["the system (/usr, /etc, ...)", *(runtimes.tilde(p) for p in runtime), *map(runtimes.tilde, policy.code)]
        )
    )
    reads += [runtimes.tilde(p) + " (granted)" for p in policy.read]
    reads += [runtimes.tilde(p) + " (a secret place, granted by name)" for p in policy.secrets]
    writes = [f"its own home {runtimes.tilde(home)} (its HOME, cwd and package cache)", "a private temp"]
    writes += [runtimes.tilde(p) + " (named on its launch line)" for p in policy.named]
    writes += [runtimes.tilde(p) + " (granted)" for p in policy.write]
    if policy.network == "none":
        network = "no network"
    elif policy.network == "all":
        ports = sorted({*WEB_PORTS, *policy.ports})
        network = "ports " + ", ".join(str(p) for p in ports) + " on any host; not the host's other local services"
    else:
        network = "only " + ", ".join(policy.network)
        if found.mechanism == "landlock":
            network += " (Landlock alone cannot tell hosts apart: their ports on any host)"
    confined = found.available
    note = "" if confined else f"UNCONFINED here: {found.unconfined_why}"
    return {
        "confined": confined,
        "mechanism": found.describe(),
        "reads": reads,
        "writes": writes,
        "network": network,
        "why": policy.why,
        "summary": policy.describe(),
        "hidden": hidden(policy),
        "note": note,
    }


def grants(policy: Policy) -> list[str]:
    """Every path a policy opens, as written: grants, secret places named, what its launch line names."""
    return list(runtimes.unique((*policy.read, *policy.write, *policy.named, *policy.code, *policy.secrets)))


def hidden(policy: Policy, among: list[str] | None = None) -> str:
    """What of its grants (`among`: only these paths) stays hidden from it, in words; "" where nothing does."""
    paths = grants(policy) if among is None else among
    every = walls.walls(policy.secrets)
    opened = [os.path.realpath(p) for p in policy.secrets]
    parts = []
    for path in paths:
        real = os.path.realpath(os.path.expanduser(path))
        wall = walls.holding(real, every)
        if wall is not None and not any(runtimes.within(real, o) for o in opened):
            parts.append(f"{runtimes.tilde(path)} (in {wall.what}: never granted)")
    held = walls.hidden_inside(paths, every)
    coffer = [w.shown for w in held if w.coffer]
    secret = [w.shown for w in held if not w.coffer]
    if coffer:
        parts.append("Coffer's own files (" + ", ".join(coffer) + ")")
    if secret:
        more = f" and {len(secret) - 6} more" if len(secret) > 6 else ""
        parts.append("the secret places " + ", ".join(secret[:6]) + more)
    if not parts:
        return ""
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return listed + " stay hidden from it, whatever it is granted"


def lines(cfg: ServerConfig) -> list[tuple[str, str]]:
    """`coffer show`'s rows for confinement."""
    seen = access(cfg)
    if seen["mechanism"] is None:
        return [("sandbox", f"off: runs with the user's full authority ({seen['why']})")]
    if not seen["confined"]:
        return [("sandbox", seen["note"])]
    rows = [
        ("sandbox", f"{seen['mechanism']} ({seen['why']})"),
        ("may read", "; ".join(seen["reads"])),
        ("may write", "; ".join(seen["writes"])),
        ("may reach", seen["network"]),
    ]
    return [*rows, ("hidden", seen["hidden"])] if seen["hidden"] else rows
