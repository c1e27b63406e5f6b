"""`coffer results`: the tool results Coffer kept for being over the cap (list, show, rm)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.cli.registry import JsonOpt
from coffer.errors import UsageError

results_app = typer.Typer(help="Tool results kept whole because they were over the cap (coffer://results/<id>).")
app.add_typer(results_app, name="results")


@results_app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """List kept results, newest first (expired ones are not shown)."""
    from coffer.results import kept
    from coffer.results.preview import human

    rows = kept.listing()
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "results": [k.to_dict() for k in rows]})
        return
    if not rows:
        render.say("no kept results (a tool result over the cap is kept here; see `coffer results --help`)")
        return
    render.table(
        ["id", "from", "kept", "expires", "size", "tokens", "kind"],
        [
            (
                k.id,
                k.server + "__" + k.tool,
                render.when(k.created, seconds=False),
                render.when(k.expires, seconds=False),
                human(k.bytes),
                f"{k.tokens:,}+",
                k.kind,
            )
            for k in rows
        ],
    )


@results_app.command("show")
def show(
    result_id: Annotated[str, typer.Argument(metavar="ID", help="A kept result's id or coffer://results/<id> URI.")],
    as_json: JsonOpt = False,
) -> None:
    """Print a kept result: its text (or, with --json, its index row and the original result)."""
    from coffer.results import kept
    from coffer.results.text import text_of

    row, original = kept.show(result_id)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "result": row.to_dict(), "original": original})
        return
    body = text_of(original)
    render.text(body if body else json.dumps(original, ensure_ascii=False, indent=1))


@results_app.command("rm")
def rm(
    result_id: Annotated[str | None, typer.Argument(metavar="ID", help="A kept result's id or URI.")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Remove every kept result.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove one kept result, or all of them (files, index and coffer__ask passages)."""
    from coffer.results import kept

    if (result_id is None) == (not everything):
        raise UsageError("give a result ID or --all (one of them)")
    if everything:
        count = kept.remove_all()
        if as_json:
            render.print_json({"version": render.JSON_VERSION, "removed": count})
        else:
            render.say(f"removed {count} kept result{'s' if count != 1 else ''}")
        return
    assert result_id is not None
    gone = kept.remove(result_id)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "removed": 1, "result": gone.to_dict()})
    else:
        render.say(f"removed kept result {gone.id} ({gone.server}__{gone.tool})")
