"""The clients Coffer knows, their file format and where each keeps its MCP config on this platform."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coffer.clients.codex import CodexToml
from coffer.clients.common import Format
from coffer.clients.mcpjson import McpServersJson
from coffer.clients.vscode import VsCodeJson
from coffer.errors import UsageError


def _app_config(*parts: str) -> Path:
    """The per-user application config folder that Electron apps (Claude, VS Code) use."""
    home = Path.home()
    if sys.platform == "darwin":
        return home.joinpath("Library", "Application Support", *parts)
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming").joinpath(*parts)
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config").joinpath(*parts)


def _codex() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"


@dataclass(frozen=True)
class Client:
    name: str
    label: str
    fmt: Format
    default: Callable[[], Path]
    other_paths: str  # shown in help: the other files of the same format

    def default_path(self) -> Path:
        return self.default()


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            "claude-code",
            "Claude Code",
            McpServersJson(typed=True),
            lambda: Path.home() / ".claude.json",
            "a project's .mcp.json",
        ),
        Client(
            "claude-desktop",
            "Claude Desktop",
            McpServersJson(),
            lambda: _app_config("Claude", "claude_desktop_config.json"),
            "",
        ),
        Client("cursor", "Cursor", McpServersJson(), lambda: Path.home() / ".cursor" / "mcp.json", ".cursor/mcp.json"),
        Client("vscode", "VS Code", VsCodeJson(), lambda: _app_config("Code", "User", "mcp.json"), ".vscode/mcp.json"),
        Client("codex", "Codex", CodexToml(), _codex, ""),
    )
}


def get(name: str) -> Client:
    try:
        return CLIENTS[name]
    except KeyError:
        raise UsageError(f"unknown client '{name}': expected one of {', '.join(CLIENTS)}") from None


def resolve_path(client: Client, path: Path | None) -> Path:
    return path.expanduser().absolute() if path is not None else client.default_path()
