"""Named secrets for `${secret:NAME}` references: the OS keyring when one exists, else a 0600 file.

`secrets.json` in the data dir is the index of names (and, without a keyring, the values too). The
keyring cannot list its entries, so the index is what `coffer secret list` shows and what `resolve`
trusts: a name not in it is unset, and an unset reference is an error, never passed on literally.
Every resolved value is registered with `coffer.trust.redact`, so it is scrubbed from anything Coffer writes.

`COFFER_SECRETS_BACKEND=file|keyring|auto` overrides the choice (default auto: keyring only when a real
backend is present, never keyring's fail/null backends).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coffer.errors import NotFoundError, SecretError, UsageError
from coffer.trust import redact
from coffer.vault import paths, upgrade
from coffer.vault.fsutil import atomic_write, locked

ENV_BACKEND = "COFFER_SECRETS_BACKEND"
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
FILE_VERSION = upgrade.JSON_VERSIONS["secrets.json"]


@dataclass(frozen=True)
class SecretInfo:
    name: str
    store: str  # "keyring" or "file"


def secrets_path() -> Path:
    return paths.data_dir() / "secrets.json"


def service_name() -> str:
    """Keyring service: one per vault, so a COFFER_HOME vault never reads the user's real secrets."""
    home = os.environ.get(paths.ENV_HOME)
    return f"coffer:{Path(home).expanduser().resolve()}" if home else "coffer"


def validate_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise UsageError(
            f"invalid secret name '{name}': use letters, digits, '_', '-' or '.', starting with a letter or '_'"
        )
    return name


def keyring_backend() -> Any | None:
    """The keyring backend to use, or None for the file store."""
    choice = os.environ.get(ENV_BACKEND, "auto").strip().lower() or "auto"
    if choice not in ("auto", "file", "keyring"):
        raise UsageError(f"{ENV_BACKEND} must be auto, file or keyring, not '{choice}'")
    if choice == "file":
        return None
    try:
        import keyring
        from keyring.backends import chainer, fail, null

        kr = keyring.get_keyring()
    except Exception as exc:  # a broken keyring install must not take secrets down with it
        if choice == "keyring":
            raise SecretError(f"the OS keyring is unavailable: {type(exc).__name__}") from exc
        return None
    real = not isinstance(kr, fail.Keyring | null.Keyring) and getattr(kr, "priority", 0) > 0
    if isinstance(kr, chainer.ChainerBackend):
        real = bool(kr.backends)
    if not real:
        if choice == "keyring":
            raise SecretError(f"{ENV_BACKEND}=keyring but no OS keyring backend is available")
        return None
    return kr


# ---------------------------------------------------------------- the index file


def _load(path: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SecretError(f"{path}: unreadable secrets file ({type(exc).__name__}); fix or remove it") from None
    upgrade.check_json(data, path, "secrets.json")
    entries = data.get("secrets") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise SecretError(f"{path}: not a Coffer secrets file")
    return {k: v for k, v in entries.items() if isinstance(v, dict)}


def _save(path: Path, entries: dict[str, dict[str, str]]) -> None:
    upgrade.check_vault()
    body = {"version": FILE_VERSION, "secrets": dict(sorted(entries.items()))}
    atomic_write(path, json.dumps(body, indent=1) + "\n", mode=0o600)


# ---------------------------------------------------------------- public API


def set_secret(name: str, value: str) -> str:
    """Store `value` under `name`; returns where it went ("keyring" or "file")."""
    validate_name(name)
    if not value:
        raise UsageError("empty secret value")
    if "\0" in value:
        raise UsageError("a secret value cannot contain NUL bytes")
    redact.register(value)
    path = secrets_path()
    kr = keyring_backend()
    with locked(path):
        entries = _load(path)
        if kr is not None:
            try:
                kr.set_password(service_name(), name, value)
            except Exception as exc:
                raise SecretError(
                    f"the OS keyring refused to store '{name}' ({type(exc).__name__}); "
                    f"set {ENV_BACKEND}=file to use the vault's 0600 file instead"
                ) from None
            entries[name] = {"store": "keyring"}
        else:
            entries[name] = {"store": "file", "value": value}
        _save(path, entries)
    return entries[name]["store"]


def remove_secret(name: str) -> None:
    validate_name(name)
    path = secrets_path()
    with locked(path):
        entries = _load(path)
        entry = entries.pop(name, None)
        if entry is None:
            raise NotFoundError(f"no secret named '{name}' (see `coffer secret list`)")
        if entry.get("store") == "keyring":
            kr = keyring_backend()
            if kr is not None:
                # Already gone from the keyring is fine: the index entry is what made it exist.
                with contextlib.suppress(Exception):
                    kr.delete_password(service_name(), name)
        _save(path, entries)


def list_secrets() -> list[SecretInfo]:
    """Names and where each lives; never values."""
    return [SecretInfo(name, str(e.get("store", "file"))) for name, e in sorted(_load(secrets_path()).items())]


def resolve(name: str) -> str:
    """The value of `${secret:NAME}`.

    Raises `SecretError` when the name is not set (or the keyring lost it), so nothing is ever launched
    with a literal `${secret:NAME}` or an empty value in its place.
    """
    if not NAME_RE.match(name):
        raise SecretError(f"invalid secret reference '${{secret:{name}}}'")
    entry = _load(secrets_path()).get(name)
    if entry is None:
        raise SecretError(f"secret '{name}' is not set: run `coffer secret set {name}`")
    if entry.get("store") == "keyring":
        kr = keyring_backend()
        value = None
        if kr is not None:
            try:
                value = kr.get_password(service_name(), name)
            except Exception as exc:
                raise SecretError(f"secret '{name}': the OS keyring failed ({type(exc).__name__})") from None
        if value is None:
            raise SecretError(f"secret '{name}' is missing from the OS keyring: run `coffer secret set {name}`")
    else:
        value = entry.get("value")
        if not isinstance(value, str) or not value:
            raise SecretError(f"secret '{name}' has no value: run `coffer secret set {name}`")
    redact.register(value)
    return value
