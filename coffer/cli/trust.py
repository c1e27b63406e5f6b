"""Trust commands: `coffer secret set/list/rm`, `coffer approve`, `coffer diff`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]

secret_app = typer.Typer(
    help="Named secrets for ${secret:NAME} references (OS keyring, else a 0600 file).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(secret_app, name="secret")


def _read_value(name: str) -> str:
    """The value comes from a hidden prompt or stdin, never argv (argv is visible to every process)."""
    if sys.stdin is not None and sys.stdin.isatty():
        return str(typer.prompt(f"value for {name}", hide_input=True, confirmation_prompt=True))
    data = sys.stdin.read() if sys.stdin is not None else ""
    if data.endswith("\n"):
        data = data[:-1]
    return data.removesuffix("\r")


@secret_app.command("set")
def secret_set(
    name: Annotated[str, typer.Argument(help="Secret name, used as ${secret:NAME}.")], as_json: JsonOpt = False
) -> None:
    """Store a secret, read from a hidden prompt or from stdin (`printf %s TOKEN | coffer secret set NAME`)."""
    from coffer.trust import secrets

    secrets.validate_name(name)
    store = secrets.set_secret(name, _read_value(name))
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "secret": {"name": name, "store": store}})
        return
    render.say(f"secret '{name}' stored in the {'OS keyring' if store == 'keyring' else 'vault file (0600)'}")


@secret_app.command("list")
def secret_list(as_json: JsonOpt = False) -> None:
    """List secret names and where each is kept (never values)."""
    from coffer.trust import secrets

    items = secrets.list_secrets()
    if as_json:
        rows = [{"name": s.name, "store": s.store} for s in items]
        render.print_json({"version": render.JSON_VERSION, "secrets": rows})
    elif not items:
        render.say("no secrets yet: `coffer secret set NAME`")
    else:
        render.table(["name", "store"], [(s.name, s.store) for s in items])


@secret_app.command("rm")
def secret_rm(name: Annotated[str, typer.Argument(help="Secret to delete.")], as_json: JsonOpt = False) -> None:
    """Delete a secret (servers that reference it will refuse to start)."""
    from coffer.trust import secrets

    secrets.remove_secret(name)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "removed": name})
        return
    render.say(f"secret '{name}' removed")


@app.command()
def approve(
    target: Annotated[str, typer.Argument(help="SERVER (launch config and all held tools) or SERVER__TOOL.")],
    no_probe: Annotated[
        bool, typer.Option("--no-probe", help="Do not start a server whose launch changed to approve its tools.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Approve a server's changed launch config and held tools, or one held tool. An approved launch
    change starts the server once (as `coffer add` does) and approves the tools it lists."""
    from coffer.manage.review import approve as approve_target

    done = approve_target(target, probe=not no_probe)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "approved": done})
        return
    render.say(f"approved {', '.join(done)}" if done else f"nothing to approve for '{target}'")


@app.command()
def diff(server: Annotated[str, typer.Argument(help="Server to compare.")], as_json: JsonOpt = False) -> None:
    """Show what changed since approval: the launch config and each held tool (unified diff)."""
    from coffer.manage.review import review

    data = review(server)
    config, tools, state = data["config"], data["tools"], data["config"]["state"]
    if as_json:
        render.print_json({"version": render.JSON_VERSION, **data})
        return
    if state == "approved" and not tools:
        render.say(f"'{server}': launch config approved, no held tools")
        return
    if state != "approved":
        render.say(f"launch config: {'never approved' if state == 'new' else 'changed since approval'}")
        render.text(config["diff"].rstrip("\n"))
    for item in tools:
        render.say(f"{server}__{item['tool']}: {'new tool' if item['state'] == 'new' else 'definition changed'}")
        for reason in item["injection"]:
            render.say(f"  held: its {reason}")
        render.text(item["diff"].rstrip("\n"))
    render.say(f"approve with `coffer approve {server}` (all) or `coffer approve {server}__TOOL`")
