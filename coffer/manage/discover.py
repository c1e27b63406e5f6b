"""Finding and installing servers from MCP registries: `coffer find` and `coffer add NAME`, shared by the
CLI and the console (coffer.discovery holds the parts; `outdated` and `upgrade` are coffer.manage.upgrades).

An install writes nothing until everything it needs is known: the entry resolves, a way to run it is
chosen, every required input has a value. It then stores the secrets, fetches the package into the
server's own cache (coffer.manage.prefetch), adds the entry (approved, as `coffer add` does) and starts it
once; a server that cannot start is removed again with its secrets, so a vanished package version leaves
the vault as it was.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coffer.discovery import cache
from coffer.discovery.entries import DiscoveryError, Entry, meant
from coffer.discovery.launch import Input, Plan, plan
from coffer.errors import ConflictError, NotFoundError, UsageError
from coffer.vault import registry

if TYPE_CHECKING:
    from coffer.manage.prefetch import Fetched


@dataclass
class Found:
    """`coffer find`'s answer: ranked entries, what was searched, and how old each registry's cache is."""

    hits: list[dict[str, Any]]
    searched: int
    registries: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def registry_urls(url: str | None = None) -> list[str]:
    """`--registry URL`, else the vault's `[registries]` (the official registry by default)."""
    if url is not None:
        if not re.match(r"^https?://[^\s/]+", url):
            raise UsageError(f"invalid --registry '{url}': expected an http:// or https:// URL")
        return [url.rstrip("/")]
    return list(dict.fromkeys(registry.load().registries.values()))


def refresh(urls: list[str], only_stale: bool = False, on_page: Callable[[int], None] | None = None) -> list[str]:
    """Bring each registry's cache up to date; a registry that cannot be read leaves its cache as it
    was and is named in the notes returned (raises only when every registry failed and none has a cache)."""
    notes: list[str] = []
    failed = 0
    due = set(cache.stale(urls)) if only_stale else set(urls)
    for state in cache.states(urls):
        if state.registry not in due:
            continue
        try:
            _, skipped = cache.refresh(state.registry, on_page=on_page)
        except DiscoveryError as exc:
            failed += 1
            cached = f"using its cache from {_age(state.synced_at)}" if state.synced_at else "it has no cache yet"
            notes.append(f"{exc}; {cached}")
            continue
        if skipped:
            notes.append(f"registry {state.registry}: {skipped} entries were not a usable server.json and were skipped")
    if failed and failed == len(urls) and all(s.synced_at is None for s in cache.states(urls)):
        raise DiscoveryError(notes[0])
    if failed < len(due):
        from coffer.discovery.rank import derive

        derive(urls)  # built now, with the read, so that no later `find` waits on it (saved: read back after)
    return notes


def find(
    query: str, url: str | None = None, k: int = 10, mode: str = "auto", on_page: Callable[[int], None] | None = None
) -> Found:
    """Rank the cached registries for `query`; `mode` "auto" refreshes a cache older than a day first,
    "refresh" always does, "offline" never touches the network."""
    from coffer.discovery.rank import find as rank

    if not query.strip():
        raise UsageError('give a query: what the server should do (`coffer find "open a pull request"`)')
    if k < 1:
        raise UsageError(f"--limit must be at least 1, got {k}")
    urls = registry_urls(url)
    notes = [] if mode == "offline" else refresh(urls, only_stale=mode == "auto", on_page=on_page)
    hits, searched = rank(query, urls, k)
    installed = installed_sources()
    adds = add_names([(h.entry.registry, h.entry.name, h.entry.short) for h in hits], urls)
    out = [
        hit.entry.summary(installed.get((hit.entry.registry, hit.entry.name)))
        | {"add": add, "score": hit.score, "fit": hit.fit, "makers_own": hit.own, "also": list(hit.also)}
        for hit, add in zip(hits, adds, strict=True)
    ]
    states = [
        {"url": s.registry, "entries": s.entries, "refreshed": s.synced_at, "age": _age(s.synced_at)}
        for s in cache.states(urls)
    ]
    if not searched:
        notes.append("the registry cache is empty: run `coffer find --refresh` where the registry can be reached")

    return Found(out, searched, states, notes)


def cache_report() -> dict[str, Any]:
    """What `coffer doctor` says of the registry cache: each registry's size and age, and whether a
    running gateway keeps it fresh."""
    urls = registry_urls()
    return {
        "refresh": "on" if cache.refresh_wanted(registry.load().settings) else "off",
        "registries": [
            {"url": s.registry, "entries": s.entries, "refreshed": s.synced_at, "age": _age(s.synced_at)}
            for s in cache.states(urls)
        ],
    }


def installed_sources() -> dict[tuple[str, str], str]:
    """(registry, registry name) -> the vault's server name, for every server installed from a registry."""
    return {
        (cfg.source["registry"], cfg.source["name"]): cfg.name
        for cfg in registry.load().servers.values()
        if cfg.source is not None
    }


