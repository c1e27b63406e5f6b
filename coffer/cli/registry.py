"""Registry commands: remove, list, show, enable, disable, paths, completions (`add`, `edit`: coffer.cli.adding)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.errors import CofferError
from coffer.vault import catalogue, paths, registry

DEFAULT_TIMEOUT = registry.DEFAULT_TIMEOUT_S
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def complete_servers(incomplete: str) -> list[str]:
    """Server names for shell completion (nothing when the registry cannot be read)."""
    try:
        return [n for n in registry.load().servers if n.startswith(incomplete)]
    except CofferError:
        return []


def complete_targets(incomplete: str) -> list[str]:
    """Server names, and SERVER__TOOL names from the catalogue snapshot, for shell completion."""
    try:
        reg, snap = registry.load(), catalogue.load_snapshot()
    except CofferError:
        return []
    names = list(reg.servers)
    for name, cfg in reg.servers.items():
        names += [f"{name}{registry.SEP}{t.tool}" for t in catalogue.server_tools(snap, name, cfg.exposed_prefix)]
    return [n for n in names if n.startswith(incomplete)]


@app.command()
def remove(
    name: Annotated[str, typer.Argument(help="Server to remove.", autocompletion=complete_servers)],
    as_json: JsonOpt = False,
) -> None:
    """Remove a server from the vault, with its approval, pinned tools, catalogue entry and indexed resources."""
    from coffer.manage import servers

    secrets = servers.remove_server(name)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "removed": name, "secrets_removed": secrets})
    else:
        stored = f" and the secrets its install stored: {', '.join(secrets)}" if secrets else ""
        render.say(f"removed '{name}'{stored}")


@app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """List registered servers (env values masked)."""
    from coffer.manage import states

    reg = registry.load()
    for problem in reg.unknown_keys():
        render.warn(problem)
    rows = states.server_rows(reg, states.engine_status())
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "servers": rows})
        return
    if not rows:
        render.say("no servers yet: `coffer add NAME -- COMMAND ARGS...`")
        return
    render.table(
        ["server", "state", "launch", "tools", "env"],
        [
            (
                r["name"],
                _state_text(r),
                reg.servers[r["name"]].launch_line(),
                "?" if r["tools"] is None else f"{r['tools']['enabled']}/{r['tools']['total']}",
                " ".join(f"{k}={v}" for k, v in r["env"].items()),
            )
            for r in rows
        ],
        title=f"{render.plural(len(rows), 'server')} in {reg.path}",
    )
    for r in rows:
        if r["state"] in states.TROUBLE:
            render.say(f"{r['name']}: {r['reason']}")


_OWN = "; under the engine each session runs its own, from its first call to it"


def _state_text(row: dict[str, Any]) -> str:
    """What a person needs to know first: will it run, and what to do if not (an error's text is said
    under the table, not in it)."""
    state, name = str(row["state"]), row["name"]
    if state == "needs approval":
        return f"needs approval: `coffer diff {name}`"
    if state == "tools held":
        return f"{len(row['held'])} held: `coffer diff {name}`"
    if state == "needs sign-in":
        return f"needs sign-in: `coffer auth {name}`"
    if state == "not listed yet":
        return f"not listed yet: `coffer refresh {name}`"
    if state in ("did not list", "failed", "down"):
        return f"{state}: `coffer doctor {name}`"
    return state


def _confinement(cfg: registry.ServerConfig) -> dict[str, Any] | None:
    """What a stdio server may read, write and reach, and by which mechanism (coffer.upstreams.explain)."""
    if cfg.url:
        return None
    from coffer.upstreams import explain

    return explain.access(cfg)


@app.command()
def show(
    name: Annotated[str, typer.Argument(help="Server to show.", autocompletion=complete_servers)],
    as_json: JsonOpt = False,
) -> None:
    """Show one server: launch config (env masked), how the engine shares it, and its tools."""
    from coffer.codemode import policy
    from coffer.gateway import sessions
    from coffer.manage import states
    from coffer.upstreams import explain

    reg = registry.load()
    cfg = reg.get(name)
    snap = catalogue.load_snapshot()
    disabled = set(cfg.disabled_tools)
    state = states.server_states(reg, snap, states.engine_status())[name]
    held = set(state["held"])
    tools: list[dict[str, Any]] = [
        {
            "name": t.name,
            "tool": t.tool,
            "enabled": t.tool not in disabled,
            "held": t.name in held or t.tool in held,
            "description": t.description,
            "script": policy.refusal(cfg, t.tool, t.raw) is None,  # a coffer__run script may call it
        }
        for t in catalogue.server_tools(snap, name, cfg.exposed_prefix)
    ]
    entry = snap.servers.get(name) if snap is not None else None
    data = cfg.to_dict(mask=True) | state | {"tools": tools, "catalogued": entry is not None and not entry.error}
    data["list_error"] = entry.error if entry is not None else None
    data["listed_for"] = list(entry.told) if entry is not None else None
    how = sessions.decide(cfg, entry.seen if entry is not None else ())
    data["share"] = {"mode": how.mode, "why": how.reason}
    data["confinement"] = _confinement(cfg)
    scripts = policy.enabled(reg.settings)
    allowed = [t["name"] for t in tools if t["script"]]
    data["code_mode"] = {"on": scripts, "allows": policy.describe(cfg), "tools": allowed}
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "server": data})
        return
    hidden = (
        "tools",
        "name",
        "catalogued",
        "held",
        "list_error",
        "state",
        "share",
        "confinement",
        "sandbox",
        "code_mode",
        "listed_for",
        "reason",
    )
    told = data.get("listed_for")
    listed = (
        []
        if told is None
        else [
            (
                "tools listed for",
                "a client that declared "
                + (", ".join(told) if told else "none of sampling, elicitation, roots")
                + ": a server may list some tools only for clients that can take them, so its count follows the"
                " client that listed it last",
            )
        ]
    )
    code_mode = (
        f"scripts may call {policy.describe(cfg)} ({len(allowed)} of {len(tools)})"
        if scripts
        else "off (`[settings] code_mode = true` turns coffer__run on)"
    )
    confinement = data["confinement"]
    render.kv(
        [("state", _state_text(data)), ("share", f"{how.mode} ({how.reason})" + (_OWN if how.per_session else ""))]
        + (explain.lines(cfg) if confinement else [])
        + [(k, v) for k, v in data.items() if k not in hidden]
        + listed
        + [("code mode", code_mode), ("launch", cfg.launch_line())],
        title=name,
    )
    if data["reason"]:
        render.say(f"{data['state']}: {data['reason']}")
    if not data["catalogued"]:
        if data["state"] not in ("did not list", "not listed yet"):  # those said why, and what lists it
            render.say(f"no tools catalogued yet: run `coffer refresh {name}`")
        return
    render.table(
        ["tool", "enabled", *(["script"] if scripts else []), "description"],
        [
            (
                t["name"],
                "held" if t["held"] else ("yes" if t["enabled"] else "no"),
                *(["yes" if t["script"] else "no"] if scripts else []),
                render.first_line(t["description"], 70),
            )
            for t in tools
        ],
    )


def _toggle(targets: list[str], enabled: bool, force: bool, as_json: bool = False) -> None:
    from coffer.manage.tools import toggle_all

    done = toggle_all(targets, enabled, force)
    if as_json:
        results = [{"target": d.target, "changed": d.changed} for d in done]
        data: dict[str, Any] = {"version": render.JSON_VERSION, "enabled": enabled, "results": results}
        if len(done) == 1:  # the shape of one target, as before several were taken
            data |= results[0]
        render.print_json(data)
        return
    state = "enabled" if enabled else "disabled"
    for d in done:
        render.say(f"{d.target} {state}" if d.changed else f"{d.target} was already {state}")


ForceOpt = Annotated[bool, typer.Option("--force", help="Accept a tool name not in the catalogue.")]
TargetsArg = Annotated[
    list[str], typer.Argument(help="SERVER or SERVER__TOOL, one or more.", autocompletion=complete_targets)
]


@app.command()
def enable(targets: TargetsArg, force: ForceOpt = False, as_json: JsonOpt = False) -> None:
    """Enable servers or tools (all or none: an unknown one changes nothing)."""
    _toggle(targets, True, force, as_json)


@app.command()
def disable(targets: TargetsArg, force: ForceOpt = False, as_json: JsonOpt = False) -> None:
    """Disable servers or tools: no longer listed, searchable or callable (all or none)."""
    _toggle(targets, False, force, as_json)


@app.command("paths")
def paths_(as_json: JsonOpt = False) -> None:
    """Show where Coffer keeps its files (COFFER_HOME moves them all)."""
    data = {k: str(v) for k, v in paths.all_paths().items()}
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "paths": data})
    else:
        render.kv(data.items())


@app.command()
def completions(shell: Annotated[str, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print the shell completion script (also shipped in completions/)."""
    from coffer.cli.completion import script

    render.text(script(shell))
