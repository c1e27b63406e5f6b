"""One state per server, with its reason: computed here only and shown by `coffer list`, `show`, `status`
and the console, so no two of them can disagree about whether a server serves its tools.

The state is the first of these that holds: `disabled`; `needs approval` (its launch config is new or
changed); `tools held` (for review); `needs sign-in` (OAuth); `failed` or `down` (the running engine could
not start it, or it exited); `ok` (the engine's process of it is up); `did not list` (it never listed:
its last start failed); `not listed yet` (never started); `ok`. Every state but `ok` has a reason, which
names the command that changes it where there is one.
"""

from __future__ import annotations

from typing import Any

from coffer.codemode import policy
from coffer.results.tokens import tool_tokens
from coffer.trust import oauth_store
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, registry

TROUBLE = ("failed", "down", "did not list")  # states whose reason is an error, said under a table


def engine_status() -> dict[str, Any] | None:
    """What the vault's running engine says of its upstreams; None when none runs (or it did not answer)."""
    from coffer.engine import control

    try:
        return control.status()
    except OSError:  # it went away, or did not answer in time: as if none ran
        return None


def states_or_none(engine: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """`server_states` of the vault as it is now, for `coffer status`; None when its registry cannot be
    read (the engine serves the last good one meanwhile, and says so)."""
    from coffer.errors import CofferError

    try:
        reg = registry.load()
        return server_states(reg, catalogue.load_snapshot(), engine)
    except CofferError:
        return None


def server_states(
    reg: registry.Registry, snap: catalogue.Snapshot | None, engine: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Per server: `state` and `reason` (see the module), its launch `approval` (approved, new or
    changed), the tools `held` for review and its OAuth `auth`. `engine`: `engine_status()`, or None
    when no engine runs."""
    live = _live(engine)
    out: dict[str, dict[str, Any]] = {}
    with Pins.open(new_tools="allow") as pins:  # read only: the setting matters when observing
        held: dict[str, list[str]] = {}
        for pin in pins.held():
            held.setdefault(pin.server, []).append(pin.exposed or pin.tool)
        for name, cfg in reg.servers.items():
            approval = pins.server_state(cfg)
            auth = oauth_store.state(name, url=cfg.url) if cfg.oauth else None
            entry = snap.servers.get(name) if snap is not None else None
            state, reason = _state(cfg, approval, sorted(held.get(name, [])), auth, live.get(name), entry)
            reason = reason.removeprefix(f"{name}: ") if reason else reason  # shown after the name already
            out[name] = {
                "state": state,
                "reason": reason,
                "approval": approval,
                "held": sorted(held.get(name, [])),
                "auth": auth,
            }
    return out


def _state(
    cfg: registry.ServerConfig,
    approval: str,
    held: list[str],
    auth: str | None,
    live: tuple[str, str | None] | None,
    entry: catalogue.ServerEntry | None,
) -> tuple[str, str | None]:
    name = cfg.name
    if not cfg.enabled:
        return "disabled", f"`coffer enable {name}` turns it on"
    if approval != "approved":
        what = "new" if approval == "new" else "changed since it was approved"
        return "needs approval", f"its launch config is {what}: `coffer diff {name}`, then `coffer approve {name}`"
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        return "tools held", f"{len(held)} held for review ({shown}): `coffer diff {name}`"
    if auth in ("none", "expired"):
        said = "it has no sign-in" if auth == "none" else "its sign-in expired"
        return "needs sign-in", f"{said}: `coffer auth {name}`"
    if live is not None:
        process, error = live
        if process in ("failed", "down"):
            again = "it is not started again until its entry changes" if process == "failed" else "it restarts"
            return process, f"{error or 'it did not start'} (the engine's process; {again}: `coffer doctor {name}`)"
        if process == "ready":
            return "ok", None
    if entry is not None and entry.error:
        return "did not list", f"{entry.error} (`coffer doctor {name}` shows why)"
    if entry is None:
        return "not listed yet", f"never started: `coffer refresh {name}` lists its tools"
    return "ok", None


def _live(engine: dict[str, Any] | None) -> dict[str, tuple[str, str | None]]:
    """Per server, what the engine's processes of it say: ready when one is, else failed or down with
    its last error; nothing for one idle or starting (the snapshot says more then)."""
    out: dict[str, tuple[str, str | None]] = {}
    for up in (engine or {}).get("upstreams") or []:
        name, state = up.get("name"), up.get("state")
        if not isinstance(name, str):
            continue
        if state == "ready":
            out[name] = ("ready", None)
        elif state in ("failed", "down") and out.get(name, ("",))[0] != "ready":
            out[name] = (str(state), up.get("last_error"))
    return out


def server_rows(reg: registry.Registry | None = None, engine: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each registered server as `coffer list --json` and the console show it: its config (env masked),
    state and reason (`server_states`, `engine` as there), enabled/total tool counts and token cost from
    the snapshot (None before it was listed), and the error of its last listing."""
    reg = reg or registry.load()
    snap = catalogue.load_snapshot()
    states = server_states(reg, snap, engine)
    rows = []
    for cfg in reg.servers.values():
        data = cfg.to_dict(mask=True) | states[cfg.name]
        entry = snap.servers.get(cfg.name) if snap is not None else None
        data["tools"] = data["tokens"] = data["script_tools"] = None
        if entry is not None and not entry.error:  # one that never listed has no count, not 0
            tools = catalogue.server_tools(snap, cfg.name, cfg.exposed_prefix)
            off = set(cfg.disabled_tools)
            on = [t for t in tools if t.tool not in off]
            scripts = sum(policy.refusal(cfg, t.tool, t.raw) is None for t in on)  # a coffer__run script may call
            data["tools"] = {"enabled": len(on), "total": len(tools)}
            data["script_tools"] = scripts
            data["tokens"] = sum(tool_tokens([t.wire for t in on]))
        data["list_error"] = entry.error if entry is not None else None
        # what the client that listed it last declared: a server may list some tools only for clients that
        # can take them (sampling, elicitation, roots), so its count follows that client
        data["listed_for"] = list(entry.told) if entry is not None else None
        rows.append(data)
    return rows
