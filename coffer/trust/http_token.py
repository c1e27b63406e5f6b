"""The bearer token `coffer serve --http` requires: any local process can reach a loopback port, and the
gateway launches programs and holds credentials, so HTTP clients must present this token.

Generated once (256 bits), kept in `http-token` in the data dir, mode 0600 from its first byte, never
printed by Coffer except on request (`coffer serve --http PORT --print-token`).
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from coffer.trust import redact
from coffer.vault import paths
from coffer.vault.fsutil import atomic_write, locked


def token_path() -> Path:
    return paths.data_dir() / "http-token"


def serve_token() -> str:
    """The token, created on first use."""
    path = token_path()
    with locked(path):
        try:
            value = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            value = ""
        if not value:
            value = secrets.token_urlsafe(32)
            atomic_write(path, value + "\n", 0o600)
    redact.register(value)
    return value


def authorised(header: bytes, token: str) -> bool:
    """Does an `Authorization` header carry this token (constant-time comparison)?"""
    return hmac.compare_digest(header, f"Bearer {token}".encode())
