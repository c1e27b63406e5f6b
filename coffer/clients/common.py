"""What every client format shares: reading and safely rewriting the file, and turning an entry into a server.

Client configs belong to other programs and sit in the user's home or project, so writes here keep the
file's own mode and owner-visible directory permissions (unlike the vault's 0600/0700 files), follow a
symlinked dotfile to its target, and refuse to replace a file that changed since it was read.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Protocol

from coffer.errors import CofferError, ConflictError, NotFoundError, UsageError
from coffer.vault.fsutil import atomic_write
from coffer.vault.masking import REF_RE
from coffer.vault.registry import NAME_RE
from coffer.vault.servers import ENV_KEY_RE, ServerConfig, validate_maps


class ClientFileError(CofferError):
    """A client's config file cannot be read or parsed; the message names file and line."""

    exit_code = 5
    code = "client_file"


@dataclass
class Converted:
    """One client entry in Coffer's terms: a config to add, or the reason it cannot be."""

    config: ServerConfig | None
    skip: str | None = None
    notes: list[str] = field(default_factory=list)


class Format(Protocol):
    """One client file format: read its server entries, add one entry, keep the rest of the file."""

    def entries(self, text: str, path: Path) -> list[tuple[str, Any]]: ...

    def convert(self, name: str, raw: Any) -> Converted: ...

    def launcher(self, command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]: ...

    def existing(self, text: str, path: Path, name: str) -> Any | None: ...

    def add(self, text: str, path: Path, name: str, entry: dict[str, Any], replace: bool) -> str: ...

    def remove(self, text: str, path: Path, name: str, where: tuple[str, ...] | None = None) -> str: ...


# ---------------------------------------------------------------- names and entries


def normalise_name(name: str) -> str:
    """A valid Coffer server name for a client's entry name, the same every time for the same input."""
    base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if base and NAME_RE.match(base):
        return base
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{base[:13].rstrip('-')}-{digest}" if base else f"server-{digest}"


def hashed_name(name: str) -> str:
    """The long form used when two entries of one file normalise to the same name."""
    base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:13].rstrip("-") or "server"
    return f"{base}-{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def launch_of(raw: Any) -> tuple[str, list[str], dict[str, str]] | None:
    """command, args and env of a client's entry, in each client's shape: mcpServers-style, Codex's TOML,
    Zed's nested command, opencode's command list, Goose's `cmd`/`envs`; None for a URL or else."""
    if not isinstance(raw, dict):
        return None
    command: Any = raw.get("command", raw.get("cmd"))
    args: Any = raw.get("args", [])
    env: Any = raw.get("env", raw.get("environment", raw.get("envs", {})))
    if isinstance(command, dict):  # Zed: "command": {"path": ..., "args": [...], "env": {...}}
        command, args, env = command.get("path"), command.get("args", []), command.get("env", {})
    if isinstance(command, list) and command:  # opencode: "command": ["coffer", "serve"]
        command, args = command[0], command[1:]
    if not isinstance(command, str) or not isinstance(args, list):
        return None
    return command, [str(a) for a in args], env if isinstance(env, dict) else {}


def is_coffer_serve(command: str | None, args: list[str]) -> bool:
    """True for `coffer serve`, `/x/bin/coffer serve`, `python -m coffer serve`, `uvx coffer serve` ..."""
    if not command:
        return False
    argv = [command, *args]
    for i, token in enumerate(argv):
        stem = PurePath(token.replace("\\", "/")).name.lower().removesuffix(".exe")
        is_module = i > 0 and argv[i - 1] == "-m" and token == "coffer"
        if (stem == "coffer" or is_module) and "serve" in argv[i + 1 :]:
            return True
    return False


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _str_list(raw: Any, key: str) -> list[str]:
    value = raw.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list) or any(_scalar(v) is None for v in value):
        raise ValueError(f"'{key}' is not a list of strings")
    return [str(_scalar(v)) for v in value]


def _str_map(raw: Any, key: str) -> dict[str, str]:
    value = raw.get(key, {})
    if value is None:
        return {}
    if not isinstance(value, dict) or any(_scalar(v) is None for v in value.values()):
        raise ValueError(f"'{key}' is not a map of strings")
    return {str(k): str(_scalar(v)) for k, v in value.items()}


