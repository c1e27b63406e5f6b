"""A team member's own secrets, for `${member:NAME}` in a per-member server's env and headers
(`share = "member"`, coffer.gateway.pool): a member's GitHub token runs that member's GitHub server, and
no one else's.

A member sets them through the team gateway with its own access token (`PUT /member/secrets/NAME`,
coffer.gateway.http): the vault's owner never sees them and cannot set them for a member. Each member's
are one 0600 file, `<data dir>/members/<hash of sub>.json` (the folder 0700), named by a hash so a
directory listing does not list the team. Every value read is registered with `coffer.trust.redact`.
A member without the secret a server needs gets one line saying which and where to set it; it never
falls back to the owner's. The same file keeps the member's OAuth grants to per-member HTTP servers
(`oauth`: tokens and client registration per server, coffer.trust.oauth_store), which the member gives
in the members' console and never sees listed among its secrets.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from coffer.errors import SecretError, UsageError
from coffer.trust import redact
from coffer.trust.secrets import validate_name
from coffer.vault import paths, upgrade
from coffer.vault.fsutil import atomic_write, locked

FILE_VERSION = upgrade.JSON_VERSIONS["members"]
MAX_VALUE = 16 * 1024  # a token or a key, not a file
ROUTE = "/member/secrets"  # where a member sets them on the team gateway


def path_of(sub: str) -> Path:
    return paths.data_dir() / "members" / f"{hashlib.sha256(sub.encode()).hexdigest()[:32]}.json"


def _read(sub: str) -> dict[str, dict[str, str]]:
    """The member's file: its `secrets`, and its `oauth` grants (server.what -> JSON)."""
    path = path_of(sub)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"secrets": {}, "oauth": {}}
    except (OSError, ValueError) as exc:
        raise SecretError(f"{path}: unreadable member secrets ({type(exc).__name__})") from None
    upgrade.check_json(data, path, "members")
    values = data.get("secrets") if isinstance(data, dict) and data.get("sub") == sub else None
    if not isinstance(values, dict):
        raise SecretError(f"{path}: not this member's secrets file")
    grants = data.get("oauth") if isinstance(data.get("oauth"), dict) else {}
    return {
        part: {k: v for k, v in held.items() if isinstance(k, str) and isinstance(v, str)}
        for part, held in (("secrets", values), ("oauth", grants))
    }


def _load(sub: str) -> dict[str, str]:
    return _read(sub)["secrets"]


def _save(sub: str, held: dict[str, dict[str, str]]) -> None:
    """Write the member's whole file (`_read`'s shape): its secrets and its grants."""
    upgrade.check_vault()
    body = {"version": FILE_VERSION, "sub": sub, "secrets": dict(sorted(held["secrets"].items()))}
    if held["oauth"]:
        body["oauth"] = dict(sorted(held["oauth"].items()))
    atomic_write(path_of(sub), json.dumps(body, indent=1) + "\n", mode=0o600)


def grant(sub: str, key: str) -> str | None:
    """The member's OAuth grant part `key` (`SERVER.tokens`, `SERVER.client`), as JSON; None without one."""
    return _read(sub)["oauth"].get(key)


def set_grant(sub: str, key: str, value: str | None) -> None:
    """Keep (or with None drop) the member's OAuth grant part `key`."""
    with locked(path_of(sub)):
        held = _read(sub)
        if value is None:
            held["oauth"].pop(key, None)
        else:
            held["oauth"][key] = value
        _save(sub, held)


def put(sub: str, name: str, value: str) -> None:
    """Set the member's secret `name`; UsageError for a bad name or value."""
    validate_name(name)
    if not value or len(value) > MAX_VALUE or "\0" in value:
        raise UsageError(f"a member secret is 1 to {MAX_VALUE} characters, without NUL")
    redact.register(value)
    with locked(path_of(sub)):
        held = _read(sub)
        held["secrets"][name] = value
        _save(sub, held)


def remove(sub: str, name: str) -> bool:
    """Drop the member's secret `name`; False when it had none."""
    validate_name(name)
    with locked(path_of(sub)):
        held = _read(sub)
        if held["secrets"].pop(name, None) is None:
            return False
        _save(sub, held)
    return True


def names(sub: str) -> list[str]:
    """The names of the member's secrets (never their values)."""
    return sorted(_load(sub))


def resolve(sub: str, name: str, what: str) -> str:
    """The member's secret `name`; SecretError saying where to set it when it has none."""
    value = _load(sub).get(name)
    if value is None:
        raise SecretError(
            f"{what}: ${{member:{name}}} is not set for member '{sub}' "
            f"(the member sets it: PUT {ROUTE}/{name} on the team gateway, with its own token)"
        )
    redact.register(value)
    return value
