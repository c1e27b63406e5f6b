"""`coffer search`: rank the saved catalogue offline, the way `coffer__search_tools` does."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app


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
    from coffer.manage.search import search_snapshot

    result = search_snapshot(query, top_k, ranker.value)
    if result.note:
        render.say(result.note)
    if as_json:
        render.print_json(
            {
                "version": render.JSON_VERSION,
                "query": query,
                "ranker": result.ranker,
                "total_searched": result.total,
                "tools": [{"name": d.id, "description": d.text, "score": s} for d, s in result.hits],
            }
        )
        return
    if not result.hits:
        render.say(f"no tool matches {query!r} ({result.total} tools searched with {result.ranker})")
        return
    render.table(
        ["tool", "score", "description"],
        [(d.id, f"{s:.3f}", render.first_line(d.text, 80)) for d, s in result.hits],
        caption=f"{result.ranker} ranker, {result.total} tools searched",
    )