def convert(raw: Any) -> Converted:
    """An mcpServers-shaped entry (command/args/env/cwd or url/headers, optional type) as a ServerConfig."""
    if not isinstance(raw, dict):
        return Converted(None, "entry is not an object")
    kind = raw.get("type")
    if kind == "sse":
        return Converted(None, "SSE transport is not supported (Coffer speaks stdio and streamable HTTP)")
    command, url = raw.get("command"), raw.get("url")
    if command and url:
        return Converted(None, "has both 'command' and 'url'")
    if not command and not url:
        return Converted(None, "has neither 'command' nor 'url'")
    if not isinstance(command or url, str) or not isinstance(raw.get("cwd", ""), str | None):
        return Converted(None, "'command', 'url' and 'cwd' must be strings")
    try:
        args = _str_list(raw, "args")
        env = _str_map(raw, "env")
        headers = _str_map(raw, "headers")
    except ValueError as exc:
        return Converted(None, str(exc))
    if is_coffer_serve(command, args):
        return Converted(None, "launches `coffer serve` itself")
    enabled = raw.get("disabled") is not True and raw.get("enabled") is not False
    cfg = ServerConfig(
        name="imported",
        command=command or None,
        args=args if command else [],
        env=env,
        cwd=raw.get("cwd") or None,
        url=url or None,
        headers=headers if url else {},
        enabled=enabled,
    )
    try:
        validate_maps(cfg)  # the registry's own rules, so a dry run predicts the real import
    except UsageError as exc:
        return Converted(None, str(exc))
    notes: list[str] = [] if enabled else ["disabled in the client, imported disabled"]
    unusable = sorted(
        {
            ref
            for value in [*env.values(), *headers.values()]
            for ref in REF_RE.findall(value)
            if not ENV_KEY_RE.match(ref) and not ref.startswith("secret:")
        }
    )
    if unusable:
        cfg.enabled = False
        refs = ", ".join(f"${{{r}}}" for r in unusable)
        notes.append(f"imported disabled: {refs} has no Coffer equivalent; edit coffer.toml, then `coffer enable`")
    if any("${" in v for v in [command or "", url or "", *args]):
        notes.append("'${...}' in command, args or url is passed as written, not expanded")
    return Converted(cfg, None, notes)


# ---------------------------------------------------------------- files


MAX_CLIENT_FILE = 8 * 1024 * 1024  # client configs are kilobytes; a bigger one is not one to import


def read_text(path: Path) -> str:
    """The file as text with its own line endings (bytes decoded, not newline-translated).

    Only a regular file of at most `MAX_CLIENT_FILE` bytes is read (`/dev/zero` or a 100 MB file is
    refused with one line, before anything is read into memory or the vault)."""
    import stat as _stat

    try:
        info = path.stat()
    except FileNotFoundError:
        raise NotFoundError(f"{path}: no such file (pass --path FILE)") from None
    except OSError as exc:
        raise ClientFileError(f"{path}: cannot read: {exc.strerror}") from exc
    if _stat.S_ISDIR(info.st_mode):
        raise ClientFileError(f"{path}: is a directory, not a config file")
    if not _stat.S_ISREG(info.st_mode):
        raise ClientFileError(f"{path}: not a regular file (a device or pipe is not a client config)")
    if info.st_size > MAX_CLIENT_FILE:
        raise ClientFileError(
            f"{path}: {info.st_size // (1024 * 1024)} MB is too big for a client config (limit 8 MB); nothing read"
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFoundError(f"{path}: no such file (pass --path FILE)") from None
    except IsADirectoryError:
        raise ClientFileError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise ClientFileError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ClientFileError(f"{path}:{line}: not UTF-8 text") from None


def backup(path: Path) -> Path:
    """Copy the file beside itself as FILE.coffer-backup-<timestamp> (mode and mtime kept)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.coffer-backup-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.coffer-backup-{stamp}-{n}")
    shutil.copy2(path, target)
    return target


def replace_file(path: Path, text: str, expected: str | None) -> None:
    """Write atomically with the file's original mode; refuse if it changed since it was read as `expected`."""
    if path.is_symlink() and not path.exists():
        raise ClientFileError(f"{path}: a symlink to a file that does not exist; nothing written")
    real = path.resolve() if path.is_symlink() else path
    try:
        current: str | None = real.read_bytes().decode("utf-8")
        mode = real.stat().st_mode & 0o7777
    except FileNotFoundError:
        current, mode = None, 0o600
    if current != expected:
        raise ConflictError(f"{path}: changed while coffer was editing it; nothing written, run the command again")
    real.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(real, text, mode, private_parent=False)
