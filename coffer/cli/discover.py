"""MCP registry commands: `coffer find`, `coffer outdated`, `coffer upgrade` (`coffer add NAME` from a
registry is `add`'s, coffer.cli.registry)."""

from __future__ import annotations

from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.cli.registry import JsonOpt, complete_servers

RegistryOpt = Annotated[
    str | None, typer.Option("--registry", metavar="URL", help="Read this registry, not the vault's [registries].")
]


@app.command()
def find(
    query: Annotated[str, typer.Argument(help='What the server should do: "open a pull request".')],
    from_registry: RegistryOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many servers to show.")] = 10,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Read the registry now, even if the cache is new.")
    ] = False,
    offline: Annotated[bool, typer.Option("--offline", help="Use only the cache; never the network.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Find servers in MCP registries by what they do, ranked like `coffer search`; installed ones marked.
    Works offline from the cache (refreshed when older than a day) and says how old it is."""
    from coffer.cli.quick import show_find
    from coffer.errors import UsageError

    if refresh and offline:
        raise UsageError("--refresh and --offline contradict each other")
    show_find(query, from_registry, limit, "refresh" if refresh else "offline" if offline else "auto", as_json)


@app.command()
def outdated(
    from_registry: RegistryOpt = None,
    offline: Annotated[bool, typer.Option("--offline", help="Compare with the cache; never the network.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List servers installed from a registry that have a newer version there (`coffer upgrade NAME`)."""
    from coffer.manage import upgrades

    rows, notes = upgrades.outdated(from_registry, offline)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "outdated": rows, "notes": notes})
        return
    for note in notes:
        render.warn(note)
    if not rows:
        render.text("every server installed from a registry runs its latest version")
        return
    render.table(["server", "registry name", "installed", "latest"], [tuple(r.values()) for r in rows])


@app.command()
def upgrade(
    name: Annotated[str, typer.Argument(help="Server to move to its latest version.", autocompletion=complete_servers)],
    offline: Annotated[bool, typer.Option("--offline", help="Use the cached latest version.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Move a registry server's pin to its latest version. A launch change, so it is held for approval:
    `coffer diff NAME` shows it, `coffer approve NAME` runs it."""
    from coffer.manage import upgrades

    moved = upgrades.upgrade(name, offline)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "upgraded": moved})
        return
    render.say(f"'{name}' now pins {moved['name']} {moved['to']} (was {moved['from']})")
    render.say(f"held for approval: review `coffer diff {name}`, then `coffer approve {name}`")
