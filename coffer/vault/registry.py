"""The vault's registry: coffer.toml, edited with tomlkit so user comments and ordering survive.

Reads never write. Writes happen only inside `edit()`, which takes the lock, re-reads the file (so an
edit is never made from a stale copy), refuses to touch a file that does not parse, validates the result
and replaces the file atomically with mode 0600 (env values may hold tokens).
"""

from __future__ import annotations

import contextlib
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coffer.errors import ConflictError, NotFoundError, RegistryError, UsageError
from coffer.vault import paths
from coffer.vault.fsutil import atomic_write, locked
from coffer.vault.masking import mask_args, mask_url, mask_value

# re-exported (`registry.SEP`, `registry.Profile`, ...): the registry is where callers meet these rules
from coffer.vault.names import NAME_RE as NAME_RE
from coffer.vault.names import RESERVED_NAMES as RESERVED_NAMES
from coffer.vault.names import SEP as SEP
from coffer.vault.names import split_target as split_target
from coffer.vault.names import validate_name as validate_name
from coffer.vault.names import validate_prefix as validate_prefix
from coffer.vault.profiles import Profile as Profile
from coffer.vault.profiles import drop_profile, profile_from, validate_profile, write_profile

if TYPE_CHECKING:  # tomlkit is imported where the registry is written: reading needs only tomllib
    from tomlkit.toml_document import TOMLDocument

ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_TIMEOUT_S = 60.0
SHARE_MODES = ("auto", "shared", "session")  # coffer.gateway.share
HEADER = (
    "# Coffer registry: the MCP servers this vault serves.\n"
    "# Managed by `coffer add/remove/enable/disable`; hand edits and comments are kept.\n"
)
SERVER_KEYS = {
    *("command", "args", "env", "cwd", "url", "headers", "enabled", "disabled_tools", "timeout", "prefix", "oauth"),
    "share",
    "max_result_tokens",
}


@dataclass
class ServerConfig:
    """One upstream server as the registry describes it (values unexpanded)."""

    name: str
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    disabled_tools: list[str] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT_S
    prefix: str | None = None  # None: the server name; "": tools and prompts exposed bare
    oauth: bool = False  # an HTTP server that authorises with OAuth (tokens in the secret store, `coffer auth`)
    share: str = "auto"  # under the engine: one process for all sessions or one each (coffer.gateway.share)
    max_result_tokens: int | None = None  # its results' cap, below [settings] result_max_tokens (bigresults)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def exposed_prefix(self) -> str:
        """What goes before `__` in this server's exposed tool and prompt names ("" for none)."""
        return self.name if self.prefix is None else self.prefix

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def launch_line(self, masked: bool = True) -> str:
        """The command a user would recognise; never env values, and secret-looking arguments masked."""
        if self.url:
            return mask_url(self.url) if masked else self.url
        import shlex

        return shlex.join([self.command or "", *(mask_args(self.args) if masked else self.args)])

    def to_dict(self, mask: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "transport": self.transport,
            "enabled": self.enabled,
            "timeout": self.timeout,
            "disabled_tools": list(self.disabled_tools),
        }
        if self.prefix is not None:
            out["prefix"] = self.prefix
        if self.oauth:
            out["oauth"] = True
        if self.share != "auto":
            out["share"] = self.share
        if self.max_result_tokens is not None:
            out["max_result_tokens"] = self.max_result_tokens
        if self.url:
            out["url"] = mask_url(self.url) if mask else self.url
            out["headers"] = {k: mask_value(v) if mask else v for k, v in self.headers.items()}
        else:
            out["command"] = self.command
            out["args"] = mask_args(self.args) if mask else list(self.args)
            out["cwd"] = self.cwd
        out["env"] = {k: mask_value(v) if mask else v for k, v in self.env.items()}
        return out


@dataclass
class Registry:
    path: Path
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    profiles: dict[str, Profile] = field(default_factory=dict)

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
            raise NotFoundError(f"unknown server '{name}' (see `coffer list`)") from None

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
    header_lines = _header_lines(text)

    def _line_of(name: str, table: str = "servers") -> int:
        return header_lines.get((table, name), 1)

    servers_raw = data.get("servers", {})
    if not isinstance(servers_raw, dict):
        raise RegistryError(f"{path}:1: 'servers' must be a table")
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise RegistryError(f"{path}:1: 'settings' must be a table")
    reg = Registry(path=path, settings=settings)
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
        reg.servers[name] = _server_from(name, raw, where)
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


