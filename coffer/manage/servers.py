"""Adding and removing a server touches several parts; these are the only ways the CLI and import do it.

Adding writes the registry entry and approves its launch config (the user chose it); removing forgets
the approval and pins first, then the entry, then the catalogue entry and the indexed resources.
"""

from __future__ import annotations

from pathlib import Path

from coffer.errors import NotFoundError
from coffer.memory import store as memory
from coffer.trust.pinning import Pins, approve_server_config
from coffer.vault import catalogue, registry


def add_server(cfg: registry.ServerConfig, path: Path | None = None, replace: bool = False) -> None:
    """Register `cfg` and approve its launch config, as `coffer add` and `coffer import` do."""
    registry.add_server(cfg, path=path, replace=replace)
    approve_server_config(cfg)


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
