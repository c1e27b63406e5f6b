"""Code mode's rules: on or off for a client, the limits of one script, and which tools it may call.

Off until the user turns it on (`[settings] code_mode = true`, or `code_mode = true` in a profile, which
wins for that profile's clients). A script may call a server's tools annotated `readOnlyHint: true`;
`code_mode = "all"` on a server allows every tool of it, and a list of tool names allows those besides
the read-only ones. A refusal names the setting that would allow the call, so the user can decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coffer.errors import RegistryError
from coffer.vault.profiles import Profile
from coffer.vault.servers import ServerConfig

TOOL = "coffer__run"
OFF = (
    "code mode is off: the user can turn it on with `coffer code-mode on` (`[settings] code_mode = true` in "
    "coffer.toml), a profile's code_mode = true, or the console's Servers page"
)

# [settings] key -> (default, least, most): wall time of one script, its heap, its tool calls, its print()
LIMIT_KEYS: dict[str, tuple[float, float, float]] = {
    "code_mode_timeout_s": (30.0, 1.0, 600.0),
    "code_mode_memory_mb": (64.0, 8.0, 2048.0),
    "code_mode_max_calls": (100.0, 1.0, 10_000.0),
    "code_mode_output_kb": (1024.0, 1.0, 65_536.0),
}


@dataclass(frozen=True)
class Limits:
    wall_s: float = LIMIT_KEYS["code_mode_timeout_s"][0]
    memory_bytes: int = int(LIMIT_KEYS["code_mode_memory_mb"][0]) * 1024 * 1024
    calls: int = int(LIMIT_KEYS["code_mode_max_calls"][0])
    output_bytes: int = int(LIMIT_KEYS["code_mode_output_kb"][0]) * 1024


def enabled(settings: Mapping[str, Any], profile: Profile | None = None) -> bool:
    """Whether `coffer__run` is offered: the client's profile decides where it says, else the settings."""
    if profile is not None and profile.code_mode is not None:
        return profile.code_mode
    return settings.get("code_mode") is True


def limits(settings: Mapping[str, Any]) -> Limits:
    """The `[settings]` limits, each checked (a RegistryError names the bad one)."""
    got: dict[str, float] = {}
    for key, (default, least, most) in LIMIT_KEYS.items():
        value = settings.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not least <= value <= most:
            raise RegistryError(f"settings.{key} must be a number from {least:g} to {most:g}, not {value!r}")
        got[key] = float(value)
    return Limits(
        wall_s=got["code_mode_timeout_s"],
        memory_bytes=int(got["code_mode_memory_mb"] * 1024 * 1024),
        calls=int(got["code_mode_max_calls"]),
        output_bytes=int(got["code_mode_output_kb"] * 1024),
    )


def read_only(raw: Mapping[str, Any]) -> bool:
    """The tool's own `readOnlyHint` (an upstream's claim; the user decides what else scripts may call)."""
    annotations = raw.get("annotations")
    return isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True


def refusal(cfg: ServerConfig, tool: str, raw: Mapping[str, Any]) -> str | None:
    """Why a script may not call `tool` of `cfg`'s server (None: it may), with the setting that allows it."""
    mode = cfg.code_mode
    if mode == "all" or read_only(raw) or (isinstance(mode, list) and tool in mode):
        return None
    return (
        f"scripts may call only read-only tools of '{cfg.name}', and '{tool}' is not marked read-only; "
        f'the user can allow it with code_mode = ["{tool}"] (or "all") in [servers.{cfg.name}]'
    )


def describe(cfg: ServerConfig) -> str:
    """What `coffer show` says of a server's code mode."""
    mode = cfg.code_mode
    if mode == "all":
        return "every tool"
    if isinstance(mode, list) and mode:
        return "read-only tools and " + ", ".join(mode)
    return "read-only tools"


def definition() -> dict[str, Any]:
    """`coffer__run` as tools/list shows it (listed only where code mode is on)."""
    from coffer.codemode.checks import ALLOWED_IMPORTS

    return {
        "name": TOOL,
        "description": (
            "Run a short Python script (a sandboxed subset: no files, network or environment) that calls "
            "several tools and returns only what matters: bulk reads, filtering, multi-step work in one step. "
            "Inside: call_tool(name, arguments) returns the tool's structured content (a dict) or its text, "
            "and raises an exception you can catch when it fails; call_tools([[name, arguments], ...]) runs a "
            "batch at once (a failed one is {'error': ...} in its place); search_tools(query, top_k=5) finds "
            "tools (each says whether scripts may call it). Scripts may call read-only tools, plus those the "
            "user allowed. The last expression is the result; print() output comes back too. Imports: "
            + ", ".join(sorted(ALLOWED_IMPORTS))
            + "."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The script (Python)."}},
            "required": ["code"],
        },
        "annotations": {"readOnlyHint": False, "openWorldHint": True},
    }
