"""`coffer add` (a launch line, a URL, or a server from an MCP registry by name) and `coffer edit`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from coffer.cli import render
from coffer.cli._app import app
from coffer.cli.registry import JsonOpt, complete_servers
from coffer.errors import CofferError, UsageError
from coffer.vault import registry

if TYPE_CHECKING:
    from coffer.manage.prefetch import Fetched

DEFAULT_TIMEOUT = registry.DEFAULT_TIMEOUT_S


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"invalid {what} '{item}': expected KEY=VALUE")
        out[key] = value
    return out


SandboxOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="auto: confined (the default policy); none: confined with no network at all; off: NOT confined.",
    ),
]
AllowReadOpt = Annotated[
    list[str] | None, typer.Option("--allow-read", metavar="PATH", help="Confined: also readable (repeat).")
]
AllowWriteOpt = Annotated[
    list[str] | None, typer.Option("--allow-write", metavar="PATH", help="Confined: also writable (repeat).")
]
AllowSecretOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-secret",
        metavar="PATH",
        help="Confined: also readable, though it is a secret place (~/.kube, ~/.aws/config) Coffer hides (repeat).",
    ),
]
AllowHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        metavar="HOST",
        help="Confined: reach only these hosts (repeat); localhost:PORT opens that local service.",
    ),
]


@app.command()
def add(
    name: Annotated[
        str,
        typer.Argument(
            help="Server name (lowercase letters, digits, '-'); or, with no command and no --url, a registry "
            "name (io.github.github/github-mcp-server) or a short name `coffer find` shows, to install."
        ),
    ],
    command: Annotated[list[str] | None, typer.Argument(help="After --: the command and its arguments.")] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", "-e", help="KEY=VALUE; VALUE may be ${VAR}. From a registry: answers an input."),
    ] = None,
    cwd: Annotated[Path | None, typer.Option("--cwd", help="Working directory for the server.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="A streamable HTTP server instead of a command.")] = None,
    header: Annotated[list[str] | None, typer.Option("--header", "-H", help="KEY=VALUE for --url.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to start and per call.")] = DEFAULT_TIMEOUT,
    disabled: Annotated[bool, typer.Option("--disabled", help="Register it disabled.")] = False,
    no_probe: Annotated[bool, typer.Option("--no-probe", help="Do not start it once to list its tools.")] = False,
    as_json: JsonOpt = False,
    oauth_client_id: Annotated[
        str | None,
        typer.Option("--oauth-client-id", help="A client registered with its authorization server."),
    ] = None,
    oauth_client_secret: Annotated[
        str | None, typer.Option("--oauth-client-secret", help="That client's secret (kept in the secret store).")
    ] = None,
    prefix: Annotated[
        str | None,
        typer.Option("--prefix", help="Expose tools and prompts as PREFIX__NAME ('' for bare names); default NAME."),
    ] = None,
    share: Annotated[
        str,
        typer.Option(
            "--share",
            help="auto, shared (one process), session (one per engine session) or member (one per team member).",
        ),
    ] = "auto",
    exchange: Annotated[
        bool,
        typer.Option(
            "--exchange",
            help="With --url and --share member: a team member reaches it with a token the team's provider "
            "issues for it in exchange for the member's own (RFC 8693).",
        ),
    ] = False,
    sandbox: SandboxOpt = None,
    allow_read: AllowReadOpt = None,
    allow_write: AllowWriteOpt = None,
    allow_host: AllowHostOpt = None,
    allow_secret: AllowSecretOpt = None,
    from_registry: Annotated[
        str | None, typer.Option("--registry", metavar="URL", help="From a registry: this one, not [registries].")
    ] = None,
    as_name: Annotated[
        str | None, typer.Option("--as", metavar="NAME", help="From a registry: the vault name (default: short).")
    ] = None,
    via: Annotated[
        str | None, typer.Option("--via", help="From a registry: run its npm, pypi or oci package, or its remote.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="From a registry: print what would run and be asked; change nothing.")
    ] = False,
) -> None:
    """Register an upstream MCP server: `coffer add NAME -- CMD ARGS...`, `coffer add NAME --url URL`, or
    from an MCP registry by name: `coffer add io.github.github/github-mcp-server` (see `coffer find`)."""
    from coffer.manage import servers

    if not command and not url:
        _add_from_registry(
            name, _pairs(env, "--env"), from_registry, as_name, via, dry_run, not no_probe, as_json, timeout
        )
        return
    if from_registry or as_name or via or dry_run:
        raise UsageError("--registry, --as, --via and --dry-run apply to installing from a registry (no command)")
    if url and command:
        raise UsageError("give either a command (after --) or --url, not both")
    if (header or oauth_client_id or oauth_client_secret) and not url:
        raise UsageError("--header, --oauth-client-id and --oauth-client-secret only apply to --url servers")
    if oauth_client_secret and not oauth_client_id:
        raise UsageError("--oauth-client-secret needs --oauth-client-id")
    if timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if share not in registry.SHARE_MODES:
        raise UsageError(f"invalid --share '{share}': expected one of {', '.join(registry.SHARE_MODES)}")
    if exchange and (not url or share != "member" or oauth_client_id):
        raise UsageError("--exchange needs --url and --share member (and no --oauth-client-id)")
    warnings = servers.check_grants(allow_read, allow_write, allow_secret)
    confined = registry.sandbox_option(sandbox, allow_read, allow_write, allow_host, allow_secret)
    for warning in warnings:
        render.warn(warning)
    if url and confined != "auto":
        raise UsageError("--sandbox and --allow-* apply to servers Coffer launches (a command), not --url")
    cfg = registry.ServerConfig(
        name=registry.validate_name(name),
        command=command[0] if command else None,
        args=list(command[1:]) if command else [],
        env=_pairs(env, "--env"),
        cwd=str(cwd.expanduser().resolve()) if cwd else None,
        url=url,
        headers=_pairs(header, "--header"),
        enabled=not disabled,
        timeout=timeout,
        prefix=None if prefix is None else registry.validate_prefix(prefix),
        oauth=bool(oauth_client_id),
        share=share,
        sandbox=confined,
        exchange={} if exchange else None,
    )
    client = (oauth_client_id, oauth_client_secret) if oauth_client_id else None

    def told(added: registry.ServerConfig) -> None:
        render.say(f"added '{added.name}': {added.launch_line()}")
        note = servers.hidden_note(added.name)
        if note:
            render.warn(note)

    probe = not no_probe and not exchange  # only a member's token opens it: it is listed at a member's first need
    from coffer.manage.prefetch import add_fetched

    with render.working(f"adding '{cfg.name}'") as live:
        fetching, fetched = (None, None) if as_json else _fetch_shown(live, f"'{cfg.name}''s package", cfg.name)
        added = add_fetched(
            cfg,
            probe=probe,
            oauth_client=client,
            on_registered=None if as_json else told,
            on_fetch=fetching,
            on_fetched=fetched,
        )
    render_added(added, as_json)


def _fetch_shown(live: render.Working, what: str, name: str) -> tuple[Callable[[str], None], Callable[[Fetched], None]]:
    """How a new server's package fetch is shown: its runner's last line while it runs, then one line."""

    def fetching(line: str) -> None:
        live.update(f"fetching {what} (its first start){': ' + line if line else ''}")

    def fetched(done: Fetched) -> None:
        how = "fetched" if done.ok else f"its fetch failed ({done.said})" if done.said else "its fetch failed"
        live.say(f"{how} in {done.seconds:.1f}s, into the server's own cache; starting '{name}' once")
        live.update(f"starting '{name}' once to list its tools")

    return fetching, fetched


def _add_from_registry(
    name: str,
    answers: dict[str, str],
    url: str | None,
    as_name: str | None,
    via: str | None,
    dry_run: bool,
    probe: bool,
    as_json: bool,
    timeout: float,
) -> None:
    """`coffer add NAME` with no command: install NAME from a registry."""
    from coffer.errors import UsageError
    from coffer.manage import discover

    if via is not None and via not in ("npm", "pypi", "oci", "remote"):
        raise UsageError(f"invalid --via '{via}': expected npm, pypi, oci or remote")
    try:
        entry = discover.resolve(name, url)
    except CofferError as exc:
        if "/" in name:
            raise
        hint = f" (a server you run yourself: `coffer add {name} -- CMD ARGS...` or `--url URL`)"
        raise type(exc)(f"{exc}{hint}") from None
    interactive = not as_json and not dry_run and sys.stdin.isatty()
    prepared = discover.prepare(entry, answers, as_name, via, _prompt if interactive else None, dry_run)
    if dry_run:
        shown = prepared.describe()
        if as_json:
            render.print_json({"version": render.JSON_VERSION, "dry_run": shown})
            return
        render.text(f"would add '{shown['name']}' from {entry.name} {entry.version} ({entry.registry})")
        render.text(f"  runs: {shown['launch']}")
        if shown["env"] or shown["headers"]:
            render.text(f"  env: {', '.join(shown['env']) or '-'}; headers: {', '.join(shown['headers']) or '-'}")
        for i in shown["inputs"]:
            kind = ("required" if i["required"] else "optional") + (", secret" if i["secret"] else "")
            state = "given" if i["given"] else f"default {i['default']}" if i["default"] else "not given"
            render.text(f"  asks {i['name']} ({kind}; {state}): {i['description'] or '-'}")
        return
    if not as_json:
        render.say(f"adding '{prepared.name}' from {entry.name} {entry.version}: {prepared.config().launch_line()}")
    with render.working(f"adding '{prepared.name}'") as live:
        what = f"{entry.name} {entry.version}"
        fetching, fetched = (None, None) if as_json else _fetch_shown(live, what, prepared.name)
        added = discover.install(prepared, probe, timeout, on_fetch=fetching, on_fetched=fetched)
    render_added(added, as_json)


def _prompt(need: Any) -> str | None:
    label = f"{need.name}" + (f" ({need.description})" if need.description else "")
    value: str = typer.prompt(label, hide_input=need.secret, default="", show_default=False)
    return value or None


def render_added(added: Any, as_json: bool) -> None:
    cfg, name = added.cfg, added.cfg.name
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "server": cfg.to_dict(mask=True), "probe": added.probe})
    elif cfg.oauth:
        render.say(f"'{name}' authorises with OAuth: run `coffer auth {name}` to sign in")
    elif added.counts is not None:
        kinds = ("tools", "prompts", "resources")
        render.say(f"'{name}' serves " + ", ".join(render.plural(added.counts[k], k.rstrip("s")) for k in kinds))
    if not as_json and cfg.source and cfg.source.get("mended"):
        render.say(f"mended the registry's launch line so that it runs ({cfg.source['mended']}): {cfg.launch_line()}")
    if added.failure is not None:
        if as_json:
            raise typer.Exit(added.failure.exit_code)
        raise added.failure


@app.command()
def edit(
    name: Annotated[str, typer.Argument(help="Server to change.", autocompletion=complete_servers)],
    command: Annotated[list[str] | None, typer.Argument(help="After --: the new command and its arguments.")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="Set KEY=VALUE (repeat).")] = None,
    unset_env: Annotated[list[str] | None, typer.Option("--unset-env", metavar="KEY", help="Remove KEY.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="A new URL (a streamable HTTP server).")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds to start and per call.")] = None,
    sandbox: SandboxOpt = None,
    allow_read: AllowReadOpt = None,
    allow_write: AllowWriteOpt = None,
    allow_host: AllowHostOpt = None,
    allow_secret: AllowSecretOpt = None,
    no_probe: Annotated[bool, typer.Option("--no-probe", help="Do not start it once to list its tools.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Change a server's launch line, URL, env, timeout or confinement (grants add to what it has), keeping
    the rest of its entry, and approve the change and the tools it lists, as `add` does."""
    from coffer.manage import servers

    if timeout is not None and timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    before = registry.load().get(name)  # an unknown name is said first, and alone
    opened = before.sandbox.get("secrets", []) if isinstance(before.sandbox, dict) else []
    warnings = servers.check_grants(allow_read, allow_write, allow_secret, opened)
    read, write, hosts, named = (list(x or []) for x in (allow_read, allow_write, allow_host, allow_secret))
    grants = (sandbox, read, write, hosts, named)
    confine = grants if sandbox is not None or any(grants[1:]) else None
    for warning in warnings:
        render.warn(warning)
    change = servers.Edit(list(command or []), url, _pairs(env, "--env"), list(unset_env or []), timeout, confine)
    approved = servers.edit_server(name, change, probe=not no_probe)
    note = servers.hidden_note(name, before)
    if note and not as_json:
        render.warn(note)
    cfg = registry.load().get(name)
    if as_json:
        render.print_json({"version": render.JSON_VERSION, "server": cfg.to_dict(mask=True), "approved": approved})
        return
    render.say(f"changed '{name}': {cfg.launch_line()}")
    tools = [a for a in approved if a != "launch config"]
    if tools:
        render.say(f"approved {', '.join(tools)}")
