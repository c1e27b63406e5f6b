"""Adding and removing a server touches several parts; these are the only ways the CLI and import do it.

Adding writes the registry entry and approves its launch config (the user chose it); removing forgets
the approval and pins first, then the entry, then the catalogue entry and the indexed resources.
"""

from __future__ import annotations

from pathlib import Path

from coffer.errors import NotFoundError
from coffer.memory import store as memory
from coffer.trust import oauth_store
from coffer.trust.pinning import Pins, approve_server_config
from coffer.vault import catalogue, registry


def add_server(cfg: registry.ServerConfig, path: Path | None = None, replace: bool = False) -> None:
    """Register `cfg` and approve its launch config, as `coffer add` and `coffer import` do."""
    registry.add_server(cfg, path=path, replace=replace)
    approve_server_config(cfg)


def add_servers(configs: list[registry.ServerConfig]) -> None:
    """Register many servers in one atomic registry write and approve them in one transaction."""
    registry.add_servers(configs)
    with Pins.open(new_tools="allow") as pins:
        pins.approve_servers(configs)


def remove_server(name: str, path: Path | None = None) -> None:
    """Remove a server and what Coffer keeps about it: launch approval and tool pins, catalogue entry
    and indexed resources.

    The approval goes before the entry is written away: a failure in between leaves the server
    registered but unapproved (not started until `coffer approve`), never an approval to reuse.
    """
    with registry.edit(path) as doc:
        servers = doc.get("servers")
        if servers is None or name not in servers:
            raise NotFoundError(f"unknown server '{name}' (see `coffer list`)")
        with Pins.open(new_tools="allow") as pins:  # the setting only matters when observing
            pins.forget_server(name)
        del servers[name]
    catalogue.drop_server(name)
    memory.index_resources(name, [])


def trust_states(reg: registry.Registry) -> dict[str, dict[str, object]]:
    """Per server: its launch approval (approved, new or changed) and the tools held for review, for
    `coffer list` and `coffer show`, so a server that will not start does not look like one that will."""
    out: dict[str, dict[str, object]] = {}
    with Pins.open(new_tools="allow") as pins:  # read only: the setting matters when observing
        held: dict[str, list[str]] = {}
        for pin in pins.held():
            held.setdefault(pin.server, []).append(pin.exposed or pin.tool)
        for name, cfg in reg.servers.items():
            approval = pins.server_state(cfg)
            state = "disabled" if not cfg.enabled else ("needs approval" if approval != "approved" else "ok")
            if state == "ok" and held.get(name):
                state = "tools held"
            auth = oauth_store.state(name) if cfg.oauth else None
            if state == "ok" and auth in ("none", "expired"):
                state = "needs sign-in"
            out[name] = {"state": state, "approval": approval, "held": sorted(held.get(name, [])), "auth": auth}
    return out
