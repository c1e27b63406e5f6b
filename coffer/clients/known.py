"""The clients Coffer knows, their file format and where each keeps its MCP config on this platform."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coffer.clients.codex import CodexToml
from coffer.clients.common import Format
from coffer.clients.mcpjson import McpServersJson
from coffer.clients.variants import AliasedJson, OpenCodeJson, ZedJson
from coffer.clients.vscode import VsCodeJson
from coffer.clients.yamlfmt import ContinueYaml, GooseYaml
from coffer.errors import CofferError, UsageError


def _app_config(*parts: str) -> Path:
    """The per-user application config folder that Electron apps (Claude, VS Code) use."""
    home = Path.home()
    if sys.platform == "darwin":
        return home.joinpath("Library", "Application Support", *parts)
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming").joinpath(*parts)
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config").joinpath(*parts)


CLINE_FILE = "cline_mcp_settings.json"


def _xdg_config(*parts: str) -> Path:
    """`~/.config/...` (or $XDG_CONFIG_HOME) on every platform: where CLI tools such as opencode keep config."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config").joinpath(*parts)


def _needs_path() -> Path:
    raise UsageError("this client has no usual file: pass --path FILE")


def _zed() -> Path:
    if sys.platform == "win32":
        return _app_config("Zed", "settings.json")
    return _xdg_config("zed", "settings.json")  # macOS too: Zed keeps ~/.config/zed


def _codex() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"


SCOPES = ("user", "local", "project")


@dataclass(frozen=True)
class Source:
    """One place a client keeps servers: a file, and the key path of the object holding them."""

    scope: str  # "user" (the user's file), "local" (a project's entry in it), "project", "file" (--path)
    path: Path
    where: tuple[str, ...] | None = None  # None: the format's own top-level key
    project: str | None = None  # for local scope: the project directory

    def label(self) -> str:
        if self.scope == "local":
            return f"local scope of {self.project} in {self.path}"
        return f"{self.scope} scope, {self.path}"


@dataclass(frozen=True)
class Client:
    name: str
    label: str
    fmt: Format
    default: Callable[[], Path]
    project_file: str | None = None  # relative to the current directory, e.g. ".mcp.json"
    local_scopes: bool = False  # Claude Code: projects["<dir>"].mcpServers inside the user file
    home_dir: str | None = None  # its own folder under HOME, where its config file sits in HOME itself
    binaries: tuple[str, ...] = ()  # its programs: one on PATH says it is installed, though it never ran yet

    def default_path(self) -> Path:
        return self.default()

    def looks_installed(self, path: Path) -> Path | None:
        """None where the client looks installed (its config file or a folder of its own exists, or its
        program is on PATH: right after `npm i -g` it has never run, so it has no config yet); else the
        folder whose absence says it is not. One rule for every client: never HOME itself."""
        if path.exists() or any(shutil.which(b) for b in self.binaries):
            return None
        own = Path.home() / self.home_dir if self.home_dir else path.parent
        if own.exists() and own.resolve() != Path.home().resolve():
            return None
        return own

    def sources(self, path: Path | None = None, scope: str | None = None, cwd: Path | None = None) -> list[Source]:
        """Every place this client keeps servers, narrowed to `scope`; `path` replaces the user file.

        With --path, the file given is read as the user file (and, for Claude Code, its projects'
        local scopes); the current directory's project file is read only without --path.
        """
        if scope is not None and scope not in SCOPES:
            raise UsageError(f"unknown scope '{scope}': expected one of {', '.join(SCOPES)}")
        user = resolve_path(self, path)
        found: list[Source] = []
        if scope in (None, "user"):
            found.append(Source("user" if path is None else "file", user))
        if self.local_scopes and scope in (None, "local"):
            found += [Source("local", user, ("projects", d, "mcpServers"), d) for d in _projects(self, user)]
        if self.project_file and path is None and scope in (None, "project"):
            project = (cwd or Path.cwd()) / self.project_file
            if project.exists() or scope == "project":
                found.append(Source("project", project))
        return found


def _projects(client: Client, path: Path) -> list[str]:
    """The project directories of a Claude Code user file that have servers of their own."""
    from coffer.clients.common import read_text

    try:
        text = read_text(path)
    except CofferError:
        return []
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        return []  # reported when the user scope is read
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        return []
    return [d for d, v in projects.items() if isinstance(v, dict) and isinstance(v.get("mcpServers"), dict)]


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            "claude-code",
            "Claude Code",
            McpServersJson(typed=True),
            lambda: Path.home() / ".claude.json",
            project_file=".mcp.json",
            local_scopes=True,
            home_dir=".claude",  # ~/.claude.json sits in HOME; Claude Code's own folder is ~/.claude
            binaries=("claude",),
        ),
        Client(
            "claude-desktop",
            "Claude Desktop",
            McpServersJson(),
            lambda: _app_config("Claude", "claude_desktop_config.json"),
        ),
        Client(
            "cursor",
            "Cursor",
            McpServersJson(),
            lambda: Path.home() / ".cursor" / "mcp.json",
            binaries=("cursor", "cursor-agent"),
        ),
        Client("vscode", "VS Code", VsCodeJson(), lambda: _app_config("Code", "User", "mcp.json"), binaries=("code",)),
        Client("codex", "Codex", CodexToml(), _codex, binaries=("codex",)),
        Client(
            "gemini",
            "Gemini CLI",
            AliasedJson(url_keys=("httpUrl",), plain_url_is_sse=True, dollar_refs=True),
            lambda: Path.home() / ".gemini" / "settings.json",
            project_file=".gemini/settings.json",
            binaries=("gemini",),
        ),
        Client(
            "windsurf",
            "Windsurf",
            AliasedJson(url_keys=("serverUrl",)),
            lambda: Path.home() / ".codeium" / "windsurf" / "mcp_config.json",
            binaries=("windsurf",),
        ),
        Client(
            "cline",
            "Cline",
            AliasedJson(),
            lambda: _app_config("Code", "User", "globalStorage", "saoudrizwan.claude-dev", "settings", CLINE_FILE),
        ),
        Client(
            "amazon-q",
            "Amazon Q Developer",
            AliasedJson(),
            lambda: Path.home() / ".aws" / "amazonq" / "mcp.json",
            project_file=".amazonq/mcp.json",
        ),
        Client(
            "kiro",
            "Kiro",
            AliasedJson(),
            lambda: Path.home() / ".kiro" / "settings" / "mcp.json",
            project_file=".kiro/settings/mcp.json",
            binaries=("kiro",),
        ),
        Client("zed", "Zed", ZedJson(), _zed, project_file=".zed/settings.json", binaries=("zed", "zeditor")),
        Client(
            "opencode",
            "opencode",
            OpenCodeJson(),
            lambda: _xdg_config("opencode", "opencode.json"),
            project_file="opencode.json",
            binaries=("opencode",),
        ),
        Client("json", "an mcpServers JSON file", McpServersJson(), _needs_path),
        Client("goose", "goose", GooseYaml(), lambda: _xdg_config("goose", "config.yaml"), binaries=("goose",)),
        Client("continue", "Continue", ContinueYaml(), lambda: Path.home() / ".continue" / "config.yaml"),
    )
}


def get(name: str) -> Client:
    try:
        return CLIENTS[name]
    except KeyError:
        raise UsageError(f"unknown client '{name}': expected one of {', '.join(CLIENTS)}") from None


def resolve_path(client: Client, path: Path | None) -> Path:
    return path.expanduser().absolute() if path is not None else client.default_path()
