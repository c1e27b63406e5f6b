"""`coffer search`, `coffer find` and `coffer serve` without Typer: the same commands, started in a
fraction of the time.

Typer builds a pydantic validator for every parameter it parses, and importing Typer and pydantic
costs about 0.25 s, a quarter of a `coffer search` run. This module recognises exactly the command
lines `coffer search` accepts (one query; `-k/--top-k N`, `--json`, `--ranker NAME`, in any order;
`--` before a query that starts with "-") and answers them with the same code the Typer command runs
(`show_search`). Anything else (`--help`, a typo, a repeated option, a bad value) returns None and
goes to the Typer app, which owns every usage message, so the two paths cannot disagree on errors.

`coffer serve` (stdio, through the engine: what every agent session spawns) is a front that copies
bytes to the engine for as long as the session lasts; started here it never imports Typer, rich or
pydantic, so each open session costs about 9 MiB less memory (PSS) and starts sooner.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

_TOP_K = ("-k", "--top-k")


def parse_search(argv: Sequence[str]) -> tuple[str, int, bool, str] | None:
    """(query, top_k, as_json, ranker) for a well-formed `search` command line, else None."""
    if not argv or argv[0] != "search":
        return None
    query: str | None = None
    top_k: str | None = None
    ranker: str | None = None
    as_json = False
    args = list(argv[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            rest = args[i:]
            if len(rest) != 1 or query is not None:
                return None
            query = rest[0]
            break
        if not arg.startswith("-") or arg == "-":
            if query is not None or arg == "-":
                return None  # a second positional: Typer's "unexpected extra argument"
            query = arg
            continue
        name, eq, value = arg.partition("=")
        if name == "--json" and not eq:
            if as_json:
                return None
            as_json = True
            continue
        if name.startswith("-k") and len(name) > 2 and not name.startswith("--") and not eq:
            name, value, eq = "-k", name[2:], "="  # -k3
        if name in _TOP_K or name == "--ranker":
            if not eq:
                if i >= len(args):
                    return None
                value = args[i]
                i += 1
            if name == "--ranker":
                from coffer.ranking import MODES  # the rankers the command's --ranker offers

                if ranker is not None or value not in MODES:
                    return None
                ranker = value
            else:
                if top_k is not None or not value.isascii() or not value.isdigit():
                    return None
                top_k = value
            continue
        return None
    if query is None:
        return None
    return query, int(top_k) if top_k is not None else 5, as_json, ranker or "hybrid"


def show_search(query: str, top_k: int, as_json: bool, ranker: str) -> None:
    """Rank the saved catalogue and print the result: the body of `coffer search` on either path."""
    from coffer.cli import render
    from coffer.manage.search import hidden_note, search_or_lacking

    result, lacking = search_or_lacking(query, top_k, ranker)
    if result.note:
        render.say(result.note)
    hidden = hidden_note(result.hidden)
    if hidden:
        render.say(hidden)
    found: list[dict[str, Any]] = [{"name": d.id, "description": d.text, "score": s} for d, s in result.hits]
    if as_json:
        answer = {"version": render.JSON_VERSION, "query": query, "ranker": result.ranker}
        answer |= {"total_searched": result.total, "tools": found, "hidden": result.hidden}
        if lacking:  # what coffer__search_tools tells an agent of what the vault lacks
            answer |= lacking.fields(found)
        render.print_json(answer)
        return
    if lacking and lacking.abstains:
        words = ", ".join(repr(w) for w in lacking.words)
        render.say(f"nothing in this vault serves {words}: closest here is {', '.join(d['name'] for d in found[:3])}")
        _registry_servers(lacking.servers)
        return
    if not result.hits:
        render.say(f"no tool matches {query!r} ({result.total} tools searched with {result.ranker})")
        return
    render.table(
        ["tool", "score", "description"],
        [(d.id, f"{s:.3f}", render.first_line(d.text, 80)) for d, s in result.hits],
        caption=f"{result.ranker} ranker, {result.total} tools searched",
    )
    if lacking:  # words no tool here knows, that registry servers do
        render.say(f"no tool here knows {', '.join(repr(w) for w in lacking.words)}; registry servers that do:")
        _registry_servers(lacking.servers)


def _registry_servers(servers: list[dict[str, str]]) -> None:
    """The registry cache's servers for what the vault lacks, with the line that adds each (none: nothing)."""
    from coffer.cli import render

    if servers:
        render.table(
            ["registry server", "about", "add it"],
            [(o["name"], render.first_line(o["about"], 60), o["install"]) for o in servers],
            caption="from the registry cache (coffer find for more)",
        )


