"""`coffer import`: read a client's MCP servers into the vault.

Every place the client keeps servers is read (for Claude Code: the user scope, each project's local
scope in ~/.claude.json, and the current directory's .mcp.json), and each entry says where it came
from. The same launch (command, args and env keys, or URL) is imported once, whichever scopes or
clients it appears in. Planning is pure (read the client files and the registry, decide each entry),
so `--dry-run` shows exactly what a real import does. Every server goes in through
`coffer.manage.servers.add_server`, the same path as `coffer add`, so the same validation applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coffer.clients import common, known
from coffer.clients.mcpjson import McpServersJson
from coffer.errors import NotFoundError
from coffer.vault import registry


def launch_key(cfg: registry.ServerConfig) -> tuple[Any, ...]:
    """What makes two entries the same server: the URL, or the command, its args and its env keys."""
    if cfg.url:
        return ("url", cfg.url.rstrip("/"))
    return ("stdio", cfg.command, tuple(cfg.args), tuple(sorted(cfg.env)))


@dataclass
class ImportItem:
    source_name: str
    name: str
    action: str  # "add", "added" or "skip"
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    config: registry.ServerConfig | None = None
    source: known.Source | None = None
    in_vault: bool = False  # the server is (now) in the vault: `--move` may take it out of the client

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "source_name": self.source_name,
            "action": self.action,
            "reason": self.reason,
            "notes": list(self.notes),
            "scope": self.source.scope if self.source else None,
            "from": self.source.label() if self.source else None,
        }
        if self.config is not None:
            out["server"] = self.config.to_dict(mask=True)
        return out


@dataclass
class ImportPlan:
    client: str
    path: Path
    items: list[ImportItem]
    sources: list[known.Source] = field(default_factory=list)
    applied: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "path": str(self.path),
            "sources": [{"scope": s.scope, "path": str(s.path), "project": s.project} for s in self.sources],
            "dry_run": not self.applied,
            "servers": [i.to_dict() for i in self.items],
        }

    def count(self, *actions: str) -> int:
        return sum(1 for i in self.items if i.action in actions)


def plan_import(
    client_name: str, path: Path | None = None, scope: str | None = None, cwd: Path | None = None
) -> ImportPlan:
    """Decide, for every server in every place the client keeps them, whether and as what it is imported."""
    client = known.get(client_name)
    sources = client.sources(path, scope, cwd)
    reg = registry.load()
    vault_launch = {launch_key(cfg): name for name, cfg in reg.servers.items()}
    taken: set[str] = set()
    seen: dict[tuple[Any, ...], ImportItem] = {}
    items: list[ImportItem] = []
    for source in sources:
        for source_name, raw in _entries(client, source, primary=source is sources[0]):
            item = _plan_one(client, source, source_name, raw, taken, set(reg.servers))
            items.append(item)
            if item.config is None:
                continue
            key = launch_key(item.config)
            if key in vault_launch:
                item.action, item.config, item.in_vault = "skip", None, True
                item.reason = f"same launch as '{vault_launch[key]}', already in the vault"
            elif key in seen:
                first = seen[key]
                item.action, item.config, item.in_vault = "skip", None, True
                item.reason = f"same launch as '{first.name}' ({first.source.label() if first.source else ''})"
                taken.discard(item.name)
            else:
                seen[key] = item
    return ImportPlan(client.name, sources[0].path if sources else known.resolve_path(client, path), items, sources)


def entries_of(client: known.Client, source: known.Source) -> list[tuple[str, Any]]:
    """The entries of one client source, as the client reads them (raises NotFoundError when missing)."""
    return _entries(client, source, primary=True)


def _entries(client: known.Client, source: known.Source, primary: bool) -> list[tuple[str, Any]]:
    """The entries of one source; a missing file is an error only for the first (the user's) source."""
    try:
        text = common.read_text(source.path)
    except NotFoundError:
        if primary and source.scope in ("user", "file"):
            raise
        return []
    if not text.strip():
        if primary and source.scope in ("user", "file"):
            raise common.ClientFileError(f"{source.path}: the file is empty")
        return []
    if source.where is not None:
        assert isinstance(client.fmt, McpServersJson), f"{client.name}: a scoped source needs a JSON format"
        return client.fmt.entries_at(text, source.path, source.where)
    return client.fmt.entries(text, source.path)


def _plan_one(
    client: known.Client,
    source: known.Source,
    source_name: str,
    raw: Any,
    taken: set[str],
    in_vault: set[str],
) -> ImportItem:
    name = common.normalise_name(source_name)
    notes = []
    if name in taken:
        name = common.hashed_name(source_name)
    tries = 0
    while name in taken:  # only if a hashed form is itself an entry's name
        tries += 1
        name = common.hashed_name(f"{source_name}#{tries}")
    if name != source_name:
        notes.append(f"renamed from '{source_name}'")
    converted = client.fmt.convert(source_name, raw)
    notes.extend(converted.notes)
    if converted.config is None:
        return ImportItem(source_name, name, "skip", converted.skip, notes, source=source)
    taken.add(name)
    if name in in_vault:
        return ImportItem(source_name, name, "skip", f"'{name}' is already in the vault", notes, source=source)
    converted.config.name = name
    return ImportItem(source_name, name, "add", None, notes, converted.config, source)
