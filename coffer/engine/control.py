"""Asking a running engine what it holds (`coffer status`), to stop (`coffer status --stop`), or to take a
session's values of the variables its servers need and tell where its own differ (`handed_env`, `check_env`)."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coffer.engine import place
from coffer.errors import CofferError

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
    return [n for n in exchange_env(env).get("differs") or [] if isinstance(n, str)]


def exchange_env(env: dict[str, str]) -> dict[str, Any]:
    """The engine's whole answer to this session's values: `differs` (the names it holds with other
    values), `shell` (those it took now from the user's shell's recording), `from_shell` (of `differs`,
    those whose value is the shell's). Raises OSError when the engine goes away while answering."""
    return _ask({"coffer": "env", "env": env}, reply=True) or {}


def status() -> dict[str, Any] | None:
    """The engine's pid, sessions and upstreams (pids, share mode, memory); None when none runs."""
    return _ask({"coffer": "status"}, reply=True)


def stop(registry: Path | None = None) -> bool:
    """Tell the engine of this vault (or of the vault whose coffer.toml is `registry`) to stop; its
    upstreams stop with it. False when none runs."""
    return _ask({"coffer": "stop"}, reply=False, registry=registry) is not None


def check_env() -> dict[str, list[str]] | None:
    """For `coffer doctor`, which runs servers in its own process: hand a running engine this shell's
    values (it takes those this shell's `coffer` commands recorded, and adopts what it lacks, as from a
    session) and read what it says of its own (`exchange_env`): the names it took from the user's shell
    now, and those it holds with other values (`env_note` words them); None when no engine runs (or it
    went away). Never raises: a check beside the command's own work."""
    try:
        answer = _ask({"coffer": "env", "env": handed_env()}, reply=True)
    except OSError:
        return None
    if answer is None:
        return None
    return {k: [n for n in answer.get(k) or [] if isinstance(n, str)] for k in ("shell", "differs", "from_shell")}


def env_note(answer: dict[str, list[str]]) -> str | None:
    """What an engine's answer to this shell's values says: the variables it took now from this shell (it
    lacked them or had others: its servers that failed start again, those running keep theirs until they
    restart), and those it holds with other values (a `${VAR}` a session gave first)."""
    took, names = answer.get("shell") or [], answer.get("differs") or []
    lines = []
    if took:
        lines.append(
            f"note: the engine behind `coffer serve` lacked or had other values for {', '.join(took)} than this "
            "shell (an agent started it with its own environment): it uses this shell's from now on, and its "
            "servers that were down start again; those running keep theirs until `coffer status --stop`"
        )
    if names:
        lines.append(
            f"note: the engine behind `coffer serve` has other values for {', '.join(names)} than this shell, and "
            "its servers use its own: where they fail and this command's work, `coffer status --stop` restarts it"
        )
    return "\n".join(lines) or None


def handed_env() -> dict[str, str]:
    """What this session hands the engine: the values it has of the variables the vault's servers
    reference (`${VAR}` in env and headers), of those a server's runtime needs (certificates, proxies,
    locale, PATH: `shellenv.RECORDED`) and of those the engine reads at its start (`STARTUP_ENV`).
    Sent over the 0600 socket to the user's own engine; never logged. Light: no SDK is imported."""
    from coffer.errors import CofferError
    from coffer.vault import registry, shellenv

    names = {*place.STARTUP_ENV, *shellenv.RECORDED}
    try:
        reg = registry.load()
    except CofferError:
        reg = None
    for cfg in reg.servers.values() if reg is not None else ():
        for value in (*cfg.env.values(), *cfg.headers.values()):
            names.update(n for n in _REF.findall(value) if not n.startswith(("secret:", "member:")))
    return {name: os.environ[name] for name in sorted(names) if name in os.environ}


_REF = re.compile(r"\$\{([^}]+)\}")


def differs_line(said: dict[str, Any]) -> str:
    """What a session is told of the variables the engine holds with other values than its own: those that
    are the user's shell's (as `coffer` commands recorded them) stay; the rest are the first session's."""
    differs = [n for n in said.get("differs") or () if isinstance(n, str)]
    shell = [n for n in said.get("from_shell") or () if n in differs]
    other = [n for n in differs if n not in shell]
    line = ""
    if shell:
        line += (
            f"coffer: the engine's servers use your shell's {', '.join(shell)} (as `coffer` commands run there "
            "recorded them), not this session's\n"
        )
    if other:
        line += (
            f"coffer: the running engine has other values for {', '.join(other)} than this session: its servers "
            "use the engine's; `coffer status --stop` (then start the session again) to use this one's\n"
        )
    return line


def reach(env: dict[str, str], hello: Callable[[socket.socket], None]) -> tuple[socket.socket, dict[str, Any]]:
    """A connection to the engine (started first when none answers), the session's variables handed over
    (`exchange_env`: what the engine said of them) and `hello` sent on it. An engine killed a moment ago
    may still take a connection as it goes: then the next one is tried."""
    deadline = time.monotonic() + place.START_WAIT_S
    while True:
        sock = place.attach()
        try:
            said = exchange_env(env)  # on a connection of its own: a session's stream is the host's alone
            hello(sock)
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise CofferError("the engine kept going away as it was reached") from None
            time.sleep(0.05)
            continue
        return sock, said
