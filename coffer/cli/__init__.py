"""The `coffer` command line: Typer commands that parse, call the parts, and render.

Modules:

    commands    every command group, registered on the one Typer app
    _app        the Typer app and the error boundary every command shares
    quick       `coffer search` and `coffer serve` without Typer (a fraction of the start time)
    render      output: the one module that imports rich; humans or `--json`
    registry    remove, list, show, enable, disable, paths, completions
    adding      add (a launch line, a URL, or by name from an MCP registry) and edit
    discover    find, outdated, upgrade, and `add NAME` from an MCP registry
    serve       `coffer serve` (its hosting is coffer.engine.hosting's)
    status      `coffer status`: the engine, its sessions, its upstream processes
    clients     `coffer import` and `coffer install`
    trust       `coffer secret`, `coffer approve`, `coffer diff`
    auth        `coffer auth` (OAuth sign-in) and `coffer call` (one tool from the shell)
    doctor      `coffer doctor` and `coffer refresh`
    search      `coffer search`, ranked offline as `coffer__search_tools` ranks
    memory      `coffer memory add/list/rm` and `coffer ask`
    log         `coffer log` and `coffer log stats`
    results     `coffer results`: kept big results
    profile     `coffer profile`: what a client without tool search is shown
    codemode    `coffer code-mode`: coffer__run on or off, and what scripts may call
    ui          `coffer ui`: the local web console
    demo        `coffer demo`
    completion  shell completion scripts, generated from the app

Errors from the parts (`CofferError`) become one line on stderr and the error's exit code, in one place.
The top layer: it may import every part, and no part imports it.

This module stays light on purpose: `coffer search`, the command agents' humans run most often, is
answered by `coffer.cli.quick` without importing Typer (and the pydantic it builds every parameter
with: about 0.25 s of a 1 s run). Anything that fast path does not recognise goes to the Typer app.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    from coffer.cli import quick

    code = quick.run(sys.argv[1:])
    if code is not None:
        raise SystemExit(code)
    import logging

    # Library warnings (the SDK logs a traceback when an OAuth flow fails) would print as they are:
    # the command's own one-line error says what went wrong.
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    logging.getLogger("mcp").propagate = False
    from coffer.cli.commands import app

    app()


def __getattr__(name: str) -> Any:
    # `from coffer.cli import app` (tests, CliRunner) still works; it loads every command group.
    if name == "app":
        from coffer.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "main"]
