"""`coffer profile`: what a client without tool search is shown (`coffer serve --profile NAME`)."""

from __future__ import annotations

from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.cli.registry import JsonOpt

profile_app = typer.Typer(help="Profiles: a small tool surface for clients without tool search.", no_args_is_help=True)
app.add_typer(profile_app, name="profile")

NameArg = Annotated[str, typer.Argument(help="Profile name: lowercase letters, digits and '-'.")]


@profile_app.command("add")
def add(
    name: NameArg,
    mode: Annotated[
        str, typer.Option("--mode", help="all: tools as filtered and capped; search: built-ins only.")
    ] = "all",
    max_tools: Annotated[
        int | None, typer.Option("--max-tools", help="Advertise at most N tools, built-ins included.")
    ] = None,
    server: Annotated[list[str] | None, typer.Option("--server", help="Only this server's tools; repeat.")] = None,
    tool: Annotated[
        list[str] | None, typer.Option("--tool", help="Only these tools (name or pattern); repeat.")
    ] = None,
    pin: Annotated[
        list[str] | None, typer.Option("--pin", help="Always advertise this tool (SERVER__TOOL); repeat.")
    ] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite a profile of that name.")] = False,
    code_mode: Annotated[
        bool | None, typer.Option("--code-mode/--no-code-mode", help="Offer coffer__run (default: as settings say).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a profile (served with `coffer serve --profile NAME`; `coffer install CLIENT --profile NAME`)."""
    from coffer.vault import registry

    profile = registry.Profile(
        name=name,
        mode=mode,
        max_tools=max_tools,
        servers=server or [],
        tools=tool or [],
        pinned=pin or [],
        code_mode=code_mode,
    )
    registry.add_profile(profile, replace=replace)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "profile": profile.to_dict()})
    else:
        render.say(f"added profile '{name}': serve it with `coffer serve --profile {name}`")


@profile_app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """List the profiles and how many tools (and tokens) each advertises now."""
    from coffer.manage.profiles import preview_all

    rows = preview_all()
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "profiles": rows})
        return
    if not rows:
        render.say("no profiles yet: `coffer profile add NAME --max-tools 40`")
        return
    render.table(
        ["profile", "mode", "max tools", "advertised", "tokens"],
        [(r["name"], r["mode"], r["max_tools"] or "-", r["advertised"], r["tokens"]) for r in rows],
    )


@profile_app.command("show")
def show(name: NameArg, as_json: JsonOpt = False) -> None:
    """Show one profile and the tools it advertises now, in order."""
    from coffer.manage.profiles import preview

    row = preview(name)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "profile": row})
        return
    render.kv([(k, v) for k, v in row.items() if k not in ("advertised_tools", "name")], title=name)
    render.table(["advertised tool"], [(t,) for t in row["advertised_tools"]])


@profile_app.command("rm")
def rm(name: NameArg, as_json: JsonOpt = False) -> None:
    """Remove a profile."""
    from coffer.vault import registry

    registry.remove_profile(name)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "removed": name})
    else:
        render.say(f"removed profile '{name}'")


@profile_app.command("prune")
def prune(
    name: NameArg,
    unused_for: Annotated[
        str | None, typer.Option("--unused-for", help="Leave out tools not called in this long: 30d, 12h.")
    ] = None,
    undo: Annotated[bool, typer.Option("--undo", help="Put the profile back as it was before its last prune.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write profile NAME without the tools nobody called lately (made from every tool when it is new);
    the tools left out stay reachable through coffer__call_tool. `--undo` reverses it."""
    from coffer.cli.log import parse_since
    from coffer.errors import UsageError
    from coffer.manage import usage

    if undo == (unused_for is not None):
        raise UsageError("give --unused-for DURATION or --undo (one of them)")
    if undo:
        restored = usage.undo(name)
        if as_json:
            render.print_json({"version": render.JSON_VERSION, "restored": restored.to_dict() if restored else None})
        else:
            render.say(f"profile '{name}' restored" if restored else f"profile '{name}' removed (it was new)")
        return
    import time

    assert unused_for is not None
    now = time.time()
    try:
        window = now - parse_since(unused_for, now=now)
    except UsageError:
        raise UsageError(f"invalid --unused-for '{unused_for}': use e.g. 30d, 12h or 2w") from None
    pruned = usage.prune(name, window, now=now)
    if as_json:
        data = {"profile": pruned.profile.to_dict(), "kept": pruned.kept, "left_out": pruned.left_out}
        render.print_json({"version": render.JSON_VERSION, **data, "created": pruned.created})
        return
    render.say(f"profile '{name}' now lists {render.plural(len(pruned.kept), 'tool')} called in the last {unused_for}")
    if pruned.left_out:
        render.table(["left out (unused)"], [(t,) for t in pruned.left_out])
    render.say(f"undo with `coffer profile prune {name} --undo`")
