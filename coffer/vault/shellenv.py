"""The runtime variables of the user's own shell (certificates, proxies, locale, PATH), recorded for the engine.

An agent may spawn `coffer serve` with a trimmed environment (the MCP SDK's default passes HOME, PATH, SHELL
and TERM only; Gemini CLI drops every variable whose name holds CERT), and the engine that first session
starts serves every later one: without the user's certificates every uvx server fails until it is stopped.
So the commands the user runs (`coffer add`, `install`, `doctor` ...) record these variables here, and the
engine takes them over the first session's, which is only the fallback (coffer.engine.daemon).

Only the names in `RECORDED` are ever written, to a 0600 file in the data dir; a proxy URL that carries a
user name or password is left out (a secret), and that variable is then taken from the sessions as before.
Light on purpose: `coffer serve`'s front reads these names on every session's start.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from urllib.parse import urlsplit

from coffer.vault import paths

CERTIFICATES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
# what a server's runtime needs from the environment to work at all (passed on to every stdio upstream)
RUNTIME_ENV = (*CERTIFICATES, *PROXIES, "LANG", "LC_ALL")
RECORDED = (*RUNTIME_ENV, "PATH")
VERSION = 1


def path() -> Path:
    return paths.shell_env_path()


def current(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The recordable variables of `environ` (this process's by default): a proxy with credentials is left out."""
    environ = os.environ if environ is None else environ
    return {n: v for n in RECORDED if (v := environ.get(n)) is not None and v and not _has_credentials(n, v)}


def _has_credentials(name: str, value: str) -> bool:
    if name not in PROXIES or name.lower() == "no_proxy":
        return False
    try:
        parts = urlsplit(value if "://" in value else f"http://{value}")
    except ValueError:
        return True  # not a URL we can read: not known to be free of secrets
    return parts.username is not None or parts.password is not None


def record(environ: Mapping[str, str] | None = None) -> bool:
    """Record this shell's values (written only when they changed); whether the file changed. Never raises:
    a command must not fail because its side note could not be written."""
    now = current(environ)
    if recorded() == now and path().exists():
        return False
    from coffer.vault.fsutil import atomic_write

    with contextlib.suppress(OSError):
        atomic_write(path(), json.dumps({"version": VERSION, "env": now}, indent=1, sort_keys=True))
        return True
    return False


def recorded() -> dict[str, str]:
    """The values last recorded from the user's shell; empty when none were (or the file is unreadable)."""
    try:
        data = json.loads(path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    env = data.get("env") if isinstance(data, dict) else None
    if not isinstance(env, dict):
        return {}
    return {n: v for n, v in env.items() if n in RECORDED and isinstance(v, str) and not _has_credentials(n, v)}


def stamp() -> tuple[int, int] | None:
    """The recording's (mtime, size), to notice a new one cheaply; None when there is none."""
    try:
        st = path().stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def adopt(environ: MutableMapping[str, str], shell: Mapping[str, str]) -> list[str]:
    """Make `environ` (the engine's) take the shell's values: each recorded variable's value replaces
    what the session that started it had, and PATH is the shell's followed by the entries it lacks.
    Returns the names whose value changed (values are never logged)."""
    changed = []
    for name, value in shell.items():
        held = environ.get(name)
        if name == "PATH" and held is not None:
            value = path_union(value, held)
        if held != value:
            environ[name] = value
            changed.append(name)
    return sorted(changed)


def fill(environ: MutableMapping[str, str], shell: Mapping[str, str]) -> list[str]:
    """Give `environ` (a process that serves one session: `coffer serve --standalone`) the shell's values
    of the variables it lacks, and PATH the shell's entries it lacks; its own values stay. The names filled."""
    filled = []
    for name, value in shell.items():
        held = environ.get(name)
        wanted = value if held is None else path_union(held, value) if name == "PATH" else held
        if wanted != held:
            environ[name] = wanted
            filled.append(name)
    return sorted(filled)


def path_union(first: str, then: str) -> str:
    """`first`'s entries, then those of `then` it lacks."""
    have = first.split(os.pathsep)
    return os.pathsep.join([*have, *(p for p in then.split(os.pathsep) if p and p not in have)])
