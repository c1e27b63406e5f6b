"""Client commands: `import` (a client's servers into the vault) and `install` (Coffer into a client)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app

CLIENT_NAMES = ("claude-code", "claude-desktop", "codex", "cursor", "vscode")
ClientArg = Annotated[
    str,
    typer.Argument(help=f"One of: {', '.join(CLIENT_NAMES)}.", autocompletion=lambda: list(CLIENT_NAMES)),
]
PathOpt = Annotated[
    Path | None,
    typer.Option("--path", help="The client's config file (default: its usual user-level file)."),
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would change; write nothing.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@app.command("import")
def import_(client: ClientArg, path: PathOpt = None, dry_run: DryRunOpt = False, as_json: JsonOpt = False) -> None:
    """Copy a client's MCP servers into the vault (duplicates skipped, names made valid)."""
    from coffer.clients import importer

    plan = importer.plan_import(client, path)
    if not dry_run:
        importer.apply_import(plan)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, **plan.to_dict()})
        return
    if not plan.items:
        render.say(f"no MCP servers in {plan.path}")
        return
    labels = {"add": "would add", "added": "added", "skip": "skipped"}
    rows = []
    for item in plan.items:
        detail = item.config.launch_line() if item.config is not None else item.reason or ""
        rows.append((item.name, labels[item.action], "; ".join([detail, *item.notes])))
    render.table(["server", "result", "details"], rows, title=f"{plan.client}: {plan.path}")
    adds = plan.count("add", "added")
    skipped = plan.count("skip")
    if dry_run:
        render.say(f"dry run: would import {adds} server(s), skip {skipped}; nothing written")
        return
    render.say(f"imported {adds} server(s), skipped {skipped}")
    if adds:
        render.say(
            f"next: `coffer install {plan.client}` points {plan.client} at Coffer; then remove the imported "
            f"entries from {plan.path} by hand so their tools are not listed twice"
        )


@app.command()
def install(
    client: ClientArg,
    path: PathOpt = None,
    dry_run: DryRunOpt = False,
    name: Annotated[str, typer.Option("--name", help="Entry name in the client's config.")] = "coffer",
    force: Annotated[bool, typer.Option("--force", help="Replace an existing entry of that name.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add `coffer serve` to a client's MCP config, keeping the rest of the file (backed up first)."""
    from coffer.clients import installer

    plan = installer.plan_install(client, path, name=name, force=force)
    if not dry_run:
        installer.apply_install(plan)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, **plan.to_dict()})
        return
    for note in plan.notes:
        render.say(f"note: {note}")
    if plan.status == "already":
        render.say(f"already installed: '{plan.name}' in {plan.path}")
        return
    if dry_run:
        render.text(plan.diff().rstrip("\n"))
        render.say("dry run: nothing written")
        return
    verb = "replaced" if plan.status == "replace" else "installed"
    render.say(f"{verb} '{plan.name}' in {plan.path}")
    if plan.backup is not None:
        render.say(f"backup: {plan.backup}")
    if plan.also_in_vault:
        render.say(
            f"hint: {', '.join(plan.also_in_vault)} are also in your vault (e.g. via `coffer import`); "
            f"remove them from {plan.path} by hand so their tools are not listed twice"
        )
    render.say(f"restart {plan.client} to pick up the change")
