"""The vault's registry: coffer.toml, edited with tomlkit so user comments and ordering survive.

Reads never write. Writes happen only inside `edit()`, which takes the lock, re-reads the file (so an
edit is never made from a stale copy), refuses to touch a file that does not parse, validates the result
and replaces the file atomically with mode 0600 (env values may hold tokens).
"""

from __future__ import annotations

import contextlib
import re
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coffer.errors import ConflictError, NotFoundError, RegistryError, did_you_mean
from coffer.vault import paths, upgrade
from coffer.vault.fsutil import atomic_write, locked

# re-exported (`registry.SEP`, `registry.Profile`, ...): the registry is where callers meet these rules
from coffer.vault.names import NAME_RE as NAME_RE
from coffer.vault.names import RESERVED_NAMES as RESERVED_NAMES
from coffer.vault.names import SEP as SEP
from coffer.vault.names import split_target as split_target
from coffer.vault.names import validate_name as validate_name
from coffer.vault.names import validate_prefix as validate_prefix
from coffer.vault.profiles import Profile as Profile
from coffer.vault.profiles import drop_profile, profile_from, validate_profile, write_profile
from coffer.vault.servers import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S
from coffer.vault.servers import SERVER_KEYS, server_from, server_table, validate_maps
from coffer.vault.servers import SHARE_MODES as SHARE_MODES
from coffer.vault.servers import ServerConfig as ServerConfig
from coffer.vault.servers import inline as inline
from coffer.vault.servers import merge_sandbox as merge_sandbox
from coffer.vault.servers import sandbox_option as sandbox_option

if TYPE_CHECKING:  # tomlkit is imported where the registry is written: reading needs only tomllib
    from tomlkit.toml_document import TOMLDocument

OFFICIAL_REGISTRY = "https://registry.modelcontextprotocol.io"  # `[registries]` when the file names none

HEADER = (
    "# Coffer registry: the MCP servers this vault serves.\n"
    "# Managed by `coffer add/remove/enable/disable`; hand edits and comments are kept.\n"
)
# what a new file starts with: the header and the layout it is written in (coffer.vault.upgrade)
NEW_FILE = f"{HEADER}\n[coffer]\nformat = {upgrade.REGISTRY_FORMAT}  # {upgrade.FORMAT_NOTE}\n"


@dataclass
class Registry:
    path: Path
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    team: dict[str, Any] = field(default_factory=dict)  # `serve --http --team`'s identity provider (coffer.trust.team)
    profiles: dict[str, Profile] = field(default_factory=dict)
    # MCP registries `coffer find` and `coffer add NAME` read (coffer.discovery): name -> base URL
    registries: dict[str, str] = field(default_factory=lambda: {"official": OFFICIAL_REGISTRY})

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(self.profiles) or "none yet: `coffer profile add NAME`"
            raise NotFoundError(f"unknown profile '{name}' (profiles: {known})") from None

    def get(self, name: str) -> ServerConfig:
        try:
            return self.servers[name]
        except KeyError:
            raise unknown_server(name, self.servers) from None

    def unknown_keys(self) -> list[str]:
        """Keys Coffer does not read in a server's table, with the key probably meant ("enbled")."""
        import difflib

        out = []
        for cfg in self.servers.values():
            for key in sorted(cfg.extra):
                guess = difflib.get_close_matches(key, sorted(SERVER_KEYS), n=1, cutoff=0.75)
                hint = f" (did you mean '{guess[0]}'?)" if guess else ""
                out.append(f"servers.{cfg.name}: unknown key '{key}' is ignored{hint}")
        return out

    def enabled_servers(self) -> list[ServerConfig]:
        return [s for s in self.servers.values() if s.enabled]


def prefix_clash(reg: Registry, cfg: ServerConfig) -> str | None:
    """Why `cfg`'s prefix cannot sit beside the other servers' (None when it can): two servers under one
    prefix, or a prefix that is another server's name (the two name spaces must stay apart)."""
    mine = cfg.exposed_prefix
    if not mine:
        return None
    for other in reg.servers.values():
        if other.name == cfg.name:
            continue
        if other.exposed_prefix == mine:
            return f"prefix '{mine}' is already used by server '{other.name}'"
    return None


