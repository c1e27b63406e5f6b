"""`coffer code-mode`: turn coffer__run on or off, and say what a server's tools scripts may call."""

from __future__ import annotations

from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.cli.registry import JsonOpt, complete_servers

code_app = typer.Typer(
    help="Code mode: coffer__run, a sandboxed script that calls many tools in one step.", no_args_is_help=True
)
app.add_typer(code_app, name="code-mode")

ServerArg = Annotated[str, typer.Argument(help="The server.", autocompletion=complete_servers)]


def _said(as_json: bool, changed: bool, text: str, **data: object) -> None:
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "changed": changed, **data})
    else:
        render.say(text if changed else f"{text} (already so)")


@code_app.command("on")
def on(as_json: JsonOpt = False) -> None:
    """Offer coffer__run to agents (profiles that say `code_mode = false` keep it off)."""
    from coffer.manage.tools import set_code_mode

    changed = set_code_mode(True)
    _said(as_json, changed, "code mode on: scripts may call read-only tools (`coffer show SERVER` says which)", on=True)


@code_app.command("off")
def off(as_json: JsonOpt = False) -> None:
    """Stop offering coffer__run."""
    from coffer.manage.tools import set_code_mode

    _said(as_json, set_code_mode(False), "code mode off", on=False)


@code_app.command("allow")
def allow(
    server: ServerArg,
    tools: Annotated[list[str] | None, typer.Argument(help="Tools scripts may call too.")] = None,
    every: Annotated[bool, typer.Option("--all", help="Every tool of the server.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Let scripts call more of a server's tools than its read-only ones."""
    from coffer.errors import UsageError
    from coffer.manage.tools import set_script_tools

    if every == bool(tools):
        raise UsageError("name the tools scripts may call, or give --all (not both)")
    value: str | list[str] = "all" if every else sorted(set(tools or []))
    changed = set_script_tools(server, value)
    what = "every tool" if every else ", ".join(value)
    _said(as_json, changed, f"scripts may call {what} of '{server}'", server=server, code_mode=value)


@code_app.command("reset")
def reset(server: ServerArg, as_json: JsonOpt = False) -> None:
    """Scripts may call only the server's read-only tools again."""
    from coffer.manage.tools import set_script_tools

    changed = set_script_tools(server, "read")
    _said(as_json, changed, f"scripts may call only read-only tools of '{server}'", server=server, code_mode="read")
