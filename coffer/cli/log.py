"""`coffer log` (latest calls, `--tail`, filters, `--json`) and `coffer log stats`."""

from __future__ import annotations

import re
import sys
import time
from datetime import datetime
from typing import Annotated, Any

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.errors import UsageError

log_app = typer.Typer(
    invoke_without_command=True,
    rich_markup_mode=None,
    help="Show the invocation log: one row per gateway call (never arguments or results).",
)
app.add_typer(log_app, name="log")

_SINCE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}

ServerOpt = Annotated[str | None, typer.Option("--server", help="Only this server.")]
ToolOpt = Annotated[str | None, typer.Option("--tool", help="Only this tool (TOOL or SERVER__TOOL).")]
OutcomeOpt = Annotated[
    str | None, typer.Option("--outcome", help="ok, error, timeout, cancelled or refused (comma-separated).")
]
SinceOpt = Annotated[str | None, typer.Option("--since", help="Only calls since 30m, 1h, 2d, 1w or an ISO time.")]
ClientOpt = Annotated[str | None, typer.Option("--client", help="Only this client (name from initialize).")]
MemberOpt = Annotated[
    str | None, typer.Option("--member", help="Only this team member (`serve --http --team`: the token's sub).")
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document (with --tail: one JSON object per line, as calls come).")
]


def parse_since(text: str, *, now: float | None = None) -> float:
    """`30m`, `1h`, `2d`, `1w` ago, or an ISO date/time (local time unless it has an offset)."""
    now = time.time() if now is None else now
    value = text.strip()
    match = _SINCE.fullmatch(value.lower())
    if match:
        return now - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"invalid --since '{text}': use e.g. 30m, 1h, 2d, 1w or an ISO date") from None
    return parsed.timestamp()


def parse_outcomes(text: str | None) -> tuple[str, ...]:
    """`error` or `error,timeout`; raises UsageError on an unknown outcome."""
    from coffer.log.calls import OUTCOMES

    if not text:
        return ()
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values or any(v not in OUTCOMES for v in values):
        raise UsageError(f"invalid --outcome '{text}': choose from {', '.join(OUTCOMES)}")
    return values


def _filters(
    server: str | None,
    tool: str | None,
    outcome: str | None,
    since: str | None,
    client: str | None,
    member: str | None = None,
) -> Any:
    from coffer.log.query import Filters

    return Filters(
        server=server,
        tool=tool,
        outcomes=parse_outcomes(outcome),
        client=client,
        since=None if since is None else parse_since(since),
        member=member,
    )


def _open_pruned() -> Any:
    """Open the log and apply retention (cheap: an indexed delete), as every `coffer log` call does."""
    from coffer.errors import RegistryError
    from coffer.log import calls as log
    from coffer.vault import registry

    db = log.open_log()
    try:
        settings = registry.load().settings
    except RegistryError as exc:
        render.say(f"coffer: warning: not pruning the log: {exc}")  # the log is how you debug; still show it
        return db
    log.prune(db, log.retention_days(settings))
    return db


def _client(row: dict[str, Any]) -> str:
    name = row["client_name"] or "?"
    return f"{name} {row['client_version']}" if row["client_version"] else name


def _tool(row: dict[str, Any]) -> str:
    """The tool, with the coffer__run it belongs to: a run's own id, or the run a script's call was in."""
    if row.get("parent"):
        return f"{row['tool']} (in run {row['parent'][:6]})"
    return f"{row['tool']} {row['run'][:6]}" if row.get("run") else str(row["tool"])


def _line(row: dict[str, Any]) -> str:
    error = f" {row['error_class']}" if row["error_class"] else ""
    who = f"{row['member']} via " if row.get("member") else ""
    return (
        f"{render.when(row['ts'])}  {who}{_client(row)}  {row['server']}__{_tool(row)}  "
        f"{row['duration_ms']:.1f} ms  {row['outcome']}{error}"
    )


