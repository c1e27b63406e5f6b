"""The JSON formats that are `mcpServers` with a twist, and the two that are not.

- Gemini CLI: `httpUrl` is streamable HTTP, a plain `url` is SSE (unless `type` says http), env values
  may be written `$VAR`.
- Windsurf: `serverUrl` for remote servers. Cline: `type` is `stdio`, `sse` or `streamableHttp`.
  Amazon Q Developer and Kiro: plain `mcpServers` (plus `disabled`, `autoApprove`, `timeout`).
- Zed: `context_servers`, each `{"source": "custom", "command", "args", "env"}` (older settings nest
  `{"command": {"path", "args", "env"}}`); servers from Zed extensions have no command and stay there.
- opencode: `mcp`, each `{"type": "local", "command": [argv...], "environment", "enabled"}` or
  `{"type": "remote", "url", "headers"}` (newer configs nest them under `mcp.servers`).

Every variant is read through `common.convert` once turned into the common shape, so the same
validation, notes and `${VAR}` rules apply; edits go through the same text-preserving JSONC editor.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from coffer.clients import common
from coffer.clients.mcpjson import McpServersJson

_DOLLAR_VAR = re.compile(r"(?<![\w$])\$([A-Za-z_][A-Za-z0-9_]*)")
HTTP_TYPES = ("http", "streamable-http", "streamableHttp", "streamable_http")


def _dollar_refs(value: Any) -> Any:
    """`$VAR` (Gemini CLI's other spelling) as `${VAR}`."""
    if isinstance(value, dict):
        return {k: _dollar_refs(v) for k, v in value.items()}
    if isinstance(value, str):
        return _DOLLAR_VAR.sub(r"${\1}", value)
    return value


class AliasedJson(McpServersJson):
    """`mcpServers` whose remote URL key or transport spelling differs from Claude's."""

    def __init__(self, url_keys: tuple[str, ...] = (), plain_url_is_sse: bool = False, dollar_refs: bool = False):
        super().__init__()
        self.url_keys = url_keys
        self.plain_url_is_sse = plain_url_is_sse
        self.dollar_refs = dollar_refs

    def convert(self, name: str, raw: Any) -> common.Converted:
        if not isinstance(raw, dict):
            return common.convert(raw)
        entry = dict(raw)
        kind = entry.pop("type", None)
        if kind == "sse":
            return common.Converted(None, "SSE transport is not supported (Coffer speaks stdio and streamable HTTP)")
        remote = next((entry.pop(k) for k in self.url_keys if k in entry), None)
        if remote is not None:
            entry["url"] = remote
        elif "url" in entry and self.plain_url_is_sse and kind not in HTTP_TYPES:
            return common.Converted(None, "'url' is an SSE server here (Coffer speaks stdio and streamable HTTP)")
        for key in ("timeout", "trust", "autoApprove", "alwaysAllow", "includeTools", "excludeTools", "description"):
            entry.pop(key, None)
        if self.dollar_refs:
            entry = _dollar_refs(entry)
        return common.convert(entry)


class ZedJson(McpServersJson):
    key = "context_servers"

    def convert(self, name: str, raw: Any) -> common.Converted:
        if not isinstance(raw, dict):
            return common.convert(raw)
        command = raw.get("command")
        if isinstance(command, dict):  # older settings: {"command": {"path", "args", "env"}}
            raw = {"command": command.get("path"), "args": command.get("args") or [], "env": command.get("env") or {}}
        elif command is None and "url" not in raw:
            return common.Converted(None, "provided by a Zed extension (no command): it stays in Zed")
        entry = {k: v for k, v in raw.items() if k in ("command", "args", "env", "url", "headers")}
        result = common.convert(entry)
        if raw.get("enabled") is False and result.config is not None:
            result.config.enabled = False
            result.notes.append("disabled in the client, imported disabled")
        return result

    def launcher(self, command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        return {"source": "custom", "command": command, "args": args, "env": env}


class OpenCodeJson(McpServersJson):
    key = "mcp"

    def entries(self, text: str, path: Path) -> list[tuple[str, Any]]:
        nested = self.entries_at(text, path, ("mcp", "servers"))
        if nested:
            return nested
        return [(k, v) for k, v in super().entries(text, path) if isinstance(v, dict) and "type" in v]

    def remove(self, text: str, path: Path, name: str, where: tuple[str, ...] | None = None) -> str:
        nested = ("mcp", "servers")
        if where is None and any(n == name for n, _ in self.entries_at(text, path, nested)):
            where = nested
        return super().remove(text, path, name, where)

    def convert(self, name: str, raw: Any) -> common.Converted:
        if not isinstance(raw, dict):
            return common.convert(raw)
        if raw.get("type") == "remote":
            entry: dict[str, Any] = {"url": raw.get("url"), "headers": raw.get("headers") or {}}
        else:
            argv = raw.get("command")
            if isinstance(argv, str):
                argv = [argv]
            if not isinstance(argv, list) or not argv:
                return common.Converted(None, "'command' must be a non-empty list")
            entry = {"command": argv[0], "args": argv[1:], "env": raw.get("environment") or {}}
        entry["enabled"] = raw.get("enabled", True) is not False and raw.get("disabled") is not True
        return common.convert(entry)

    def launcher(self, command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "local", "command": [command, *args], "enabled": True}
        if env:
            entry["environment"] = env
        return entry
