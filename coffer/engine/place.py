"""Where a vault's engine listens (a Unix socket in the user's runtime directory, one per vault), and
reaching it: `attach` connects, starting the engine first when none answers.

The path is short on purpose (a Unix socket path has about 107 bytes): the runtime directory
(`$XDG_RUNTIME_DIR/coffer`, else `/tmp/coffer-<uid>`, made 0700 and refused when another user owns
it) and a name derived from the vault's registry path, so each `COFFER_HOME` has its own engine.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from coffer.errors import CofferError
from coffer.vault import paths

IDLE_ENV = "COFFER_ENGINE_IDLE"
DEFAULT_IDLE_S = 600.0
START_WAIT_S = 20.0


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


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _spawn() -> subprocess.Popen[bytes]:
    """The engine, detached: its own session (a host's Ctrl-C or hang-up does not reach it)."""
    from coffer.vault import paths

    log = log_path()
    paths.ensure_private_dir(log.parent)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "coffer.engine.daemon"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)


def attach() -> socket.socket:
    """A connection to this vault's engine, started first when none is running.

    Raises CofferError (with the engine log's last line) when it cannot be started.
    """
    from filelock import FileLock

    path = socket_path()
    sock = _connect(path)
    if sock is not None:
        return sock
    with FileLock(str(lock_path())):
        sock = _connect(path)
        if sock is not None:
            return sock
        proc = _spawn()  # it forks the engine off and exits at once (the engine is nobody's child)
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            sock = _connect(path)
            if sock is not None:
                proc.wait()
                return sock
            if proc.poll() not in (None, 0):
                break
            time.sleep(0.02)
    raise CofferError(f"the engine did not start: {_last_line(log_path())} (see {log_path()})")


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        if lines:
            return lines[-1][:300]
    return "no error was logged"
