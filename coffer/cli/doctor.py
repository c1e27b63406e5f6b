"""Health commands: `doctor` (start everything once and report) and `refresh` (re-list into the snapshot)."""

from __future__ import annotations

from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.cli.registry import complete_servers

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
JobsOpt = Annotated[
    int | None, typer.Option("--jobs", "-j", min=1, help="Servers starting at once (default: one per CPU, at least 2).")
]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


@app.command()
def doctor(
    servers: Annotated[
        list[str] | None,
        typer.Argument(help="Only these servers (default: all).", autocompletion=complete_servers),
    ] = None,
    as_json: JsonOpt = False,
    jobs: JobsOpt = None,
) -> None:
    """Start every enabled server once: start time, tools, name problems, stderr on failure, token cost."""
    from coffer.manage import doctor as doc
    from coffer.vault import registry

    reg = registry.load()
    for name in servers or []:
        reg.get(name)  # an unknown name is one error line, before anything starts
    total = len([c for c in reg.enabled_servers() if not servers or c.name in servers])
    with render.progress(total, "starting") as advance:
        report = doc.diagnose(jobs, lambda name, ok, summary: advance(name), only=servers)
    from coffer.engine import control

    engine_env = control.check_env()  # what the engine's servers get, against this shell's (None: no engine)
    if engine_env is not None and (note := control.env_note(engine_env)):
        render.warn(note)
    if as_json:
        extra = {} if engine_env is None else {"engine_env": engine_env}
        render.print_json({"version": render.JSON_VERSION, **report.to_dict(), **extra})
    else:
        _show(report)
    if report.failed:
        raise typer.Exit(1)


def _show(report: object) -> None:
    from coffer.manage.doctor import Diagnosis

    assert isinstance(report, Diagnosis)
    if not report.servers:
        render.say("no servers yet: `coffer add NAME -- COMMAND ARGS...` or `coffer import CLIENT`")
        return
    render.table(
        ["server", "status", "start", "tools", "tokens", "problems"],
        [
            (
                s.name,
                s.status,
                _seconds(s.init_seconds),
                "-" if s.tools is None else s.tools,
                f"{s.tokens:,}" + (" (snapshot)" if s.tokens_from == "snapshot" else "") if s.tokens else "-",
                "; ".join(s.name_problems + s.notes),
            )
            for s in report.servers
        ],
    )
    for s in report.servers:
        if s.error:
            render.say(f"{s.name}: {s.error}")
            for line in s.stderr_tail:
                render.say(f"  | {line}")
    if report.shared_names:
        shared = ", ".join(f"{n} ({', '.join(owners)})" for n, owners in report.shared_names.items())
        render.say(f"tool names served by several servers (exposed apart, but easy to confuse): {shared}")
    c = report.confinement
    render.say(f"confinement: {c['describe']}")
    cached = report.registry_cache
    for reg in cached.get("registries", []):
        read = f"{reg['entries']} servers, read {reg['age']}" if reg["refreshed"] else "never read"
        render.say(f"registry cache: {reg['url']}: {read} (background refresh {cached['refresh']})")
    total = report.total_tokens
    costly = ", ".join(f"{s.name} {s.tokens:,} ({100 * s.tokens // max(total, 1)}%)" for s in report.costliest())
    render.say(
        f"advertised schemas: {total:,} tokens, built-ins {report.builtin_tokens:,}"
        + (f"; costliest: {costly}" if costly else "")
    )
    if report.failed:
        render.say(f"{len(report.failed)} server(s) need attention: {', '.join(report.failed)}")


def _details(r: object) -> str:
    from coffer.manage.refresh import Refreshed

    assert isinstance(r, Refreshed)
    if r.error:
        return r.error
    return f"{r.resources_indexed} text resource(s) indexed" if r.resources_indexed else ""


@app.command()
def refresh(
    servers: Annotated[list[str] | None, typer.Argument(help="Servers to refresh (default: all enabled).")] = None,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start servers once: rewrite their catalogue entries, pin their tools, re-index their text resources."""
    from coffer.manage import refresh as use
    from coffer.vault import paths

    configs = use.targets(servers)
    if not configs:
        render.say("no enabled servers to refresh")
        return
    with render.progress(len(configs), "refreshing") as advance:
        results = use.refresh(configs, jobs, lambda name, ok, summary: advance(name))
    failed = [r for r in results if r.status != "ok"]
    if as_json:
        rows = [r.__dict__ for r in results]
        render.print_json({"version": render.JSON_VERSION, "snapshot": str(paths.snapshot_path()), "servers": rows})
    else:
        render.table(
            ["server", "result", "tools", "start", "details"],
            [
                (r.name, r.status, "-" if r.tools is None else r.tools, _seconds(r.init_seconds), _details(r))
                for r in results
            ],
        )
        for r in failed:
            for line in r.stderr_tail:
                render.say(f"{r.name}: | {line}")
        for r in results:
            if r.held:
                held = ", ".join(r.held)
                render.warn(f"{r.name}: held until approved (changed or new): {held}; see `coffer diff {r.name}`")
        render.say(f"refreshed {len(results) - len(failed)} of {len(results)} server(s) into {paths.snapshot_path()}")
    if failed:
        raise typer.Exit(1)
