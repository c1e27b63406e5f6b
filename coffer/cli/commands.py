"""Every command group, registered on the one Typer app (`coffer.cli` documents the layer)."""

from __future__ import annotations

from coffer.cli._app import app

# One line per command group; each module adds its commands to `app` on import.
from coffer.cli import registry  # noqa: F401  isort: skip
from coffer.cli import adding  # noqa: F401  isort: skip
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
from coffer.cli import status  # noqa: F401  isort: skip
from coffer.cli import results  # noqa: F401  isort: skip
from coffer.cli import ui  # noqa: F401  isort: skip
from coffer.cli import discover  # noqa: F401  isort: skip
from coffer.cli import codemode  # noqa: F401  isort: skip


__all__ = ["app"]