# ---------------------------------------------------------------- reading


def load(path: Path | None = None) -> Registry:
    """Read the registry; a missing file is an empty vault, a broken one a `RegistryError`."""
    path = path or paths.registry_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Registry(path=path)
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
    return _build(_read(text, path), text, path)


def _read(text: str, path: Path) -> dict[str, Any]:
    """The registry's data, read with the standard library's parser (tomlkit, which keeps comments for
    edits, takes 1.3 s to read 1,000 servers; tomllib 0.05 s)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = re.search(r"\(at line (\d+), column (\d+)\)", message)
        line, col = (int(at[1]), int(at[2])) if at else (text.count("\n") + 1, 1)
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)$", "", message)
        raise RegistryError(f"{path}:{line}:{col}: invalid TOML: {reason}; fix the file by hand") from exc


def _parse(text: str, path: Path) -> TOMLDocument:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        reason = str(exc).split(" at line ")[0]
        raise RegistryError(f"{path}:{exc.line}:{exc.col}: invalid TOML: {reason}; fix the file by hand") from exc


_HEADER = re.compile(r"^[ \t]*\[\s*(servers|profiles)\s*\.\s*(\"[^\"\n]*\"|[A-Za-z0-9_-]+)\s*[\].]", re.M)


def _header_lines(text: str) -> dict[tuple[str, str], int]:
    """(table, name) -> the line of its first `[table.name]` header, for error messages; one pass."""
    lines: dict[tuple[str, str], int] = {}
    line, pos = 1, 0
    for match in _HEADER.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        lines.setdefault((match[1], match[2].strip('"')), line)
    return lines


def _build(data: dict[str, Any], text: str, path: Path) -> Registry:
    upgrade.registry_format(data, path)  # a newer Coffer's file is refused, never read as this one's
    header_lines = _header_lines(text)

    def _line_of(name: str, table: str = "servers") -> int:
        return header_lines.get((table, name), 1)

    servers_raw = data.get("servers", {})
    if not isinstance(servers_raw, dict):
        raise RegistryError(f"{path}:1: 'servers' must be a table")
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise RegistryError(f"{path}:1: 'settings' must be a table")
    team = data.get("team", {})
    if not isinstance(team, dict):
        raise RegistryError(f"{path}:1: 'team' must be a table")
    reg = Registry(path=path, settings=settings, team=team)
    registries = data.get("registries")
    if registries is not None:
        if not isinstance(registries, dict) or not all(
            isinstance(url, str) and re.match(r"^https?://[^\s/]+", url) for url in registries.values()
        ):
            raise RegistryError(f"{path}:1: 'registries' must be a table of names to http(s) URLs")
        reg.registries = {name: url.rstrip("/") for name, url in registries.items()}
    profiles_raw = data.get("profiles", {})
    if not isinstance(profiles_raw, dict):
        raise RegistryError(f"{path}:1: 'profiles' must be a table")
    for pname, praw in profiles_raw.items():
        reg.profiles[pname] = profile_from(pname, praw, f"{path}:{_line_of(pname, 'profiles')}")
    for name, raw in servers_raw.items():
        where = f"{path}:{_line_of(name)}"
        if not NAME_RE.match(name) or name in RESERVED_NAMES:
            raise RegistryError(f"{where}: invalid server name '{name}'")
        if not isinstance(raw, dict):
            raise RegistryError(f"{where}: servers.{name} must be a table")
        reg.servers[name] = server_from(name, raw, where)
    owner: dict[str, str] = {}  # prefix -> the first server under it: one pass, not prefix_clash per server
    for cfg in reg.servers.values():
        mine = cfg.exposed_prefix
        if mine and mine in owner:
            clash = f"prefix '{mine}' is already used by server '{owner[mine]}'"
            raise RegistryError(f"{path}:{_line_of(cfg.name)}: servers.{cfg.name}: {clash}")
        owner.setdefault(mine, cfg.name)
    return reg


def add_profile(profile: Profile, path: Path | None = None, replace: bool = False) -> None:
    """Write `[profiles.NAME]` (comments and the rest of the file kept)."""
    validate_profile(profile)
    with edit(path) as doc:
        write_profile(doc, profile, replace)


def remove_profile(name: str, path: Path | None = None) -> None:
    with edit(path) as doc:
        drop_profile(doc, name)


# ---------------------------------------------------------------- writing


@contextlib.contextmanager
def edit(path: Path | None = None) -> Iterator[TOMLDocument]:
    """Lock, re-read, yield the document for changes, validate, replace atomically.

    A file that does not parse is never overwritten: the user's hand edit stays for them to fix; nor is
    one a newer Coffer wrote. An older one is brought forward as it is written (coffer.vault.upgrade).
    """
    import tomlkit

    path = path or paths.registry_path()
    with locked(path):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = NEW_FILE
        doc = _parse(text, path)
        upgrade.registry_format(doc, path)
        upgrade.check_vault()
        yield doc
        # one trailing newline: removing the last table leaves the blank line that was added before it
        new_text = tomlkit.dumps(doc).rstrip("\n") + "\n"
        if new_text != text:  # a change is written in this code's format; no change writes nothing
            upgrade.stamp_registry(doc, path)
            new_text = tomlkit.dumps(doc).rstrip("\n") + "\n"
        _build(_read(new_text, path), new_text, path)  # never write what we could not read back
        if new_text != text or not path.exists():
            atomic_write(path, new_text)


def _servers_table(doc: TOMLDocument) -> Any:
    import tomlkit

    if "servers" not in doc:
        doc.add("servers", tomlkit.table(is_super_table=True))
    return doc["servers"]


def add_server(cfg: ServerConfig, path: Path | None = None, replace: bool = False) -> None:
    """Add one server (see `add_servers`); ConflictError when the name or its prefix is taken."""
    add_servers([cfg], path=path, replace=replace)


def add_servers(configs: list[ServerConfig], path: Path | None = None, replace: bool = False) -> None:
    """Add servers in one locked, atomic write: all of them or, on any error, none (a killed or failed
    import never leaves half a registry), and in linear time however many there are."""
    for cfg in configs:
        validate_name(cfg.name)
        if cfg.prefix is not None:
            validate_prefix(cfg.prefix)
        validate_maps(cfg)
    import tomlkit

    with edit(path) as doc:
        servers = _servers_table(doc)
        current = _build(doc, tomlkit.dumps(doc), path or paths.registry_path())
        for cfg in configs:
            if cfg.name in servers and not replace:
                raise ConflictError(
                    f"server '{cfg.name}' already exists: change it with `coffer edit {cfg.name}`"
                    f" (or `coffer remove {cfg.name}` first)"
                )
            current.servers[cfg.name] = cfg
            clash = prefix_clash(current, cfg)
            if clash is not None:
                raise ConflictError(f"cannot add '{cfg.name}': {clash}")
            servers[cfg.name] = server_table(cfg)


def unknown_server(name: str, names: Iterable[str]) -> NotFoundError:
    """The one error for a server name that is not in the vault, with the name probably meant."""
    return NotFoundError(f"unknown server '{name}'{did_you_mean(name, names)} (see `coffer list`)")


def set_oauth(server: str, on: bool, path: Path | None = None) -> None:
    """Mark a URL server as authorising with OAuth (found at add time, or asked for)."""
    with edit(path) as doc:
        servers = doc.get("servers")
        if servers is None or server not in servers:
            raise unknown_server(server, servers or ())
        if on:
            servers[server]["oauth"] = True
        elif "oauth" in servers[server]:
            del servers[server]["oauth"]


def set_enabled(server: str, tool: str | None, enabled: bool, path: Path | None = None) -> bool:
    """Enable or disable a server or one of its tools; returns False when it was already so."""
    with edit(path) as doc:
        servers = doc.get("servers")
        if servers is None or server not in servers:
            raise unknown_server(server, servers or ())
        table = servers[server]
        if tool is None:
            changed = bool(table.get("enabled", True)) != enabled
            table["enabled"] = enabled
            return changed
        disabled = [str(t) for t in table.get("disabled_tools", [])]
        if enabled:
            if tool not in disabled:
                return False
            disabled.remove(tool)
        else:
            if tool in disabled:
                return False
            disabled.append(tool)
        if disabled:
            table["disabled_tools"] = sorted(disabled)
        elif "disabled_tools" in table:
            del table["disabled_tools"]
        return True
