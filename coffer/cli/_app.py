"""The Typer app and the error boundary shared by every command module."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from coffer import __version__
from coffer.errors import CofferError


class CofferGroup(TyperGroup):
    """Turns a `CofferError` raised by any command into `coffer: error: ...` and its exit code (and,
    under `--json`, into a JSON object on stdout as well, so a script that parses stdout gets one);
    names every argument and option value in help as a person would (`NAME`, `--env KEY=VALUE`)."""

    def invoke(self, ctx: Any) -> Any:
        as_json = "--json" in [*getattr(ctx, "_protected_args", []), *ctx.args]  # taken from ctx as it runs
        try:
            return super().invoke(ctx)
        except CofferError as exc:
            from coffer.cli import render

            if as_json:
                render.print_json(
                    {
                        "version": render.JSON_VERSION,
                        "error": {"message": str(exc), "kind": type(exc).__name__, "exit_code": exc.exit_code},
                    }
                )
            render.error(str(exc))
            raise typer.Exit(exc.exit_code) from None

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _name_values(command)
        return command


def _name_values(command: Any) -> None:
    """`{name}`, `<list[str]>`, `<float>` (Typer's defaults) become `NAME`, `--env ENV`, `--timeout
    FLOAT`: what a value is, in the words of its option, not its Python type. Explicit metavars stay."""
    from pathlib import Path

    from typer.core import TyperArgument, TyperOption

    for sub in getattr(command, "commands", {}).values():
        _name_values(sub)
    for param in command.params:
        if not getattr(param, "name", None):
            continue
        kind = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        if isinstance(param, TyperArgument):
            param.metavar = param.metavar or param.name.upper()
            usage = param.metavar if param.required else f"[{param.metavar}]"
            usage += "..." if param.nargs != 1 else ""
            # NAME, [TEXT], COMMAND... as click writes them; no `<str>` beside it: its help says what it is
            setattr(param, "get_usage_pieces", lambda ctx, usage=usage: [usage])  # noqa: B010
            setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010
        elif isinstance(param, TyperOption) and kind is not bool and param.metavar is None:
            named: dict[Any, str] = {int: "N", float: "NUMBER", Path: "PATH"}
            param.metavar = named.get(kind, param.name.upper().replace("_", "-"))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"coffer {__version__}")
        raise typer.Exit()


app = typer.Typer(
    cls=CofferGroup,
    name="coffer",
    help="A local vault of MCP servers, served to every agent as one gateway.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """A local vault of MCP servers, served to every agent as one gateway."""
