"""`coffer status`: the vault's engine, its sessions and the upstream processes it holds."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from coffer.cli import render
from coffer.cli._app import app

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


@app.command()
def status(
    as_json: JsonOpt = False,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the engine (its upstreams stop with it).")] = False,
) -> None:
    """Show the engine behind `coffer serve`: its sessions, each server's state, pids, share mode, memory."""
    from coffer.engine import control

    if stop:
        stopped = control.stop()
        if as_json:
            render.print_json({"version": render.JSON_VERSION, "stopped": stopped})
        else:
            render.say("engine stopped" if stopped else "no engine is running for this vault")
        return
    from coffer.manage import states

    state = states.engine_status()
    servers = states.states_or_none(state)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "engine": state, "servers": servers})
        return
    if state is None:
        render.say("no engine is running for this vault (`coffer serve` starts one)")
        return
    if state.get("registry_error"):
        render.warn(f"{state['registry_error']}: the engine serves the last good registry until it parses")
    engine = state["engine"]
    up_for = time.time() - float(engine["started"])
    render.kv(
        [
            ("pid", engine["pid"]),
            ("up", f"{up_for:.0f} s"),
            ("sessions", len(state["sessions"])),
            ("memory (PSS)", f"{engine['pss_kib'] / 1024:.1f} MiB"),
        ],
        title="engine",
    )
    if state["sessions"]:
        render.table(
            ["front pid", "profile", "serves", "for"],
            [
                (
                    s["pid"],
                    s["profile"] or "-",
                    f"http://127.0.0.1:{s['http_port']}/mcp" if s.get("http_port") else "stdio",
                    f"{time.time() - float(s['since']):.0f} s",
                )
                for s in state["sessions"]
            ],
            title="sessions",
        )
    rows = [
        (
            u["name"],
            (servers or {}).get(u["name"], {}).get("state", "not in the vault"),
            "idle: starts at its first call" if u["state"] == "idle" and u.get("session") else u["state"],
            u["share"] if u.get("session") is None else f"session of pid {u['session']}",
            " ".join(str(p) for p in u["pids"]),
            f"{u['pss_kib'] / 1024:.1f} MiB",
            u.get("sandbox") or "-",
        )
        for u in state["upstreams"]
    ]
    render.table(
        ["server", "state", "process", "share", "pids", "memory (PSS)", "confinement"], rows, title="upstreams"
    )
    for name, said in (servers or {}).items():
        if said["state"] in states.TROUBLE:
            render.say(f"{name}: {said['reason']}")
