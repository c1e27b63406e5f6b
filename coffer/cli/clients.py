"""Client commands: `import` (a client's servers into the vault) and `install` (Coffer into a client)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.clients.known import CLIENTS

CLIENT_NAMES = tuple(CLIENTS)
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


ScopeOpt = Annotated[
    str | None,
    typer.Option(
        "--scope",
        help="Only this scope: user, local (Claude Code's per-project entries) or project (./.mcp.json).",
        autocompletion=lambda: ["user", "local", "project"],
    ),
]


@app.command("import")
def import_(
    client: ClientArg,
    path: PathOpt = None,
    scope: ScopeOpt = None,
    move: Annotated[
        bool,
        typer.Option("--move", help="Also take the imported entries out of the client (backed up) and install Coffer."),
    ] = False,
    no_probe: Annotated[bool, typer.Option("--no-probe", help="Do not start the imported servers once.")] = False,
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Copy a client's MCP servers into the vault (every scope; the same launch once; names made valid)."""
    from coffer.manage import servers

    done = servers.import_client(
        client, path, scope, move=move, probe=not no_probe, dry_run=dry_run, progress=render.progress
    )
    plan, probed, changes = done.plan, done.probed, done.moved
    if as_json:
        out = {"version": render.JSON_VERSION, **plan.to_dict()}
        out["probed"] = [{"name": r.name, "status": r.status, "tools": r.tools, "error": r.error} for r in probed]
        if move:
            out["moved"] = [c.to_dict() for c in changes]
        render.print_json(out)
        return
    if not plan.items:
        render.say(f"no MCP servers in {', '.join(s.label() for s in plan.sources) or plan.path}")
        return
    labels = {"add": "would add", "added": "added", "skip": "skipped"}
    rows = []
    for item in plan.items:
        detail = item.config.launch_line(masked=True) if item.config is not None else item.reason or ""
        source = item.source
        origin = "" if source is None else source.scope + (f" {source.project}" if source.project else "")
        rows.append((item.name, labels[item.action], origin, "; ".join([detail, *item.notes])))
    title = str(plan.path) if path is not None else f"{plan.client}: {plan.path}"  # --path: only the file
    render.table(["server", "result", "from", "details"], rows, title=title)
    adds = plan.count("add", "added")
    skipped = plan.count("skip")
    for result in probed:
        if result.status != "ok":
            render.warn(f"'{result.name}' did not list its tools: {result.error} (`coffer doctor` for details)")
    if dry_run:
        for change in changes:
            render.text(change.diff().rstrip("\n"))
        render.say(f"dry run: would import {adds} server{'' if adds == 1 else 's'}, skip {skipped}; nothing written")
        return
    listed = sum(1 for r in probed if r.status == "ok")
    tail = f"; {listed} of {len(probed)} listed their tools" if probed else ""
    render.say(f"imported {adds} server{'' if adds == 1 else 's'}, skipped {skipped}{tail}")
    for change in changes:
        render.say(
            f"moved: {change.path} (backup: {change.backup}); removed {len(change.removed)} entries"
            + (f", installed '{change.installed}'" if change.installed else "")
        )
    if adds and not move:
        where = f" --path {path}" if path is not None else ""
        owner = str(path) if path is not None else plan.client
        render.say(
            f"next: `coffer import {plan.client}{where} --move` takes them out of {owner} and points it at Coffer "
            f"(backed up), or `coffer install {plan.client}{where}` and remove them by hand"
        )


@app.command()
def install(
    client: ClientArg,
    path: PathOpt = None,
    dry_run: DryRunOpt = False,
    name: Annotated[str, typer.Option("--name", help="Entry name in the client's config.")] = "coffer",
    force: Annotated[bool, typer.Option("--force", help="Replace an existing entry of that name.")] = False,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Serve this client [profiles.NAME] (coffer serve --profile).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add `coffer serve` to a client's MCP config, keeping the rest of the file (backed up first)."""
    from coffer.clients import installer

    plan = installer.plan_install(client, path, name=name, force=force, profile=profile)
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
    render.say(f"restart {'the program that reads it' if path is not None else plan.client} to pick up the change")
