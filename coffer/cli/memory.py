"""Memory commands: `coffer memory add/list/rm`, and `coffer ask` over notes and indexed resources."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.errors import UsageError

memory_app = typer.Typer(help="Notes kept in the vault, searched by `coffer ask` and `coffer__ask`.")
app.add_typer(memory_app, name="memory")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@memory_app.command("add")
def add(
    text: Annotated[str | None, typer.Argument(help="The note's text (or use --file).")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the note from a UTF-8 file ('-': stdin).")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="A tag; repeat for several.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Keep a note; long notes and files are split into passages. Prints the note's id."""
    from coffer.memory import knowledge as memory

    if (text is None) == (file is None):
        raise UsageError("give the note as TEXT or --file PATH (one of them)")
    source = None
    if file is not None and str(file) == "-":
        text = sys.stdin.read()
    elif file is not None:
        text = memory.read_note_file(file.expanduser())
        source = file.name
    note, created = memory.add_note(text or "", tag or [], source=source)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "note": note.to_dict(), "created": created})
        return
    render.text(note.id)
    if created:
        render.say(f"added note {note.id} ({note.passages} passage{'s' if note.passages != 1 else ''})")
    else:
        render.say(f"note {note.id} already kept; tags now: {', '.join(note.tags) or '-'}")


@memory_app.command("list")
def list_(
    tag: Annotated[str | None, typer.Option("--tag", "-t", help="Only notes with this tag.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the notes in the vault, oldest first."""
    from coffer.memory import knowledge as memory

    notes = memory.list_notes(tag)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "notes": [n.to_dict() for n in notes]})
        return
    if not notes:
        render.say("no notes yet: `coffer memory add TEXT` or `coffer memory add --file PATH`")
        return
    render.table(
        ["id", "created", "tags", "passages", "note"],
        [
            (
                n.id,
                n.created[:16].replace("T", " "),
                ", ".join(n.tags),
                n.passages,
                n.source or render.first_line(n.text, 60),
            )
            for n in notes
        ],
        title=f"{len(notes)} note(s)",
    )


@memory_app.command("rm")
def rm(
    note_id: Annotated[str, typer.Argument(metavar="ID", help="The note's id (or a unique prefix).")],
    as_json: JsonOpt = False,
) -> None:
    """Delete a note and its passages."""
    from coffer.memory import knowledge as memory

    removed = memory.remove_note(note_id)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "removed": removed})
    else:
        render.say(f"removed note {removed}")


def _origin(source: dict[str, Any]) -> str:
    if source["type"] == "memory":
        tags = f" [{', '.join(source['tags'])}]" if source["tags"] else ""
        return f"note {source['id']}{tags}"
    return f"{source['server']} {source['uri']}"


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="What to look up in notes and indexed resources.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Passages to return (1-20).")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Find the passages of notes and upstream resources that answer a question (offline, no model)."""
    from coffer.memory import knowledge as memory

    result = memory.search_vault(question, top_k)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, **result})
        return
    if not result["passages"]:
        searched = result["total_searched"]
        render.say(f"nothing found in {searched} passage(s); add notes with `coffer memory add`")
        return
    render.table(
        ["#", "score", "source", "passage"],
        [
            (n, f"{p['score']:.3f}", _origin(p["source"]), " ".join(p["text"].split()))
            for n, p in enumerate(result["passages"], 1)
        ],
        caption=f"{result['total_searched']} passages searched ({result['ranker']}); {memory.NOTICE}",
    )