def _server_from(name: str, raw: dict[str, Any], where: str) -> ServerConfig:
    def want(key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        value = raw.get(key, default)
        if value is not default and not isinstance(value, kind):
            raise RegistryError(f"{where}: servers.{name}.{key} has the wrong type")
        return value

    def str_list(key: str) -> list[str]:
        value = want(key, list, [])
        if not all(isinstance(v, str) for v in value):
            raise RegistryError(f"{where}: servers.{name}.{key} must be a list of strings")
        return list(value)

    def str_map(key: str) -> dict[str, str]:
        value = want(key, dict, {})
        if not all(isinstance(v, str) for v in value.values()):
            raise RegistryError(f"{where}: servers.{name}.{key} values must be strings")
        return dict(value)

    command = want("command", str, None)
    url = want("url", str, None)
    if bool(command) == bool(url):
        raise RegistryError(f"{where}: servers.{name} needs exactly one of 'command' or 'url'")
    timeout = want("timeout", (int, float), DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or timeout <= 0:
        raise RegistryError(f"{where}: servers.{name}.timeout must be a positive number of seconds")
    enabled = want("enabled", bool, True)
    prefix = want("prefix", str, None)
    oauth = want("oauth", bool, False)
    if oauth and not url:
        raise RegistryError(f"{where}: servers.{name}.oauth applies only to a 'url' server")
    cap = want("max_result_tokens", int, None)
    if cap is not None and (isinstance(cap, bool) or cap < 1):
        raise RegistryError(f"{where}: servers.{name}.max_result_tokens must be a positive number of tokens")
    share = want("share", str, "auto")
    if share not in SHARE_MODES:
        raise RegistryError(f"{where}: servers.{name}.share must be one of {', '.join(SHARE_MODES)}, not '{share}'")
    if prefix is not None and ((prefix and not NAME_RE.match(prefix)) or prefix in RESERVED_NAMES):
        raise RegistryError(f"{where}: servers.{name}.prefix '{prefix}' is invalid (use '' or a name like a server's)")
    return ServerConfig(
        name=name,
        command=command,
        args=str_list("args"),
        env=str_map("env"),
        cwd=want("cwd", str, None),
        url=url,
        headers=str_map("headers"),
        enabled=enabled,
        disabled_tools=str_list("disabled_tools"),
        timeout=float(timeout),
        prefix=prefix,
        oauth=oauth,
        share=share,
        max_result_tokens=cap,
        extra={k: v for k, v in raw.items() if k not in SERVER_KEYS},
    )


# ---------------------------------------------------------------- writing


@contextlib.contextmanager
def edit(path: Path | None = None) -> Iterator[TOMLDocument]:
    """Lock, re-read, yield the document for changes, validate, replace atomically.

    A file that does not parse is never overwritten: the user's hand edit stays for them to fix.
    """
    import tomlkit

    path = path or paths.registry_path()
    with locked(path):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = HEADER
        doc = _parse(text, path)
        yield doc
        # one trailing newline: removing the last table leaves the blank line that was added before it
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
        _validate_maps(cfg)
    import tomlkit

    with edit(path) as doc:
        servers = _servers_table(doc)
        current = _build(doc, tomlkit.dumps(doc), path or paths.registry_path())
        for cfg in configs:
            if cfg.name in servers and not replace:
                raise ConflictError(f"server '{cfg.name}' already exists (use `coffer remove {cfg.name}` first)")
            current.servers[cfg.name] = cfg
            clash = prefix_clash(current, cfg)
            if clash is not None:
                raise ConflictError(f"cannot add '{cfg.name}': {clash}")
            servers[cfg.name] = _server_table(cfg)


def _server_table(cfg: ServerConfig) -> Any:
    import tomlkit

    table = tomlkit.table()
    if cfg.url:
        table.add("url", cfg.url)
        if cfg.headers:
            table.add("headers", _inline(cfg.headers))
    else:
        table.add("command", cfg.command)
        table.add("args", cfg.args)
        if cfg.cwd:
            table.add("cwd", cfg.cwd)
    if cfg.env:
        table.add("env", _inline(cfg.env))
    table.add("enabled", cfg.enabled)
    if cfg.disabled_tools:
        table.add("disabled_tools", sorted(cfg.disabled_tools))
    if cfg.timeout != DEFAULT_TIMEOUT_S:
        table.add("timeout", cfg.timeout)
    if cfg.prefix is not None:
        table.add("prefix", cfg.prefix)
    if cfg.oauth:
        table.add("oauth", True)
    if cfg.share != "auto":
        table.add("share", cfg.share)
    if cfg.max_result_tokens is not None:
        table.add("max_result_tokens", cfg.max_result_tokens)
    return table


def _inline(values: Mapping[str, str]) -> Any:
    import tomlkit

    table = tomlkit.inline_table()
    table.update(values)
    return table


def _validate_maps(cfg: ServerConfig) -> None:
    for key in cfg.env:
        if not ENV_KEY_RE.match(key):
            raise UsageError(f"invalid environment variable name '{key}'")
    for key in cfg.headers:
        if not re.match(r"^[A-Za-z0-9-]+$", key):
            raise UsageError(f"invalid header name '{key}'")
    if not cfg.url and not cfg.command:
        raise UsageError("a server needs a command (after --) or --url")
    if cfg.url and not re.match(r"^https?://", cfg.url):
        raise UsageError(f"invalid url '{cfg.url}': expected http:// or https://")


def set_oauth(server: str, on: bool, path: Path | None = None) -> None:
    """Mark a URL server as authorising with OAuth (found at add time, or asked for)."""
    with edit(path) as doc:
        servers = doc.get("servers")
        if servers is None or server not in servers:
            raise NotFoundError(f"unknown server '{server}' (see `coffer list`)")
        if on:
            servers[server]["oauth"] = True
        elif "oauth" in servers[server]:
            del servers[server]["oauth"]


def set_enabled(server: str, tool: str | None, enabled: bool, path: Path | None = None) -> bool:
    """Enable or disable a server or one of its tools; returns False when it was already so."""
    with edit(path) as doc:
        servers = doc.get("servers")
        if servers is None or server not in servers:
            raise NotFoundError(f"unknown server '{server}' (see `coffer list`)")
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
