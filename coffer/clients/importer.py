"""`coffer import`: read a client's MCP servers into the vault.

Planning is pure (read the client file and the registry, decide each entry), so `--dry-run` shows
exactly what a real import does. Every server goes in through `registry.add_server`, the same path
as `coffer add`, so the same validation applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coffer.clients import common, known
from coffer.errors import ConflictError
from coffer.manage import servers
from coffer.vault import registry


@dataclass
class ImportItem:
    source_name: str
    name: str
    action: str  # "add", "added" or "skip"
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    config: registry.ServerConfig | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "source_name": self.source_name,
            "action": self.action,
            "reason": self.reason,
            "notes": list(self.notes),
        }
        if self.config is not None:
            out["server"] = self.config.to_dict(mask=True)
        return out


@dataclass
class ImportPlan:
    client: str
    path: Path
    items: list[ImportItem]
    applied: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "path": str(self.path),
            "dry_run": not self.applied,
            "servers": [i.to_dict() for i in self.items],
        }

    def count(self, *actions: str) -> int:
        return sum(1 for i in self.items if i.action in actions)


def plan_import(client_name: str, path: Path | None = None) -> ImportPlan:
    """Decide, for every server in the client's file, whether and under which name it is imported."""
    client = known.get(client_name)
    path = known.resolve_path(client, path)
    text = common.read_text(path)
    if not text.strip():
        raise common.ClientFileError(f"{path}: the file is empty")
    entries = client.fmt.entries(text, path)
    in_vault = set(registry.load().servers)
    taken: set[str] = set()
    items: list[ImportItem] = []
    for source_name, raw in entries:
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
            items.append(ImportItem(source_name, name, "skip", converted.skip, notes))
            continue
        taken.add(name)
        if name in in_vault:
            items.append(ImportItem(source_name, name, "skip", f"'{name}' is already in the vault", notes))
            continue
        converted.config.name = name
        items.append(ImportItem(source_name, name, "add", None, notes, converted.config))
    return ImportPlan(client.name, path, items)


def apply_import(plan: ImportPlan) -> ImportPlan:
    """Add the planned servers; one added meanwhile by another process becomes a skip, not a failure."""
    for item in plan.items:
        if item.action != "add" or item.config is None:
            continue
        try:
            servers.add_server(item.config)
        except ConflictError:
            item.action, item.reason = "skip", f"'{item.name}' is already in the vault"
            continue
        item.action = "added"
    plan.applied = True
    return plan
