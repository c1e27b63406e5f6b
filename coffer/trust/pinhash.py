"""Canonical forms for pinning (pure): what is hashed for a tool definition and for a launch config.

Canonical JSON (sorted keys, compact, 1.0 == 1, absent == null == {}) so that only a real change of a
pinned field changes the hash, never a re-serialisation of the same definition.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from coffer.errors import RegistryError

if TYPE_CHECKING:
    from coffer.vault.catalogue import CatalogueTool
    from coffer.vault.registry import ServerConfig

NEW_TOOLS = ("allow", "hold")
# Env variables whose *value* decides what code runs; their values are part of the launch hash.
CODE_ENV = frozenset(
    {
        "PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH", "NODE_OPTIONS",
        "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PERL5OPT", "PERL5LIB", "RUBYOPT",
        "RUBYLIB", "JAVA_TOOL_OPTIONS", "BASH_ENV", "ENV", "ZDOTDIR",
    }
)  # fmt: skip
_TOOL_FIELDS = {
    "name": ("name",),
    "title": ("title",),
    "description": ("description",),
    "inputSchema": ("inputSchema", "input_schema"),
    "outputSchema": ("outputSchema", "output_schema"),
    "annotations": ("annotations",),
    "_meta": ("_meta", "meta"),
}


# ---------------------------------------------------------------- canonical forms (pure)


def _normal(value: Any) -> Any:
    """JSON-equal values get one spelling: 1.0 and 1 are the same number to a schema."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    return value


def tool_definition(tool: CatalogueTool | Mapping[str, Any]) -> dict[str, Any]:
    """The pinned fields of a tool, as the upstream served them (absent, null and {} are the same)."""
    if isinstance(tool, Mapping):
        raw: Mapping[str, Any] = tool
    elif tool.raw:
        raw = tool.raw
    else:
        raw = {
            "name": tool.tool,
            "title": tool.title,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "annotations": tool.annotations,
        }
    out: dict[str, Any] = {}
    for key, aliases in _TOOL_FIELDS.items():
        value = next((raw[a] for a in aliases if raw.get(a) is not None), None)
        if value is None or (key not in ("name", "description") and value in ({}, "")):
            continue
        out[key] = _normal(value)
    out.setdefault("description", "")
    return out


def canonical(data: Any) -> str:
    return json.dumps(_normal(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(data: Any) -> str:
    return hashlib.sha256(canonical(data).encode("utf-8")).hexdigest()


def tool_hash(tool: CatalogueTool | Mapping[str, Any]) -> str:
    return digest(tool_definition(tool))


def config_definition(cfg: ServerConfig) -> dict[str, Any]:
    """What decides which program runs, where it connects and what it may touch; never secret values.
    The sandbox counts only when it is not the default, so entries approved before it existed stay so."""
    out = {
        "transport": cfg.transport,
        "command": cfg.command,
        "args": list(cfg.args),
        "cwd": cfg.cwd,
        "url": cfg.url,
        "env": sorted(cfg.env),
        "code_env": {k: v for k, v in sorted(cfg.env.items()) if k.upper() in CODE_ENV},
        "headers": sorted(cfg.headers),
    }
    if cfg.sandbox != "auto":
        out["sandbox"] = cfg.sandbox
    if cfg.exchange is not None:  # the member's identity goes to this server: as much a grant as a header
        out["exchange"] = cfg.exchange
    return out


def config_hash(cfg: ServerConfig) -> str:
    return digest(config_definition(cfg))


def pretty(definition: Any) -> str:
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def unified(old: str, new: str, label: str, now: str = "served now") -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"{label} (approved)", f"{label} ({now})"
    )
    return "".join(lines)


def new_tools_setting(settings: Mapping[str, Any]) -> str:
    value = settings.get("new_tools", "allow")
    if value not in NEW_TOOLS:
        raise RegistryError(f'settings.new_tools must be "allow" or "hold", not {value!r}')
    return str(value)
