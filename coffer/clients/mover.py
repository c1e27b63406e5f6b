"""`coffer import CLIENT --move`: after the import, take the imported entries out of the client's files
and install Coffer there, so the agent sees each tool once.

Each file is backed up once, before its first change, and written once: its backup is the file as it
was before `--move`, so restoring it undoes the whole step. Only entries that are now in the vault
(imported, or the same launch as a vault server) are removed; entries Coffer could not import, and
entries that launch Coffer itself, stay. The user file also gets the `coffer serve` entry.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coffer.clients import common, installer, known
from coffer.clients.importer import ImportPlan
from coffer.errors import NotFoundError


@dataclass
class FileChange:
    path: Path
    old: str
    new: str
    removed: list[str] = field(default_factory=list)  # "<scope>: <entry name>"
    installed: str | None = None
    backup: Path | None = None

    def diff(self) -> str:
        lines = difflib.unified_diff(
            self.old.splitlines(keepends=True), self.new.splitlines(keepends=True), str(self.path), str(self.path)
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "removed": self.removed,
            "installed": self.installed,
            "backup": str(self.backup) if self.backup else None,
        }


def plan_move(plan: ImportPlan, name: str = installer.DEFAULT_NAME) -> list[FileChange]:
    """The new text of every file the move touches (nothing written)."""
    client = known.get(plan.client)
    changes: dict[Path, FileChange] = {}
    for item in plan.items:
        source = item.source
        if source is None or not (item.in_vault or item.action in ("add", "added")):
            continue
        change = changes.get(source.path)
        if change is None:
            text = common.read_text(source.path)
            change = changes[source.path] = FileChange(source.path, text, text)
        change.new = client.fmt.remove(change.new, source.path, item.source_name, source.where)
        where = f"local scope of {source.project}" if source.scope == "local" else f"{source.scope} scope"
        change.removed.append(f"{where}: {item.source_name}")
    user = plan.sources[0].path if plan.sources else plan.path
    change = changes.get(user)
    base = change.new if change is not None else _read_or_empty(user)
    install = installer.plan_install(client.name, user, name=name, base_text=base)
    if install.status != "already" or change is None:
        if change is None:
            change = changes[user] = FileChange(user, _read_or_empty(user), base)
        change.new = install.new_text
        change.installed = install.name if install.status != "already" else None
    return [c for c in changes.values() if c.new != c.old]


def apply_move(changes: list[FileChange]) -> list[FileChange]:
    """Back up each file as it was, then write its new text (refused if it changed meanwhile)."""
    for change in changes:
        if change.path.exists():
            change.backup = common.backup(change.path)
        common.replace_file(change.path, change.new, change.old if change.path.exists() else None)
    return changes


def _read_or_empty(path: Path) -> str:
    try:
        return common.read_text(path)
    except NotFoundError:
        return ""