@log_app.callback()
def show(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many of the latest calls to show.")] = 20,
    tail: Annotated[bool, typer.Option("--tail", "-f", help="Keep printing new calls until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between polls with --tail.")] = 0.5,
    server: ServerOpt = None,
    tool: ToolOpt = None,
    outcome: OutcomeOpt = None,
    since: SinceOpt = None,
    client: ClientOpt = None,
    member: MemberOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the latest calls recorded by `coffer serve` (who, when, which tool, how long, outcome)."""
    filters = _filters(server, tool, outcome, since, client, member)
    ctx.obj = filters
    if ctx.invoked_subcommand is not None:
        return
    if limit < 0:
        raise UsageError(f"invalid --limit {limit}: must be 0 or more")
    if not 0.05 <= interval <= 60:
        raise UsageError(f"invalid --interval {interval}: must be between 0.05 and 60 seconds")
    from coffer.log import query as log

    db = _open_pruned()
    start = log.last_id(db)
    rows = log.query(db, filters, limit=limit) if limit else []
    if as_json and not tail:
        render.print_json({"version": render.JSON_VERSION, "calls": rows})
    elif as_json:
        for row in rows:
            render.print_json_line(row)
    elif rows:
        render.table(
            ["time", "client", "server", "tool", "ms", "outcome", "error"],
            [
                (
                    render.when(r["ts"]),
                    _client(r),
                    r["server"],
                    _tool(r),
                    f"{r['duration_ms']:.1f}",
                    r["outcome"],
                    r["error_class"],
                )
                for r in rows
            ],
        )
    elif not tail and limit:
        render.say("no calls recorded yet" if filters == log.Filters() else "no calls match")
    if tail:
        _follow(db, filters, start, interval, as_json)


def _follow(db: Any, filters: Any, start: int, interval: float, as_json: bool) -> None:
    from coffer.log import query as log

    try:
        for row in log.tail(db, filters, after_id=start, interval=interval):
            if as_json:
                render.print_json_line(row)
            else:
                render.text(_line(row))
                sys.stdout.flush()
    except (KeyboardInterrupt, BrokenPipeError):
        raise typer.Exit(0) from None


@log_app.command("stats")
def stats_cmd(
    ctx: typer.Context,
    server: ServerOpt = None,
    tool: ToolOpt = None,
    outcome: OutcomeOpt = None,
    since: SinceOpt = None,
    client: ClientOpt = None,
    member: MemberOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Per tool: calls, errors (error, timeout, refused), p50/p95 duration, last used; then every listed
    tool never called in that time (candidates for `coffer profile prune` or `coffer disable`)."""
    from coffer.log import query as log
    from coffer.manage.usage import usage

    filters = _filters(server, tool, outcome, since, client, member)
    if filters == log.Filters() and isinstance(ctx.obj, log.Filters):
        filters = ctx.obj  # `coffer log --since 1d stats` filters too
    db = _open_pruned()  # old rows go first, as for `coffer log`
    try:
        found = usage(filters, db)
    finally:
        db.conn.close()
    rows, never = found["stats"], found["never_called"]
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "stats": rows, "never_called": never})
        return
    if rows:
        render.table(
            ["server", "tool", "calls", "errors", "error rate", "p50 ms", "p95 ms", "last used"],
            [
                (
                    r["server"],
                    r["tool"],
                    r["count"],
                    r["errors"],
                    f"{r['error_rate']:.1%}",
                    f"{r['p50_ms']:.1f}",
                    f"{r['p95_ms']:.1f}",
                    render.when(r["last_used"]),
                )
                for r in rows
            ],
        )
    else:
        render.say("no calls recorded yet" if filters == log.Filters() else "no calls match")
    if never:
        title = f"listed, never called{' since ' + since if since else ''} ({len(never)})"
        render.table(["tool", "server"], [(t["name"], t["server"]) for t in never], title=title)
