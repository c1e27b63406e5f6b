"""The `coffer` command line: Typer commands that parse, call the parts, and render.

Each command group lives in its own module and registers itself on `app` when `coffer.cli.commands`
imports it. Errors from the parts (`CofferError`) become one line on stderr and the error's exit code,
in one place. The top layer: it may import every part, and no part imports it.

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
