"""Codex's `~/.codex/config.toml`: `[mcp_servers.NAME]` tables, edited with tomlkit so comments survive.

Codex names environment it passes through (`env_vars`, `bearer_token_env_var`, `env_http_headers`)
rather than writing `${VAR}`; those become Coffer `${VAR}` references so no secret is copied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.toml_document import TOMLDocument

from coffer.clients import common
from coffer.errors import ConflictError

KEY = "mcp_servers"


class CodexToml:
    key = KEY

    def _doc(self, text: str, path: Path) -> TOMLDocument:
        try:
            return tomlkit.parse(text)
        except ParseError as exc:
            reason = str(exc).split(" at line ")[0]
            raise common.ClientFileError(f"{path}:{exc.line}:{exc.col}: invalid TOML: {reason}") from None
        except RecursionError:
            raise common.ClientFileError(f"{path}: nested too deeply to be a client config") from None

    def _servers(self, doc: TOMLDocument, path: Path) -> Any | None:
        servers = doc.get(KEY)
        if servers is not None and not isinstance(servers.unwrap() if hasattr(servers, "unwrap") else servers, dict):
            raise common.ClientFileError(f"{path}: '{KEY}' must be a table")
        return servers

    def entries(self, text: str, path: Path) -> list[tuple[str, Any]]:
        servers = self._servers(self._doc(text, path), path)
        return list(servers.unwrap().items()) if servers is not None else []

    def convert(self, name: str, raw: Any) -> common.Converted:
        if not isinstance(raw, dict):
            return common.Converted(None, "entry is not a table")
        shaped: dict[str, Any] = {k: raw[k] for k in ("command", "args", "env", "cwd", "url", "enabled") if k in raw}
        notes: list[str] = []
        env = dict(raw.get("env") or {}) if isinstance(raw.get("env") or {}, dict) else raw.get("env")
        for var in raw.get("env_vars") or []:
            if isinstance(var, str) and isinstance(env, dict):
                env.setdefault(var, f"${{{var}}}")
            else:
                notes.append(f"env_vars entry {var!r} not understood; not imported")
        if env:
            shaped["env"] = env
        headers: dict[str, Any] = dict(raw.get("http_headers") or {})
        for header, var in dict(raw.get("env_http_headers") or {}).items():
            headers[header] = f"${{{var}}}"
        if raw.get("bearer_token_env_var"):
            headers["Authorization"] = f"Bearer ${{{raw['bearer_token_env_var']}}}"
        if headers:
            shaped["headers"] = headers
        result = common.convert(shaped)
        if result.config is not None:
            disabled = raw.get("disabled_tools")
            if isinstance(disabled, list) and all(isinstance(t, str) for t in disabled):
                result.config.disabled_tools = list(disabled)
            if raw.get("enabled_tools"):
                result.notes.append("'enabled_tools' is not imported: use `coffer disable SERVER__TOOL`")
        result.notes[:0] = notes
        return result

    def launcher(self, command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        entry: dict[str, Any] = {"command": command, "args": args}
        if env:
            entry["env"] = env
        return entry

    def existing(self, text: str, path: Path, name: str) -> Any | None:
        servers = self._servers(self._doc(text, path), path)
        if servers is None or name not in servers:
            return None
        value = servers[name]
        return value.unwrap() if hasattr(value, "unwrap") else value

    def add(self, text: str, path: Path, name: str, entry: dict[str, Any], replace: bool) -> str:
        doc = self._doc(text, path)
        before = doc.unwrap()
        servers = self._servers(doc, path)
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc.add(KEY, servers)
        elif name in servers and not replace:
            raise ConflictError(f"{path}: '{KEY}.{name}' already exists")
        table = tomlkit.table()
        for key, value in entry.items():
            if isinstance(value, dict):
                inline = tomlkit.inline_table()
                inline.update(value)
                table.add(key, inline)
            else:
                table.add(key, value)
        table.add(tomlkit.nl())  # a blank line before whatever table follows
        servers[name] = table  # item assignment also works on tables split across the file
        new = tomlkit.dumps(doc)
        if not text.endswith("\n\n"):
            new = new.rstrip("\n") + "\n"
        if text.strip() and new.startswith(text) and not text.endswith("\n\n"):
            new = text.rstrip("\n") + "\n\n" + new[len(text) :].lstrip("\n")  # appended: separate it
        expected = before | {KEY: {**before.get(KEY, {}), name: entry}}
        if self._doc(new, path).unwrap() != expected:
            raise common.ClientFileError(f"{path}: could not add '{name}' without disturbing the file")
        return new

    def remove(self, text: str, path: Path, name: str, where: tuple[str, ...] | None = None) -> str:
        """`text` without `[mcp_servers.NAME]` (and its sub-tables); comments and the rest kept."""
        doc = self._doc(text, path)
        before = doc.unwrap()
        servers = self._servers(doc, path)
        if servers is None or name not in servers:
            return text
        del servers[name]
        new = tomlkit.dumps(doc)
        expected = dict(before)
        expected[KEY] = {k: v for k, v in before[KEY].items() if k != name}
        got = self._doc(new, path).unwrap()
        if not expected[KEY]:  # the last server: an empty or absent [mcp_servers] means the same
            got.setdefault(KEY, {})
        if got != expected:
            raise common.ClientFileError(f"{path}: could not remove '{name}' without disturbing the file")
        return new
