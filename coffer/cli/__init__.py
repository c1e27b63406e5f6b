"""The `coffer` command line: Typer commands that parse, call the parts, and render.

Each command group lives in its own module and registers itself here. Errors from the parts
(`CofferError`) become one line on stderr and the error's exit code, in one place. The top layer: it
may import every part, and no part imports it.
"""

from __future__ import annotations

from coffer.cli._app import app

# One line per command group; each module adds its commands to `app` on import.
from coffer.cli import registry  # noqa: F401  isort: skip
from coffer.cli import memory  # noqa: F401  isort: skip
from coffer.cli import search  # noqa: F401  isort: skip
from coffer.cli import log  # noqa: F401  isort: skip
from coffer.cli import trust  # noqa: F401  isort: skip
from coffer.cli import clients  # noqa: F401  isort: skip
from coffer.cli import doctor  # noqa: F401  isort: skip
from coffer.cli import serve  # noqa: F401  isort: skip
from coffer.cli import demo  # noqa: F401  isort: skip
from coffer.cli import auth  # noqa: F401  isort: skip
from coffer.cli import profile  # noqa: F401  isort: skip


def main() -> None:
    import logging

    # Library warnings (the SDK logs a traceback when an OAuth flow fails) would print as they are:
    # the command's own one-line error says what went wrong.
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    logging.getLogger("mcp").propagate = False
    app()


__all__ = ["app", "main"]