def resolve(name: str, url: str | None = None) -> Entry:
    """A registry name (`io.github.github/github-mcp-server`) or a short name `coffer find` showed."""
    urls = registry_urls(url)
    if "/" in name:
        for reg in urls:
            found = cache.entry(reg, name)
            if found is not None:
                return found
        errors = []
        for reg in urls:  # not cached (yet): ask the registry itself
            from coffer.discovery.client import RegistryClient

            try:
                with RegistryClient(reg) as client:
                    return client.version(name)
            except DiscoveryError as exc:
                errors.append(str(exc))
        raise NotFoundError(errors[0] if len(errors) == 1 else f"no registry has '{name}': " + "; ".join(errors))
    holders = cache.holders(name, urls)
    if not holders:
        refresh(urls, only_stale=True)
        holders = cache.holders(name, urls)
    if not holders:
        raise NotFoundError(f"no server '{name}' in the registry cache: `coffer find {name}` lists what there is")
    chosen = meant(holders)
    if chosen is None:
        names = ", ".join(n for _, n in holders[:6]) + (f" and {len(holders) - 6} more" if len(holders) > 6 else "")
        raise UsageError(f"'{name}' is ambiguous: {names}; give the full registry name (`coffer find` shows it)")
    found = cache.entry(*chosen)
    if found is None:  # refreshed away between the two reads
        raise NotFoundError(f"no server '{name}' in the registry cache: `coffer find {name}` lists what there is")
    return found


def add_names(hits: list[tuple[str, str, str]], urls: list[str]) -> list[str]:
    """What `coffer add` takes for each (registry, name, short) hit: its short name where that means it
    (coffer.discovery.entries.meant), else its full registry name."""
    out = []
    for reg, name, short in hits:
        out.append(short if meant(cache.holders(short, urls)) == (reg, name) else name)
    return out


@dataclass
class Prepared:
    """An install worked out: the entry, how it runs, the vault name, and the values for its inputs."""

    entry: Entry
    plan: Plan
    name: str
    values: dict[str, str]

    def config(self, values: dict[str, str] | None = None) -> registry.ServerConfig:
        values = self.values if values is None else values
        command = self.plan.command(values)
        return registry.ServerConfig(
            name=self.name,
            command=command[0] if command else None,
            args=command[1:],
            env=self.plan.environment(values),
            url=self.plan.url,
            headers=self.plan.header_values(values),
            sandbox={"network": self.plan.hosts} if self.plan.hosts else "auto",
            source={"registry": self.entry.registry, "name": self.entry.name, "version": self.entry.version},
        )

    def describe(self) -> dict[str, Any]:
        """What `--dry-run` shows: what would run (`<NAME>` where a required input is not given yet), and
        each input (never a value)."""
        cfg = self.config({**{i.name: f"<{i.name}>" for i in self.plan.missing(self.values)}, **self.values})
        return {
            "name": self.name,
            "entry": self.entry.summary(),
            "runs_as": self.plan.via,
            "launch": cfg.launch_line(),
            "env": sorted(cfg.env),
            "headers": sorted(cfg.headers),
            "sandbox": cfg.sandbox,
            "inputs": [
                {
                    "name": i.name,
                    "required": i.required,
                    "secret": i.secret,
                    "description": i.description,
                    "default": i.default,
                    "given": i.name in self.values,
                }
                for i in self.plan.inputs.values()
            ],
        }


def prepare(
    entry: Entry,
    answers: dict[str, str],
    name: str | None = None,
    via: str | None = None,
    ask: Callable[[Input], str | None] | None = None,
    dry_run: bool = False,
) -> Prepared:
    """Work out an install; `ask` is called for each required input without an answer (a terminal's
    prompt), else a missing one is a UsageError naming the `--env` that answers it (`dry_run`: left
    unanswered, for `--dry-run` to show)."""
    if entry.status == "deleted":
        raise DiscoveryError(f"{entry.name} was deleted from its registry")
    how = plan(entry, via=via)
    vault = registry.load()
    server = registry.validate_name(name or entry.short)
    if server in vault.servers:
        raise ConflictError(f"a server named '{server}' is already in the vault: choose another with --as NAME")
    unknown = sorted(set(answers) - set(how.inputs))
    if unknown:
        known = ", ".join(how.inputs) or "none"
        raise UsageError(f"{entry.name} takes no input {', '.join(unknown)} (its inputs: {known})")
    values = {i.name: i.default for i in how.inputs.values() if i.required and i.default is not None}
    values.update(answers)
    for need in [] if dry_run else how.missing(values):
        given = ask(need) if ask is not None else None
        if not given:
            what = f" ({need.description})" if need.description else ""
            raise UsageError(f"{entry.name} needs {need.name}{what}: give --env {need.name}=VALUE")
        values[need.name] = given
    for i in how.inputs.values():
        if i.choices and i.name in values and values[i.name] not in i.choices:
            raise UsageError(f"{i.name} must be one of {', '.join(i.choices)}, not '{values[i.name]}'")
    return Prepared(entry, how, server, values)


