"""`coffer serve`: the MCP gateway every agent points at (stdio by default, or loopback HTTP)."""

from __future__ import annotations

from typing import Annotated

import typer

from coffer.cli._app import app
from coffer.errors import UsageError


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
    team: Annotated[
        bool,
        typer.Option(
            "--team", help="With --http: take access tokens from the team's identity provider ([team], docs/team.md)."
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
    if team and (http is None or no_auth):
        raise UsageError("--team needs --http PORT, and takes the place of --no-auth's and the static token's rule")
    if profile is not None:
        from coffer.vault import registry

        registry.load().profile(profile)  # an unknown profile is one error line, before anything starts
    from coffer.engine import hosting

    hosting.serve(http, profile, auth=not no_auth, standalone=standalone, team=team)
