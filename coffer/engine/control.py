"""Asking a running engine what it holds (`coffer status`) or to stop (`coffer status --stop`)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from coffer.engine import place

TIMEOUT_S = 5.0


def _ask(message: dict[str, Any], reply: bool, registry: Path | None = None) -> dict[str, Any] | None:
    path = place.socket_path(registry)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT_S)
        try:
            sock.connect(str(path))
        except OSError:
            return None  # no engine runs for this vault
        sock.sendall(json.dumps(message).encode() + b"\n")
        return read_answer(sock) if reply else {}


def read_answer(sock: socket.socket) -> dict[str, Any] | None:
    """The engine's one-line JSON answer on `sock`; None when it is not a JSON object."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def running() -> bool:
    """Whether an engine answers on this vault's socket (without asking it anything)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(place.socket_path()))
        except OSError:
            return False
    return True


def hand_env(env: dict[str, str]) -> list[str]:
    """Hand the engine this session's values of the vault's variables (coffer.engine.daemon.adopt_env);
    the names it holds with other values. Raises OSError when the engine goes away while answering."""
    answer = _ask({"coffer": "env", "env": env}, reply=True) or {}
    return [n for n in answer.get("differs") or [] if isinstance(n, str)]


def status() -> dict[str, Any] | None:
    """The engine's pid, sessions and upstreams (pids, share mode, memory); None when none runs."""
    return _ask({"coffer": "status"}, reply=True)


def stop(registry: Path | None = None) -> bool:
    """Tell the engine of this vault (or of the vault whose coffer.toml is `registry`) to stop; its
    upstreams stop with it. False when none runs."""
    return _ask({"coffer": "stop"}, reply=False, registry=registry) is not None
