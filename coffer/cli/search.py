"""`coffer search`: rank the saved catalogue offline, the way `coffer__search_tools` does."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from coffer.cli._app import app
from coffer.cli.quick import show_search


class RankerChoice(StrEnum):
    hybrid = "hybrid"
    bm25 = "bm25"
    semantic = "semantic"


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What you want to do, in plain words.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="How many tools to show (at least 1).")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ranker: Annotated[
        RankerChoice, typer.Option("--ranker", help="Ranking method; hybrid falls back to bm25 without the model.")
    ] = RankerChoice.hybrid,
) -> None:
    """Search the enabled tools of every server, offline, from the last catalogue snapshot."""
    show_search(query, top_k, as_json, ranker.value)
