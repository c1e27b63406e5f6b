"""`coffer demo`: see the gateway work end to end on a bundled example server, in a throwaway vault."""

from __future__ import annotations

from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app


@app.command()
def demo(as_json: Annotated[bool, typer.Option("--json", help="Print what happened as JSON.")] = False) -> None:
    """Register a bundled example server in a temporary vault, serve it, search it and call a tool."""
    from coffer.manage.demo import run_demo

    if not as_json:
        render.say("starting `coffer serve` on a temporary vault with the bundled demo server…")
    report = run_demo()
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "demo": report})
        return
    render.say(
        f"1. connected to {report['gateway']} over stdio ({report['protocol']}) in {report['initialize_seconds']}s"
    )
    # each step's heading is a line of its own: a table's title wraps inside the table's width
    render.text(f"2. tools/list: {len(report['tools'])} tools (upstream tools are named <server>__<tool>)")
    render.table(
        ["tool", "description"], [(t["name"], render.first_line(t["description"], 70)) for t in report["tools"]]
    )
    search = report["search"]
    render.text(f'3. coffer__search_tools "{search["query"]}"')
    render.table(["tool", "score"], [(r["name"], f"{r['score']:.3f}") for r in search["results"]])
    call = report["call"]
    outcome = "error" if call["is_error"] else "ok"
    render.text(f"4. called {call['tool']} {call['arguments']} through the gateway -> {outcome}: {call['result']}")
    render.say(
        f"done in {report['total_seconds']}s; the temporary vault is gone. Next: `coffer add NAME -- CMD ARGS...`"
    )
