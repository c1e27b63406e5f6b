"""Profiles (`[profiles.NAME]` in coffer.toml): what one client is shown.

Parsing and TOML writing only; `coffer.vault.registry` reads and edits the file around them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coffer.errors import ConflictError, NotFoundError, RegistryError, UsageError
from coffer.vault.names import NAME_RE

if TYPE_CHECKING:  # tomlkit only where the registry is written (`coffer.vault.registry.edit`)
    from tomlkit.toml_document import TOMLDocument

PROFILE_MODES = ("all", "search")


@dataclass
class Profile:
    """What one client is shown (`[profiles.NAME]`): all tools or only the built-ins (`search`), at most
    `max_tools` of them built-ins included, from `servers` and `tools` (names or fnmatch patterns of
    exposed names; empty: all), with `pinned` tools always shown."""

    name: str
    mode: str = "all"
    max_tools: int | None = None
    servers: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)
    code_mode: bool | None = None  # coffer__run for this client; None: as `[settings] code_mode` says

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "max_tools": self.max_tools,
            "servers": list(self.servers),
            "tools": list(self.tools),
            "pinned": list(self.pinned),
            "code_mode": self.code_mode,
        }


def profile_from(name: str, raw: Any, where: str) -> Profile:
    if not NAME_RE.match(name):
        raise RegistryError(f"{where}: invalid profile name '{name}'")
    if not isinstance(raw, dict):
        raise RegistryError(f"{where}: profiles.{name} must be a table")
    mode = raw.get("mode", "all")
    if mode not in PROFILE_MODES:
        raise RegistryError(f"{where}: profiles.{name}.mode must be 'all' or 'search'")
    cap = raw.get("max_tools")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise RegistryError(f"{where}: profiles.{name}.max_tools must be a positive whole number")
    lists = {}
    for key in ("servers", "tools", "pinned"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RegistryError(f"{where}: profiles.{name}.{key} must be a list of strings")
        lists[key] = list(value)
    code_mode = raw.get("code_mode")
    if code_mode is not None and not isinstance(code_mode, bool):
        raise RegistryError(f"{where}: profiles.{name}.code_mode must be true or false")
    return Profile(name=name, mode=mode, max_tools=cap, code_mode=code_mode, **lists)


def validate_profile(profile: Profile) -> Profile:
    if not NAME_RE.match(profile.name):
        raise UsageError(f"invalid profile name '{profile.name}': use 1-20 lowercase letters, digits or '-'")
    if profile.mode not in PROFILE_MODES:
        raise UsageError(f"invalid --mode '{profile.mode}': expected all or search")
    if profile.max_tools is not None and profile.max_tools < 1:
        raise UsageError("--max-tools must be at least 1")
    return profile


def write_profile(doc: TOMLDocument, profile: Profile, replace: bool) -> None:
    """Set `[profiles.NAME]` in an open registry document."""
    import tomlkit

    if "profiles" not in doc:
        doc.add("profiles", tomlkit.table(is_super_table=True))
    profiles: Any = doc["profiles"]
    if profile.name in profiles and not replace:
        raise ConflictError(f"profile '{profile.name}' already exists (`coffer profile rm {profile.name}` first)")
    table = tomlkit.table()
    table.add("mode", profile.mode)
    if profile.max_tools is not None:
        table.add("max_tools", profile.max_tools)
    for key in ("servers", "tools", "pinned"):
        if getattr(profile, key):
            table.add(key, list(getattr(profile, key)))
    if profile.code_mode is not None:
        table.add("code_mode", profile.code_mode)
    profiles[profile.name] = table


def drop_profile(doc: TOMLDocument, name: str) -> None:
    profiles: Any = doc.get("profiles")
    if profiles is None or name not in profiles:
        raise NotFoundError(f"unknown profile '{name}' (see `coffer profile list`)")
    del profiles[name]
