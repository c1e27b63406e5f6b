"""`coffer auth` (OAuth sign-in for a URL server) and `coffer call` (one tool, from the shell)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.cli.registry import JsonOpt, complete_servers, complete_targets
from coffer.errors import UpstreamError, UsageError


@app.command()
def auth(
    name: Annotated[str, typer.Argument(help="A server added with --url.", autocompletion=complete_servers)],
    headless: Annotated[
        bool,
        typer.Option("--headless", help="Fetch the authorization URL and follow its redirects (no browser)."),
    ] = False,
    logout: Annotated[bool, typer.Option("--logout", help="Forget the server's tokens and client.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Sign in to an OAuth server (browser, or --headless), then list its tools; --logout forgets it."""
    from coffer.manage import auth as manage_auth

    if logout:
        dropped = manage_auth.logout(name)
        if as_json:
            render.print_json({"version": render.JSON_VERSION, "server": name, "logged_out": dropped})
        else:
            render.say(f"'{name}': tokens forgotten" if dropped else f"'{name}' had no tokens")
        return
    result = manage_auth.authorise(name, headless=headless)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "server": name, "authorised": True, "tools": result.tools})
        return
    render.say(f"'{name}' authorised; it serves {render.plural(result.tools or 0, 'tool')}")


@app.command()
def call(
    tool: Annotated[str, typer.Argument(help="SERVER__TOOL as agents see it.", autocompletion=complete_targets)],
    arguments: Annotated[str, typer.Argument(help="The tool's arguments as a JSON object.")] = "{}",
    as_json: JsonOpt = False,
) -> None:
    """Call one tool as an agent's call goes (through the engine where one runs), logged, and print its result."""
    from coffer.manage import call as use

    try:
        args = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise UsageError(f"arguments are not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(args, dict):
        raise UsageError('arguments must be a JSON object, e.g. \'{"path": "README.md"}\'')
    called = use.call(tool, args)
    if called.note:
        render.warn(called.note)
    if called.unreachable is not None:
        raise UpstreamError(called.unreachable)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "tool": tool, "via": called.via, "result": called.result})
    else:
        render.text(use.text_of(called.result))
    if called.result.get("isError"):
        raise typer.Exit(1)
