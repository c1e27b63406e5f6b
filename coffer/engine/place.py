"""Where a vault's engine listens: a Unix socket in the user's runtime directory, one per vault.

The path is short on purpose (a Unix socket path has about 107 bytes): the runtime directory
(`$XDG_RUNTIME_DIR/coffer`, else `/tmp/coffer-<uid>`, made 0700 and refused when another user owns
it) and a name derived from the vault's registry path, so each `COFFER_HOME` has its own engine.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from coffer.errors import CofferError
from coffer.vault import paths

IDLE_ENV = "COFFER_ENGINE_IDLE"
DEFAULT_IDLE_S = 600.0


def runtime_dir() -> Path:
    """The private directory for sockets and locks. Raises CofferError when it is not ours."""
    return paths.owned_private_dir(paths.runtime_root())


def vault_key(registry: Path | None = None) -> str:
    """One engine per vault: a short digest of the registry's real path (this process's vault by default)."""
    return hashlib.sha256(str((registry or paths.registry_path()).resolve()).encode()).hexdigest()[:16]


def socket_path(registry: Path | None = None) -> Path:
    return runtime_dir() / f"engine-{vault_key(registry)}.sock"


def lock_path() -> Path:
    """One lock for starting any of this user's engines: starts are rare and short, and one file per
    vault would be left behind for every vault that ever had an engine."""
    return runtime_dir() / "engine-start.lock"


def log_path() -> Path:
    """The engine's stderr (its own warnings and its upstreams' are on the upstreams' own tails)."""
    return paths.data_dir() / "engine.log"


def idle_seconds() -> float:
    """`COFFER_ENGINE_IDLE`: seconds without a session before the engine exits (default 600)."""
    raw = os.environ.get(IDLE_ENV)
    try:
        value = float(raw) if raw else DEFAULT_IDLE_S
    except ValueError:
        raise CofferError(f"{IDLE_ENV} must be a number of seconds, not {raw!r}") from None
    if value < 0:
        raise CofferError(f"{IDLE_ENV} must be a number of seconds >= 0, not {raw!r}")
    return value


# Variables the engine reads once, at its start (telemetry): a later session's value cannot take effect
# without a new engine, so the engine never adopts them from a session (coffer.engine.daemon.adopt_env).
STARTUP_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED")
