"""VS Code's `mcp.json` (user or `.vscode/`): top-level `servers` with `type: stdio|http|sse`, plus `inputs`.

VS Code writes environment references as `${env:VAR}`; Coffer's form is `${VAR}`, so those are
translated. `${input:...}` prompts and `${workspaceFolder}` have no Coffer meaning: such servers are
imported disabled with a note. `inputs` and every other key stay untouched on install.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from coffer.clients import common
from coffer.clients.mcpjson import McpServersJson

_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _translate(value: Any) -> Any:
    if isinstance(value, str):
        return _ENV_REF.sub(r"${\1}", value)
    if isinstance(value, list):
        return [_translate(v) for v in value]
    if isinstance(value, dict):
        return {k: _translate(v) for k, v in value.items()}
    return value


class VsCodeJson(McpServersJson):
    key = "servers"

    def __init__(self) -> None:
        super().__init__(typed=True)

    def entries(self, text: str, path: Path) -> list[tuple[str, Any]]:
        found = super().entries(text, path)
        if found:
            return found
        # Older setups keep servers in settings.json under "mcp": {"servers": {...}}.
        mcp = self._root(text, path).value.get("mcp")
        servers = mcp.get("servers") if isinstance(mcp, dict) else None
        return list(servers.items()) if isinstance(servers, dict) else []

    def convert(self, name: str, raw: Any) -> common.Converted:
        translated = _translate(raw)
        result = common.convert(translated)
        if translated != raw:
            result.notes.insert(0, "translated ${env:VAR} references to ${VAR}")
        if isinstance(raw, dict) and raw.get("envFile") and result.config is not None:
            result.notes.append("'envFile' is not imported: add its variables with ${VAR} references")
        return result
