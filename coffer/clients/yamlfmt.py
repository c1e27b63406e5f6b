"""The YAML formats: goose (`~/.config/goose/config.yaml`, `extensions`) and Continue
(`~/.continue/config.yaml`, a `mcpServers` list).

Edits go through ruamel.yaml's round-trip mode, so comments, key order and the rest of the file stay;
the result is parsed back and compared with what was intended before anything is written.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from coffer.clients import common
from coffer.errors import ConflictError


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip: comments and order survive a load and dump
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _load(text: str, path: Path) -> Any:
    from ruamel.yaml.error import YAMLError

    try:
        data = _yaml().load(text) if text.strip() else None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise common.ClientFileError(f"{path}{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:
        raise common.ClientFileError(f"{path}: nested too deeply to be a client config") from None
    if data is None:
        from ruamel.yaml.comments import CommentedMap

        return CommentedMap()
    if not isinstance(data, dict):
        raise common.ClientFileError(f"{path}:1: expected a YAML mapping at the top level")
    return data


def _dump(data: Any) -> str:
    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue()


def _plain(data: Any) -> Any:
    """Round-trip containers as plain dicts and lists, for comparing what a file means."""
    if isinstance(data, dict):
        return {str(k): _plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


def _written(data: Any, path: Path, expected: dict[str, Any], what: str) -> str:
    """The edited document as text, once it reads back as `expected` (never write what does not)."""
    new = _dump(data)
    if _plain(_load(new, path)) != expected:
        raise common.ClientFileError(f"{path}: could not {what} without disturbing the file")
    return new


class GooseYaml:
    """goose's `extensions:` mapping: `{cmd, args, envs, enabled, type: stdio}` or `{type: streamable_http, uri}`."""

    key = "extensions"

    def _extensions(self, data: Any, path: Path) -> Any:
        ext = data.get(self.key)
        if ext is not None and not isinstance(ext, dict):
            raise common.ClientFileError(f"{path}: '{self.key}' must be a mapping")
        return ext

    def entries(self, text: str, path: Path) -> list[tuple[str, Any]]:
        ext = self._extensions(_load(text, path), path) or {}
        return [(str(k), _plain(v)) for k, v in ext.items()]

    def convert(self, name: str, raw: Any) -> common.Converted:
        if not isinstance(raw, dict):
            return common.Converted(None, "entry is not a mapping")
        kind = raw.get("type", "stdio")
        if kind == "sse":
            return common.Converted(None, "SSE transport is not supported (Coffer speaks stdio and streamable HTTP)")
        if kind in ("builtin", "platform", "frontend", "inline_python"):
            return common.Converted(None, f"a goose {kind} extension, not an MCP server Coffer can start")
        if kind == "streamable_http":
            entry: dict[str, Any] = {"url": raw.get("uri"), "headers": raw.get("headers") or {}}
        else:
            entry = {"command": raw.get("cmd"), "args": raw.get("args") or [], "env": raw.get("envs") or {}}
        entry["enabled"] = raw.get("enabled", True) is not False
        result = common.convert(entry)
        if raw.get("env_keys") and result.config is not None:
            keys = ", ".join(map(str, raw["env_keys"]))
            result.notes.append(
                f"env_keys ({keys}) live in goose's keyring: add them with ${{VAR}} or ${{secret:NAME}}"
            )
        return result

    def launcher(self, command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": "coffer", "type": "stdio", "cmd": command, "args": args, "enabled": True}
        entry |= {"envs": env, "timeout": 300} if env else {"timeout": 300}
        return entry

    def existing(self, text: str, path: Path, name: str) -> Any | None:
        return dict(self.entries(text, path)).get(name) if text.strip() else None

    def add(self, text: str, path: Path, name: str, entry: dict[str, Any], replace: bool) -> str:
        data = _load(text, path)
        before = _plain(data)
        ext = self._extensions(data, path)
        if ext is None:
            data[self.key] = ext = {}
        elif name in ext and not replace:
            raise ConflictError(f"{path}: '{self.key}.{name}' already exists")
        ext[name] = entry
        expected = before | {self.key: {**before.get(self.key, {}), name: entry}}
        return _written(data, path, expected, f"add '{name}'")

    def remove(self, text: str, path: Path, name: str, where: tuple[str, ...] | None = None) -> str:
        data = _load(text, path)
        ext = self._extensions(data, path)
        if not ext or name not in ext:
            return text
        before = _plain(data)
        del ext[name]
        del before[self.key][name]
        return _written(data, path, before, f"remove '{name}'")


class ContinueYaml:
    """Continue's `mcpServers:` list of `{name, command, args, env}` or `{name, type: streamable-http, url}`."""

    key = "mcpServers"

    def _servers(self, data: Any, path: Path) -> Any:
        servers = data.get(self.key)
        if servers is not None and not isinstance(servers, list):
            raise common.ClientFileError(f"{path}: '{self.key}' must be a list")
        return servers

    def entries(self, text: str, path: Path) -> list[tuple[str, Any]]:
        servers = self._servers(_load(text, path), path) or []
        return [
            (str(s.get("name") or f"server-{i + 1}"), _plain(s)) for i, s in enumerate(servers) if isinstance(s, dict)
        ]

    def convert(self, name: str, raw: Any) -> common.Converted:
        if not isinstance(raw, dict):
            return common.Converted(None, "entry is not a mapping")
        kind = raw.get("type")
        if kind in ("sse", "websocket"):
            return common.Converted(
                None, f"{kind} transport is not supported (Coffer speaks stdio and streamable HTTP)"
            )
        entry = {k: v for k, v in raw.items() if k in ("command", "args", "env", "cwd", "url")}
        if isinstance(raw.get("requestOptions"), dict) and isinstance(raw["requestOptions"].get("headers"), dict):
            entry["headers"] = raw["requestOptions"]["headers"]
        return common.convert(entry)

    def launcher(self, command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": "coffer", "command": command, "args": args}
        if env:
            entry["env"] = env
        return entry

    def existing(self, text: str, path: Path, name: str) -> Any | None:
        return dict(self.entries(text, path)).get(name) if text.strip() else None

    def add(self, text: str, path: Path, name: str, entry: dict[str, Any], replace: bool) -> str:
        data = _load(text, path)
        before = _plain(data)
        servers = self._servers(data, path)
        if servers is None:
            data[self.key] = servers = []
        entry = {"name": name, **{k: v for k, v in entry.items() if k != "name"}}
        index = next((i for i, s in enumerate(servers) if isinstance(s, dict) and s.get("name") == name), None)
        if index is not None and not replace:
            raise ConflictError(f"{path}: '{self.key}' already has '{name}'")
        expected_list = list(before.get(self.key) or [])
        if index is None:
            servers.append(entry)
            expected_list.append(entry)
        else:
            servers[index] = entry
            expected_list[index] = entry
        return _written(data, path, before | {self.key: expected_list}, f"add '{name}'")

    def remove(self, text: str, path: Path, name: str, where: tuple[str, ...] | None = None) -> str:
        data = _load(text, path)
        servers = self._servers(data, path) or []
        index = next((i for i, s in enumerate(servers) if isinstance(s, dict) and s.get("name") == name), None)
        if index is None:
            return text
        before = _plain(data)
        del servers[index]
        del before[self.key][index]
        return _written(data, path, before, f"remove '{name}'")
