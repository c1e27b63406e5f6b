"""`coffer install`: add an entry that launches `coffer serve` to a client's config, touching nothing else.

The file is backed up before it is replaced, written atomically with its original mode, and a second
install of the same entry changes nothing.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coffer.clients import common, known
from coffer.errors import ConflictError, NotFoundError, UsageError
from coffer.vault import paths, registry

DEFAULT_NAME = "coffer"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,19}$")
# Claude Code shows tools as mcp__<name>__<tool> within 64 characters; Coffer budgets for a 6-character name.
NAME_BUDGET = len(DEFAULT_NAME)


def serve_launch() -> tuple[str, list[str]]:
    """How a client should start the gateway: this `coffer` executable if we can name it, else `python -m`."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name.lower() in ("coffer", "coffer.exe") and argv0.is_file():
        return str(argv0.absolute()), ["serve"]
    found = shutil.which("coffer")
    if found:
        return str(Path(found).absolute()), ["serve"]
    return sys.executable, ["-m", "coffer", "serve"]


def serve_env() -> dict[str, str]:
    """Clients start servers without the user's shell environment, so a moved vault must be passed on."""
    home = os.environ.get(paths.ENV_HOME)
    return {paths.ENV_HOME: str(Path(home).expanduser().absolute())} if home else {}


@dataclass
class InstallPlan:
    client: str
    path: Path
    name: str
    entry: dict[str, Any]
    status: str  # "add", "replace" or "already"
    old_text: str | None
    new_text: str
    also_in_vault: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    backup: Path | None = None
    applied: bool = False

    def diff(self) -> str:
        old = (self.old_text or "").splitlines(keepends=True)
        new = self.new_text.splitlines(keepends=True)
        lines = difflib.unified_diff(old, new, str(self.path), f"{self.path} (with {self.name})")
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "path": str(self.path),
            "name": self.name,
            "status": self.status,
            "dry_run": not self.applied,
            "entry": self.entry,
            "backup": str(self.backup) if self.backup else None,
            "also_in_vault": self.also_in_vault,
            "notes": self.notes,
        }


def plan_install(
    client_name: str,
    path: Path | None = None,
    name: str = DEFAULT_NAME,
    force: bool = False,
    base_text: str | None = None,
    profile: str | None = None,
) -> InstallPlan:
    """Work out the new file text; raises ConflictError when `name` is taken by a different entry.

    `base_text`: compute on top of this text instead of the file's (`import --move` removes entries first).
    """
    client = known.get(client_name)
    chosen = path is not None
    path = known.resolve_path(client, path)
    if not NAME_RE.match(name):
        raise UsageError(f"invalid --name '{name}': use 1-20 letters, digits, '_' or '-'")
    missing = client.looks_installed(path) if not chosen and not force and base_text is None else None
    if missing is not None:
        program = f"no `{'` or `'.join(client.binaries)}` on PATH, and " if client.binaries else ""
        raise NotFoundError(
            f"{client.label} does not look installed here ({program}{path.name} and {missing} do not exist):"
            " install it first, or pass --force to create its config anyway (or --path FILE)"
        )
    old: str | None
    try:
        old = common.read_text(path)
    except NotFoundError:
        old = None
    text = (old or "") if base_text is None else base_text
    command, args = serve_launch()
    if profile is not None:
        registry.load().profile(profile)  # unknown: one error line, nothing written
        args = [*args, "--profile", profile]
    entry = client.fmt.launcher(command, args, serve_env())
    current = client.fmt.existing(text, path, name) if text.strip() else None
    in_file = dict(client.fmt.entries(text, path)) if text.strip() else {}
    vault = registry.load().servers
    also = sorted(n for n in in_file if n != name and common.normalise_name(n) in vault)
    plan = InstallPlan(client.name, path, name, entry, "already", old, text, also)
    if len(name) > NAME_BUDGET:
        plan.notes.append(
            f"clients prefix tools with mcp__{name}__; Coffer keeps names within 64 characters only for "
            f"names of up to {NAME_BUDGET} characters"
        )
    for other, raw in in_file.items():
        if other != name and isinstance(raw, dict) and _is_serve(raw):
            plan.notes.append(f"'{other}' in {path} already launches coffer serve; tools would be listed twice")
    if current == entry:
        return plan
    if current is not None and not force:
        launch = _launch_of(current)
        raise ConflictError(
            f"{path}: '{name}' is already there and launches `{launch}`; pass --force to replace it, or --name"
        )
    plan.new_text = client.fmt.add(text, path, name, entry, replace=current is not None)
    plan.status = "replace" if current is not None else "add"
    return plan


def _is_serve(raw: dict[str, Any]) -> bool:
    launch = common.launch_of(raw)
    return launch is not None and common.is_coffer_serve(launch[0], launch[1])


def _launch_of(raw: Any) -> str:
    launch = common.launch_of(raw)
    if launch is not None:
        return " ".join([launch[0], *launch[1]])
    if isinstance(raw, dict) and isinstance(raw.get("url"), str):
        return str(raw["url"])
    return "something else"


def apply_install(plan: InstallPlan) -> InstallPlan:
    """Back the file up, then replace it; does nothing when the entry is already installed."""
    if plan.status != "already":
        if plan.old_text is not None:
            plan.backup = common.backup(plan.path)
        common.replace_file(plan.path, plan.new_text, plan.old_text)
    plan.applied = True
    return plan
