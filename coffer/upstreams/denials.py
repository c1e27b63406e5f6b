"""A denial that says what was denied and the one command that grants it.

Under confinement a hidden path reads as ENOENT (bubblewrap) or EACCES (Landlock), a read-only one as
EROFS, a refused port as EACCES, a refused host as the proxy's 403: to the server and its user these
look like any other failure. Here an error's text is read against what the server's last start could
read, write and reach (coffer.upstreams.sandbox.Start), and the one `coffer edit` that grants it is
named, in the server's last error (`coffer status`, `add`, the console) and in a failed tool's result.
A path behind one of the vault's walls (coffer.upstreams.walls: Coffer's own files, a secret place) is
never offered as a grant: the hint says that Coffer hides it on purpose, and why.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

from coffer.upstreams import runtimes
from coffer.upstreams.sandbox import Start

_BOX = re.compile("[\u2500-\u257f]")  # box-drawing characters: a drawn traceback's frame
_PATH = re.compile(r"(?<![\w:/.~])((?:/|~/)[\w.@+~-][^\s'\"`,;:()\[\]{}<>]*)")
# Words that say a write failed, as real servers word it ("Lock at '/repo/.git/index.lock' could not be obtained").
_WRITING = re.compile(
    r"read-only|EROFS|EACCES|permission denied|operation not permitted|\block\b|"
    r"could not (?:be )?(?:obtained|written|created|saved)|(?:cannot|can't|could not|unable to|failed to) "
    r"(?:write|create|save|lock|open .* for writing|mkdir)",
    re.I,
)
_PORT = re.compile(r"(?:localhost|127\.\d+\.\d+\.\d+|\[?::1\]?|0\.0\.0\.0)[:\s](\d{1,5})\b")
_URL_PORT = re.compile(
    r"\b[a-z][\w+.-]*://(?:[^@/\s]*@)?(?:localhost|127\.\d+\.\d+\.\d+|\[::1\]|0\.0\.0\.0)(?::(\d{1,5}))?", re.I
)


def hint(
    start: Start | None,
    name: str,
    error: str,
    denied_hosts: list[str] | None = None,
    context: Sequence[str] = (),
    stderr: str = "",
) -> str | None:
    """What to tell a user whose confined server failed on something its sandbox denied; None otherwise.
    Read from what was denied, not from the error's words: every path and local URL in the error, in
    `context` (the call's arguments) and in `stderr` (what the server wrote meanwhile) is held against
    what its last start could read, write and reach. From stderr only paths that exist on the host count,
    and no line of a drawn box: a traceback drawn by rich wraps its paths ("ite-packages/mcp" + "/server.py"
    on the next line), and a fragment named a file to grant that was never there."""
    if denied_hosts:
        host = denied_hosts[-1]
        more = f" (and {', '.join(denied_hosts[-3:-1])})" if len(denied_hosts) > 1 else ""
        return f"the sandbox's proxy refused {host}{more}: allow it with `coffer edit {name} --allow-host {host}`"
    if start is None:
        return None
    plain = "\n".join(line for line in stderr.splitlines() if not _BOX.search(line))
    texts = [error, *context, plain]
    found = [(p, True) for text in (error, *context) for p in _PATH.findall(text)]
    found += [(p, False) for p in _PATH.findall(plain)]
    for raw, asked in found:
        path = raw.rstrip(".'\"")
        if not asked and not os.path.lexists(os.path.expanduser(path)):
            continue
        said = _path(start, name, path, error)
        if said is not None:
            return said
    ports = [int(p) for text in texts for p in (*_PORT.findall(text), *_url_ports(text))]
    for port in ports:
        if start.ports is not None and port not in start.ports:
            where = f"localhost:{port}"
            return f"the sandbox keeps '{name}' from {where}: allow it with `coffer edit {name} --allow-host {where}`"
    if re.search(r"network is unreachable|ENETUNREACH", error, re.I) and start.policy.network == "none":
        return f"'{name}' runs with no network: allow a host with `coffer edit {name} --allow-host HOST`"
    return None


def _path(start: Start, name: str, raw: str, error: str) -> str | None:
    """The hint for one path a failure named, or None where the sandbox did not stand in its way."""
    user = runtimes.home()
    path = os.path.join(user, raw[2:]) if raw.startswith("~/") else os.path.normpath(raw)
    if runtimes.within(path, start.home) and not os.path.lexists(path):  # its own home lacks what the user's has
        mine = os.path.join(user, os.path.relpath(path, start.home))
        if os.path.lexists(mine):
            path = mine
    if not _on_host(path) or os.path.realpath(path).startswith(("/proc/", "/dev/")):
        return None
    wall = start.wall_of(path)
    if wall is not None and not start.visible(path):  # on purpose: never a grant to propose
        return f"'{name}' cannot reach {path}: {wall.why()}"
    served = [os.path.realpath(p) for p in (*start.policy.named, *start.roots)]
    if start.policy.roots_only and not any(runtimes.within(os.path.realpath(path), p) for p in served):
        folders = ", ".join(runtimes.tilde(p) for p in served) or "nothing yet"
        return (
            f"'{name}' itself serves only the folders its launch line names and a session's roots ({folders}):"
            " a sandbox grant would not change that"
        )
    quoted = _quote(path)
    folder = os.path.dirname(os.path.realpath(path))
    if start.mechanism == "landlock" and folder in start.listed and not os.path.lexists(path):
        return (
            f"under Landlock alone '{name}' cannot create {path}: {runtimes.tilde(folder)} holds what Coffer hides"
            " from every server, so only what is already in it is granted (bubblewrap can: apt install bubblewrap)"
        )
    if not start.visible(path):
        if re.search(r"read-only|EROFS", error, re.I):
            return f"the sandbox keeps {path} from '{name}': `coffer edit {name} --allow-write {quoted}`"
        if runtimes.within(path, user) and start.mechanism == "bubblewrap" and start.home_at != start.home:
            where = f"its home is its own, and {runtimes.tilde(path)} is not in it"
            return f"{where}: grant it with `coffer edit {name} --allow-read {quoted}` (--allow-write to change it)"
        return (
            f"the sandbox keeps {path} from '{name}': grant it with `coffer edit {name} --allow-read {quoted}`"
            " (--allow-write to change it)"
        )
    if not start.writable(path) and _WRITING.search(error):
        return f"the sandbox lets '{name}' only read {path}: `coffer edit {name} --allow-write {quoted}`"
    return None


def _url_ports(text: str) -> list[str]:
    """The ports of local URLs (`http://localhost:8080`, `postgres://127.0.0.1:5432/db`; the scheme's own)."""
    out = []
    for match in _URL_PORT.finditer(text):
        scheme = match.group(0).split(":", 1)[0].lower()
        port = match.group(1) or {"http": "80", "https": "443", "ws": "80", "wss": "443"}.get(scheme)
        if port:
            out.append(port)
    return out


def _on_host(path: str) -> bool:
    """The path, or the folder it would be made in, exists outside the sandbox: a denial, not a typo."""
    return os.path.exists(path) or os.path.isdir(os.path.dirname(path))


def _quote(path: str) -> str:
    """The path as a command line takes it: `~/...` where it is under the home directory."""
    shown = runtimes.tilde(path)
    return "~/" + shlex.quote(shown[2:]) if shown.startswith("~/") else shlex.quote(shown)