def parse_find(argv: Sequence[str]) -> tuple[str, str | None, int, str, bool] | None:
    """(query, registry, limit, mode, as_json) for a well-formed `find` command line, else None: one
    query; `--json`, `--offline`, `--refresh`, `-n/--limit N`, `--registry URL` once each."""
    if not argv or argv[0] != "find":
        return None
    query: str | None = None
    values: dict[str, str] = {}
    flags: set[str] = set()
    args = list(argv[1:])
    while args:
        arg = args.pop(0)
        if arg == "--":
            if len(args) != 1 or query is not None:
                return None
            query = args.pop()
        elif not arg.startswith("-") or arg == "-":
            if query is not None or arg == "-":
                return None
            query = arg
        elif arg in ("--json", "--offline", "--refresh") and arg not in flags:
            flags.add(arg)
        else:
            name, eq, value = arg.partition("=")
            name = "--limit" if name == "-n" else name
            if name not in ("--limit", "--registry") or name in values:
                return None
            if not eq:
                if not args:
                    return None
                value = args.pop(0)
            values[name] = value
    limit = values.get("--limit", "10")
    if query is None or not limit.isascii() or not limit.isdigit() or {"--offline", "--refresh"} <= flags:
        return None
    mode = "offline" if "--offline" in flags else "refresh" if "--refresh" in flags else "auto"
    return query, values.get("--registry"), int(limit), mode, "--json" in flags


def show_find(query: str, url: str | None, limit: int, mode: str, as_json: bool) -> None:
    """Rank the vault's registries' cached servers and print them: the body of `coffer find` on either path."""
    from coffer.cli import render
    from coffer.manage import discover

    with render.counting("reading the registry (servers)") as read:
        found = discover.find(query, url, limit, mode, on_page=read)
    if as_json:
        render.print_json(
            {
                "version": render.JSON_VERSION,
                "query": query,
                "servers": found.hits,
                "searched": found.searched,
                "registries": found.registries,
                "notes": found.notes,
            }
        )
        return
    for note in found.notes:
        render.warn(note)
    rows = [
        (
            h["add"],
            ("" if h["add"] == h["name"] else h["name"]) + (" (maker's own)" if h["makers_own"] else ""),
            h["version"],
            ", ".join(h["runs_as"]),
            h["fit"],
            render.first_line(_what(h["title"], h["description"]), 70)
            + (f" (+{len(h['also'])} alike)" if h["also"] else ""),
            f"yes ({h['installed']})" if h["installed"] else "",
        )
        for h in found.hits
    ]
    ages = "; ".join(f"{r['url']}: {r['entries']} servers, read {r['age']}" for r in found.registries)
    if rows:
        render.table(
            ["add", "registry name", "version", "runs as", "fit", "what", "installed"],
            rows,
            caption=ages,
            whole=["add"],
        )
        render.say("install one: `coffer add ADD` (`--dry-run` first shows what it runs and asks)")
    elif found.searched:
        render.text(f"nothing in {found.searched} registry servers fits '{query}' ({ages})")


def _what(title: str, description: str) -> str:
    """A registry server in a line: its title and its description, without saying the same twice."""
    if not title or title.lower() in description.lower():
        return description or title
    return f"{title}: {description}" if description else title


def parse_serve(argv: Sequence[str]) -> tuple[str | None] | None:
    """(profile,) for `serve` or `serve --profile NAME` through the engine (stdio), else None."""
    if not argv or argv[0] != "serve":
        return None
    from coffer.engine.hosting import in_process  # here: 14 ms that `coffer find` does not need

    if in_process():
        return None
    rest = list(argv[1:])
    if not rest:
        return (None,)
    if len(rest) == 1 and rest[0].startswith("--profile=") and len(rest[0]) > len("--profile="):
        return (rest[0].partition("=")[2],)
    if len(rest) == 2 and rest[0] == "--profile" and rest[1] and not rest[1].startswith("-"):
        return (rest[1],)
    return None


def serve_front(profile: str | None) -> int:
    """`coffer serve [--profile NAME]`: the command's own checks, then the engine's front (never returns
    but by exiting); a CofferError is its one line and exit code, as on the Typer path."""
    from coffer.errors import CofferError

    try:
        if profile is not None:
            from coffer.vault import registry

            registry.load().profile(profile)  # an unknown profile is one error line, before anything starts
        from coffer.engine import hosting

        hosting.serve(None, profile)
    except CofferError as exc:
        from coffer.cli import render

        render.error(str(exc))
        return exc.exit_code


def run(argv: Sequence[str]) -> int | None:
    """The exit code of a `coffer search` or `coffer find` answered here (a `coffer serve` front runs here and exits),
    or None: hand the command line to Typer."""
    served = parse_serve(argv)
    if served is not None:
        return serve_front(*served)
    searched = parse_search(argv)
    found = parse_find(argv) if searched is None else None
    if searched is None and found is None:
        return None
    from coffer.errors import CofferError

    # The ranker multiplies with einsum, never BLAS, so BLAS threads only cost: starting them is ~40 ms
    # of numpy's import. This process starts no children that would inherit the setting.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        if searched is not None:
            show_search(*searched)
        elif found is not None:
            show_find(*found)
        sys.stdout.flush()
    except CofferError as exc:
        from coffer.cli import render

        render.error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("Aborted!\n")  # what Typer (click) says
        return 1
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        # `coffer search ... | head`: stop quietly, as click does. Point stdout at /dev/null so the
        # interpreter's final flush of what is still buffered does not raise again (Python's advice).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0
