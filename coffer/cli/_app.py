"""The Typer app and the error boundary shared by every command module."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from coffer import __version__
from coffer.errors import CofferError


class CofferGroup(TyperGroup):
    """Turns a `CofferError` raised by any command into `coffer: error: ...` and its exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CofferError as exc:
            from coffer.cli import render

            render.error(str(exc))
            raise typer.Exit(exc.exit_code) from None


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