def install(
    prepared: Prepared,
    probe: bool = True,
    timeout: float | None = None,
    on_fetch: Callable[[str], None] | None = None,
    on_fetched: Callable[[Fetched], None] | None = None,
) -> Any:
    """Store the secrets, add the server and start it once; undo all of it when it cannot start.

    Before its start is timed, its package is fetched into its own cache (coffer.manage.prefetch), so a
    heavy download is not cut at the start's limit; `on_fetch` is told the fetch's progress, `on_fetched`
    how it went. A uvx server that fails in a way its own output explains (its command has another name
    than its package; uv lists its commands and one is named for it; it was written for the MCP SDK 1.x)
    is mended and started again, at most twice, and the entry says so (`source.mended`); where uv lists
    commands and none is named for it, the error gives the `coffer add` line for each."""
    from coffer.discovery.mending import mend, uv_commands
    from coffer.manage import servers
    from coffer.manage.prefetch import add_fetched

    command: list[str] | None = None
    mended: list[str] = []
    cause, tail = "", ""
    for _ in range(3):
        cfg, stored = _stored(prepared, timeout)
        if command is not None and cfg.source is not None:
            cfg.command, cfg.args = command[0], command[1:]
            cfg.source = {**cfg.source, "mended": "; ".join(mended)}
        try:
            added = add_fetched(cfg, probe=probe, on_fetch=on_fetch, on_fetched=on_fetched)
        except BaseException:
            if cfg.name in registry.load().servers:  # stopped in its fetch or its start: as if never added
                servers.remove_server(cfg.name)
            _forget(stored)
            raise
        if added.failure is None:
            return added
        cause, tail = added.failure.cause, "\n".join(added.failure.stderr_tail)
        servers.remove_server(cfg.name)  # with the secrets it refers to
        _forget(stored)
        fix = mend([cfg.command or "", *cfg.args], tail, (cfg.name, prepared.entry.short))
        if fix is None:
            break
        command, mended = fix.command, [*mended, fix.why]
    tried = f" (mended: {'; '.join(mended)})" if mended else ""
    choices = uv_commands(tail)
    if choices:
        cause = _commands_cause(cfg, choices)
    raise DiscoveryError(
        f"{prepared.entry.name} {prepared.entry.version} did not start ({cfg.launch_line()}){tried}: "
        f"{cause}; nothing was added"
    )


def _commands_cause(cfg: registry.ServerConfig, commands: list[str]) -> str:
    """Why a package uv lists several commands of did not start, with the `coffer add` line of each."""
    from coffer.discovery.mending import uvx_target

    line = [cfg.command or "", *cfg.args]
    at = uvx_target(line)
    if at is None:
        return f"its package has the commands {', '.join(commands)} and none is named for it"
    env = "".join(f" --env {shlex.quote(k)}=VALUE" for k in cfg.env)  # names only: values are never shown
    adds = [
        f"`coffer add {cfg.name}{env} -- {shlex.join([*line[:at], '--from', line[at], c, *line[at + 1 :]])}`"
        for c in commands
    ]
    return (
        f"{line[at]} has {len(commands)} commands and none is named for it ({', '.join(commands)}); "
        f"add the one that serves MCP{' (each VALUE as the entry gives it)' if env else ''}: {' or '.join(adds)}"
    )


def _stored(prepared: Prepared, timeout: float | None) -> tuple[registry.ServerConfig, list[str]]:
    """The entry to add, its secrets stored (their references returned, to forget on failure)."""
    from coffer.trust import secrets

    stored: list[str] = []
    values = dict(prepared.values)
    try:
        for i in prepared.plan.inputs.values():
            if i.secret and i.name in values:
                ref = f"{prepared.name}.{re.sub(r'[^A-Za-z0-9_.-]', '_', i.name)}"
                secrets.set_secret(ref, values[i.name])
                stored.append(ref)
                values[i.name] = "${secret:" + ref + "}"
    except BaseException:
        _forget(stored)
        raise
    cfg = Prepared(prepared.entry, prepared.plan, prepared.name, values).config()
    if timeout is not None:
        cfg.timeout = timeout
    return cfg, stored


def _forget(refs: list[str]) -> None:
    """Remove these secrets, those already gone (with their server) included."""
    from coffer.trust import secrets

    for ref in refs:
        with contextlib.suppress(NotFoundError):
            secrets.remove_secret(ref)


def _age(at: float | None) -> str:
    if at is None:
        return "never"
    seconds = max(0.0, time.time() - at)
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"
