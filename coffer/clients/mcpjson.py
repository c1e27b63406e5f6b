"""The `mcpServers` JSON format of Claude Desktop, Claude Code (`~/.claude.json`, `.mcp.json`) and Cursor.

Edits are text insertions (see `jsonc`), so key order, other entries, indentation and even comments
stay byte-for-byte; the result is parsed back and compared before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coffer.clients import common, jsonc
from coffer.errors import ConflictError


class McpServersJson:
    """A JSON file whose servers live in one top-level object (`key`)."""

    key = "mcpServers"

    def __init__(self, typed: bool = False) -> None:
        self.typed = typed  # Claude Code and VS Code write `"type": "stdio"` on every entry

    def _root(self, text: str, path: Path) -> jsonc.Node:
        try:
            root = jsonc.parse(text)
        except jsonc.JsoncError as exc:
            raise common.ClientFileError(f"{path}:{exc.line}:{exc.col}: invalid JSON: {exc.reason}") from None
        except RecursionError:
            raise common.ClientFileError(f"{path}: nested too deeply to be a client config") from None
        if not isinstance(root.value, dict):
            raise common.ClientFileError(f"{path}:1: expected a JSON object at the top level")
        return root

    def _line(self, text: str, pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def container(self, text: str, path: Path, root: jsonc.Node) -> jsonc.Member | None:
        member = root.member(self.key)
        if member is not None and not isinstance(member.node.value, dict):
            raise common.ClientFileError(f"{path}:{self._line(text, member.key_start)}: '{self.key}' must be an object")
        return member

    def entries(self, text: str, path: Path) -> list[tuple[str, Any]]:
        root = self._root(text, path)
        member = self.container(text, path, root)
        if member is None:
            return []
        return [(m.key, m.node.value) for m in member.node.members]

    def _at(self, text: str, path: Path, where: tuple[str, ...]) -> tuple[jsonc.Node, jsonc.Node | None]:
        """(root, the object at the key path `where`, or None when a key on the way is missing)."""
        root = self._root(text, path)
        node: jsonc.Node | None = root
        for key in where:
            found = node.member(key) if node is not None and isinstance(node.value, dict) else None
            node = found.node if found is not None else None
        if node is not None and not isinstance(node.value, dict):
            raise common.ClientFileError(f"{path}: '{'.'.join(where)}' must be an object")
        return root, node

    def entries_at(self, text: str, path: Path, where: tuple[str, ...]) -> list[tuple[str, Any]]:
        """The server entries in the object at key path `where` (e.g. a Claude Code project's local scope)."""
        node = self._at(text, path, where)[1]
        return [] if node is None else [(m.key, m.node.value) for m in node.members]

    def remove(self, text: str, path: Path, name: str, where: tuple[str, ...] | None = None) -> str:
        """`text` without the entry `name` (at `where`, default the top-level container); the rest kept."""
        where = where or (self.key,)
        root, node = self._at(text, path, where)
        if node is None or node.member(name) is None:
            return text
        new = jsonc.remove_member(text, node, name)
        expected = json.loads(json.dumps(root.value))
        target = expected
        for key in where:
            target = target[key]
        del target[name]
        if self._root(new, path).value != expected:  # never write what does not read back as intended
            raise common.ClientFileError(f"{path}: could not remove '{name}' without disturbing the file")
        return new

    def convert(self, name: str, raw: Any) -> common.Converted:
        return common.convert(raw)

    def launcher(self, command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "stdio"} if self.typed else {}
        entry |= {"command": command, "args": args}
        if env:
            entry["env"] = env
        return entry

    def existing(self, text: str, path: Path, name: str) -> Any | None:
        if not text.strip():
            return None
        member = self.container(text, path, self._root(text, path))
        found = member.node.member(name) if member is not None else None
        return found.node.value if found is not None else None

    def add(self, text: str, path: Path, name: str, entry: dict[str, Any], replace: bool) -> str:
        if not text.strip():
            text = "{}\n"
        root = self._root(text, path)
        unit = jsonc.indent_unit(text, root)
        member = self.container(text, path, root)
        if member is None:
            new = jsonc.add_member(text, root, self.key, {name: entry}, unit)
        else:
            current = member.node.member(name)
            if current is None:
                new = jsonc.add_member(text, member.node, name, entry, unit)
            elif replace:
                new = jsonc.replace_value(text, current, entry, unit)
            else:
                raise ConflictError(f"{path}: '{self.key}.{name}' already exists")
        expected = dict(root.value)
        expected[self.key] = {**(member.node.value if member else {}), name: entry}
        if self._root(new, path).value != expected:  # never write what does not read back as intended
            raise common.ClientFileError(f"{path}: could not add '{name}' without disturbing the file")
        return new
