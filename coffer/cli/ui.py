"""`coffer ui`: the local web console."""

from __future__ import annotations

from typing import Annotated

import typer

from coffer.cli._app import app
from coffer.errors import UsageError


@app.command()
def ui(
    port: Annotated[
        int | None, typer.Option("--port", help="Port on 127.0.0.1 (default 8760, else the next free one).")
    ] = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Print the URL without opening a browser.")] = False,
) -> None:
    """Open the web console: servers, tools, the log's charts and profiles, on 127.0.0.1 behind a token."""
    from coffer.console import app as console

    if port is not None and not 0 <= port <= 65535:
        raise UsageError(f"invalid --port {port}: expected 0 to 65535")
    console.run(port, open_browser=not no_browser)
