"""Adding, importing and removing servers touch several parts; these are the only ways the CLI (and the
console) do it.

Adding writes the registry entry and approves its launch config (the user chose it), then starts the
server once to list it (`add`, `import_client`); removing forgets the approval and pins first, then
the entry, then the catalogue entry and the indexed resources.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from coffer.errors import CofferError, ConflictError, NotFoundError, UpstreamError
from coffer.manage.probe import probe_configs
from coffer.manage.refresh import Refreshed, probe_and_record, refresh
from coffer.memory import knowledge as memory
from coffer.trust import oauth_store
from coffer.trust.pinning import Pins, approve_server_config
from coffer.vault import catalogue, registry

if TYPE_CHECKING:
    from coffer.clients.importer import ImportPlan
    from coffer.clients.mover import FileChange


def add_server(cfg: registry.ServerConfig, path: Path | None = None, replace: bool = False) -> None:
    """Register `cfg` and approve its launch config, as `coffer add` and `coffer import` do."""
    registry.add_server(cfg, path=path, replace=replace)
    approve_server_config(cfg)


def add_servers(configs: list[registry.ServerConfig]) -> None:
    """Register many servers in one atomic registry write and approve them in one transaction."""
    registry.add_servers(configs)
    with Pins.open(new_tools="allow") as pins:
        pins.approve_servers(configs)


def remove_server(name: str, path: Path | None = None) -> list[str]:
    """Remove a server and what Coffer keeps about it: launch approval and tool pins, catalogue entry
    and indexed resources, its sandbox home, and the secrets `coffer add NAME` stored for it from a
    registry (`NAME.*`, unless another server refers to them). Returns the secrets removed.

    The approval goes before the entry is written away: a failure in between leaves the server
    registered but unapproved (not started until `coffer approve`), never an approval to reuse.
    """
    before = registry.load(path)
    with registry.edit(path) as doc:
        servers = doc.get("servers")
        if servers is None or name not in servers:
            raise registry.unknown_server(name, servers or ())
        with Pins.open(new_tools="allow") as pins:  # the setting only matters when observing
            pins.forget_server(name)
        del servers[name]
    catalogue.drop_server(name)
    memory.index_resources(name, [])
    from coffer.upstreams import sandbox

    sandbox.forget(name)  # its own home (its package cache and state) goes with it
    oauth_store.forget(name, client_too=True)  # its sign-in: never handed to a server added later by its name
    return _drop_installed_secrets(before, name)


def _drop_installed_secrets(before: registry.Registry, name: str) -> list[str]:
    """The `${secret:NAME.X}` a registry install stored for `name`, no other server refers to."""
    from coffer.trust import secrets
    from coffer.vault.masking import REF_RE

    def refs(cfg: registry.ServerConfig) -> set[str]:
        values = [*cfg.env.values(), *cfg.headers.values()]
        return {r.removeprefix("secret:") for v in values for r in REF_RE.findall(v) if r.startswith("secret:")}

    cfg = before.servers.get(name)
    if cfg is None or cfg.source is None:
        return []
    others = set().union(*(refs(c) for n, c in before.servers.items() if n != name))
    stored = {s.name for s in secrets.list_secrets()}
    gone = sorted(r for r in refs(cfg) if r.startswith(f"{name}.") and r in stored and r not in others)
    for ref in gone:
        secrets.remove_secret(ref)
    return gone


@dataclass
class Edit:
    """What `coffer edit` changes in a server's entry; everything else in it (curation, prefix, share,
    sandbox, comments) stays. None/empty: left as it is."""

    command: list[str] = field(default_factory=list)  # the new launch line (a `--url` server becomes one)
    url: str | None = None  # a new URL (a launched server becomes a URL one)
    env: dict[str, str] = field(default_factory=dict)  # set
    unset_env: list[str] = field(default_factory=list)  # removed
    timeout: float | None = None
    sandbox: tuple[str | None, list[str], list[str], list[str], list[str]] | None = None  # mode, read, write, hosts,
    # secret places named

    def empty(self) -> bool:
        changes = (self.command, self.url, self.env, self.unset_env, self.sandbox)
        return not any(changes) and self.timeout is None


def edit_server(name: str, change: Edit, probe: bool = True, path: Path | None = None) -> list[str]:
    """Change a server's launch line, URL, env or timeout in place, then approve it as `coffer add` does
    (the user's own edit, unlike a hand edit of coffer.toml): its launch config, and the tools the new
    launch lists (started once unless `probe` is False). Returns what was approved."""
    from coffer.errors import UsageError
    from coffer.manage.review import approve

    if change.empty():
        raise UsageError(
            "nothing to change: give a command after --, --url, --env, --unset-env, --timeout,"
            " --sandbox or --allow-read/--allow-write/--allow-host"
        )
    if change.command and change.url:
        raise UsageError("give either a command (after --) or --url, not both")
    with registry.edit(path) as doc:
        servers = doc.get("servers")
        if servers is None or name not in servers:
            raise registry.unknown_server(name, servers or ())
        entry = servers[name]
        if change.command:
            for key in ("url", "headers", "oauth"):
                entry.pop(key, None)
            entry["command"], entry["args"] = change.command[0], list(change.command[1:])
        if change.url:
            for key in ("command", "args", "cwd", "sandbox"):
                entry.pop(key, None)
            entry["url"] = change.url
        if change.env or change.unset_env:
            env = dict(entry.get("env") or {})
            missing = [k for k in change.unset_env if k not in env]
            if missing:
                raise NotFoundError(f"'{name}' has no env {', '.join(missing)} to unset")
            env = {k: v for k, v in {**env, **change.env}.items() if k not in change.unset_env}
            if env:
                entry["env"] = env
            else:
                entry.pop("env", None)
        if change.timeout is not None:
            entry["timeout"] = change.timeout
        if change.sandbox is not None:
            if "url" in entry:
                raise UsageError("--sandbox and --allow-* apply to servers Coffer launches (a command), not --url")
            value = registry.merge_sandbox(entry.get("sandbox", "auto"), *change.sandbox)
            if value == "auto":
                entry.pop("sandbox", None)
            else:
                entry["sandbox"] = value if isinstance(value, str) else registry.inline(value)
    return approve(name, probe=probe)


# ---------------------------------------------------------------- coffer add


@dataclass
class Added:
    """What `coffer add` did: the entry written, whether it signs in with OAuth, and what its first
    start listed (`counts`) or why it could not (`failure`: the registration stays)."""

    cfg: registry.ServerConfig
    counts: dict[str, int] | None = None
    failure: ListingFailed | None = None

    @property
    def probe(self) -> dict[str, Any] | None:
        """The probe as `--json` shows it: None when the server was not started."""
        if self.failure is not None:
            return {"ok": False, "error": self.failure.cause}
        return None if self.counts is None else {"ok": True, "counts": self.counts}


def add(
    cfg: registry.ServerConfig,
    *,
    probe: bool = True,
    oauth_client: tuple[str, str | None] | None = None,
    on_registered: Callable[[registry.ServerConfig], None] | None = None,
) -> Added:
    """Register `cfg`, approve it, then start it once (unless `probe` is false or it is disabled).

    A `--url` server that answers with a Bearer challenge is marked `oauth` and not started (it needs
    `coffer auth` first); `oauth_client` is a client the user registered with its authorization server.
    Raises ConflictError (and removes the entry again, as if never added) when the names it serves
    clash with another server's; a server that starts but cannot list is reported in `Added.failure`.
    `on_registered` is told once the entry is written, before the (up to 15 s) first start.
    """
    add_server(cfg)
    if oauth_client is not None:
        oauth_store.preregister(cfg.name, oauth_client[0], oauth_client[1], "http://127.0.0.1/callback")
    if cfg.url and not cfg.oauth and probe and cfg.enabled:
        from coffer.upstreams import oauth

        if anyio.run(oauth.challenge, cfg.url, _expandable_headers(cfg)):
            registry.set_oauth(cfg.name, True)
            cfg.oauth = True
    if on_registered is not None:
        on_registered(cfg)
    if cfg.oauth or not probe or not cfg.enabled:
        return Added(cfg)
    try:
        counts = probe_and_record(cfg)
    except UpstreamError as exc:  # the registration stays: the user may fix the server, not the entry
        return Added(cfg, failure=_could_not_list(cfg.name, exc))
    clashes = catalogue.name_clashes(registry.load(), catalogue.load_snapshot(), cfg.name)
    if clashes:
        remove_server(cfg.name)  # with its catalogue entry and approval: as if never added
        shown = ", ".join(clashes[:5]) + (f" and {len(clashes) - 5} more" if len(clashes) > 5 else "")
        raise ConflictError(
            f"not added: '{cfg.name}' would expose names another server (or Coffer) already does: {shown}; "
            "choose another --prefix"
        )
    return Added(cfg, counts=counts)


class ListingFailed(UpstreamError):
    """Registered, but its first start listed nothing; `cause` is the upstream's own one-line reason."""

    def __init__(self, message: str, cause: str, stderr_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.stderr_tail = stderr_tail or []  # the server's last lines: what a registry install mends by


def _could_not_list(name: str, exc: UpstreamError) -> ListingFailed:
    return ListingFailed(
        f"'{name}' is registered, but it could not list its tools: {exc} "
        f"(`coffer doctor {name}` shows why; `coffer remove {name}` undoes the add)",
        str(exc),
        list(getattr(exc, "stderr_tail", [])),
    )


def _expandable_headers(cfg: registry.ServerConfig) -> dict[str, str]:
    """The server's headers, expanded when they can be (an unset reference just leaves the header out)."""
    from coffer.trust.expand import expand

    out = {}
    for key, value in cfg.headers.items():
        try:
            out[key] = expand(value, what=f"{cfg.name}: header {key}")
        except CofferError:
            continue
    return out


# ---------------------------------------------------------------- coffer import


@dataclass
class Imported:
    """What `coffer import` did: the plan (added and skipped entries), the first start of each added
    server, and the client files `--move` changed (or would change, on a dry run)."""

    plan: ImportPlan
    probed: list[Refreshed] = field(default_factory=list)
    moved: list[FileChange] = field(default_factory=list)


ProgressBar = Callable[[int, str], AbstractContextManager[Callable[[str], None]]]


def import_client(
    client: str,
    path: Path | None = None,
    scope: str | None = None,
    *,
    move: bool = False,
    probe: bool = True,
    dry_run: bool = False,
    progress: ProgressBar | None = None,
) -> Imported:
    """Copy a client's servers into the vault, start the new ones once (so the first tools/list after
    the import is complete), and with `move` take them out of the client and install Coffer there.

    `progress(total, label)` is entered around the first starts and told each server as it finishes.
    Raises NotFoundError / UsageError for an unknown client, file or scope, before anything is written.
    """
    from coffer.clients import importer, mover

    plan = importer.plan_import(client, path, scope)
    if dry_run:
        return Imported(plan, moved=mover.plan_move(plan) if move else [])
    apply_import(plan)
    done = Imported(plan)
    added = [i.config for i in plan.items if i.action == "added" and i.config is not None and i.config.enabled]
    if added and probe:
        bar = progress(len(added), "listing the imported servers") if progress else contextlib.nullcontext(None)
        with bar as advance:
            tell = (lambda name, ok, summary: advance(name)) if advance is not None else None
            done.probed = refresh(probe_configs(added), None, tell)
    if move:
        done.moved = mover.apply_move(mover.plan_move(plan))
    return done


def apply_import(plan: ImportPlan) -> ImportPlan:
    """Add the planned servers in one atomic write; one added meanwhile by another process becomes a
    skip, not a failure (the write is retried without it)."""
    todo = [i for i in plan.items if i.action == "add" and i.config is not None]
    while todo:
        try:
            add_servers([i.config for i in todo if i.config is not None])
        except ConflictError:
            taken = set(registry.load().servers)
            gone = [i for i in todo if i.name in taken]
            if not gone:
                raise
            for item in gone:
                item.action, item.reason = "skip", f"'{item.name}' is already in the vault"
            todo = [i for i in todo if i not in gone]
            continue
        for item in todo:
            item.action, item.in_vault = "added", True
        break
    plan.applied = True
    return plan


def check_grants(
    read: list[str] | None, write: list[str] | None, secret: list[str] | None = None, opened: list[str] | None = None
) -> list[str]:
    """Refuse what no grant may open (coffer.upstreams.walls): Coffer's own files, and a secret place not
    named by `--allow-secret` (this command's, or `opened`: the entry's). Returns what to warn about."""
    import os

    from coffer.errors import UsageError
    from coffer.upstreams import runtimes, walls

    def real(path: str) -> str:
        return os.path.realpath(os.path.expanduser(path))

    for path in [*(read or []), *(write or []), *(secret or [])]:
        wall = walls.coffers(path)
        if wall is not None:
            raise UsageError(f"{path} cannot be granted: {wall.why()}")
    for path in secret or []:
        if walls.secret_of(path) is None:
            raise UsageError(f"--allow-secret {path}: not a secret place (grant it with --allow-read or --allow-write)")
    named = [real(p) for p in [*(secret or []), *(opened or [])]]
    for path in [*(read or []), *(write or [])]:
        place = walls.secret_of(path)
        if place is not None and not any(runtimes.within(real(path), n) for n in named):
            raise UsageError(
                f"{path} is in {place.shown}, a secret place ({place.what}) that Coffer hides from every server:"
                f" to grant it anyway, name it with --allow-secret {runtimes.tilde(real(path))}"
            )
    out = []
    for path in [*(read or []), *(write or []), *(secret or [])]:
        if not os.path.exists(real(path)):
            out.append(f"{path} does not exist (yet): the grant applies once it does")
    return out


def hidden_note(name: str, before: registry.ServerConfig | None = None) -> str | None:
    """What Coffer keeps hidden inside the paths `name`'s entry opens (only those new since `before`),
    said once when a grant is made; None where nothing is."""
    from coffer.upstreams import explain
    from coffer.upstreams.policy import policy_for

    cfg = registry.load().get(name)
    if cfg.url or cfg.sandbox == "off":
        return None
    policy = policy_for(cfg)
    old = set(explain.grants(policy_for(before))) if before is not None and not before.url else set()
    new = [p for p in explain.grants(policy) if p not in old]
    said = explain.hidden(policy, new) if new else ""
    return f"'{name}': {said}" if said else None
