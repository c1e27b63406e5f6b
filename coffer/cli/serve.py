"""`coffer serve`: the MCP gateway every agent points at (stdio by default, or loopback HTTP)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from coffer.cli._app import app
from coffer.errors import UsageError

STANDALONE_ENV = "COFFER_STANDALONE"  # "1": every `coffer serve` runs in-process (as --standalone)


@app.command()
def serve(
    http: Annotated[
        int | None,
        typer.Option("--http", metavar="PORT", help="Serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio."),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="Advertise what [profiles.NAME] shows (see `coffer profile`)."),
    ] = None,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="With --http: serve without the bearer token (any local process).")
    ] = False,
    print_token: Annotated[
        bool, typer.Option("--print-token", help="Print the HTTP bearer token (created on first use) and exit.")
    ] = False,
    standalone: Annotated[
        bool,
        typer.Option(
            "--standalone",
            help="Run the gateway and every server in this process, not through the vault's shared engine.",
        ),
    ] = False,
) -> None:
    """Serve every enabled server as one MCP server on stdio (point Claude Code, Codex, Cursor... here)."""
    if print_token:
        from coffer.trust.http_token import serve_token

        typer.echo(serve_token())
        return
    if http is not None and not 0 < http < 65536:
        raise UsageError(f"invalid port {http}: expected 1-65535")
    if no_auth and http is None:
        raise UsageError("--no-auth only applies to --http")
    if profile is not None:
        from coffer.vault import registry

        registry.load().profile(profile)  # an unknown profile is one error line, before anything starts
    if not standalone and os.environ.get(STANDALONE_ENV) != "1":
        from coffer.engine import front

        if http is None:
            front.run(profile)
        _serve_through_engine(http, profile, not no_auth)
    from coffer.gateway.serve import run

    run(http_port=http, profile=profile, auth=not no_auth)


def _serve_through_engine(port: int, profile: str | None, auth: bool) -> None:
    """`serve --http` through the engine until a signal ends it (then its port closes; the engine stays
    for its other sessions until idle)."""
    import signal

    from coffer.engine import front

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGHUP, lambda *_: os._exit(0))
    front.run_http(port, profile, auth)
