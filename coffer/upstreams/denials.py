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

from coffer.upstreams import runtimes
from coffer.upstreams.sandbox import Start

_PATH = re.compile(r"(?<![\w:/.])(/[\w.@+~-][^\s'\"`,;:()\[\]{}<>]*)")
_WRITING = re.compile(r"read-only|EROFS|EACCES|permission denied|access denied|operation not permitted", re.I)
_DENIED = re.compile(
    r"read-only file system|EROFS|permission denied|EACCES|no such file|ENOENT|access denied|"
    r"network is unreachable|ENETUNREACH|operation not permitted|EPERM",
    re.I,
)
_PORT = re.compile(r"(?:localhost|127\.\d+\.\d+\.\d+|\[?::1\]?|0\.0\.0\.0)[:\s](\d{1,5})\b")


def hint(start: Start | None, name: str, error: str, denied_hosts: list[str] | None = None) -> str | None:
    """What to tell a user whose confined server failed on something its sandbox denied; None otherwise."""
    if denied_hosts:
        host = denied_hosts[-1]
        more = f" (and {', '.join(denied_hosts[-3:-1])})" if len(denied_hosts) > 1 else ""
        return f"the sandbox's proxy refused {host}{more}: allow it with `coffer edit {name} --allow-host {host}`"
    if start is None or not _DENIED.search(error):
        return None
    for raw in _PATH.findall(error):
        path = raw.rstrip(".'\"")
        if not _on_host(path) or os.path.realpath(path).startswith(("/proc/", "/dev/")):
            continue
        wall = start.wall_of(path)
        if wall is not None and not start.visible(path):  # on purpose: never a grant to propose
            return f"'{name}' cannot reach {path}: {wall.why()}"
        if not start.visible(path):
            quoted = _quote(path)
            if re.search(r"read-only|EROFS", error, re.I):
                return f"the sandbox keeps {path} from '{name}': `coffer edit {name} --allow-write {quoted}`"
            return (
                f"the sandbox keeps {path} from '{name}': grant it with `coffer edit {name} --allow-read {quoted}`"
                " (--allow-write to change it)"
            )
        if not start.writable(path) and _WRITING.search(error):
            return f"the sandbox lets '{name}' only read {path}: `coffer edit {name} --allow-write {_quote(path)}`"
    port = _PORT.search(error)
    if port and start.ports is not None and int(port.group(1)) not in start.ports:
        where = f"localhost:{port.group(1)}"
        return f"the sandbox keeps '{name}' from {where}: allow it with `coffer edit {name} --allow-host {where}`"
    if re.search(r"network is unreachable|ENETUNREACH", error, re.I) and start.policy.network == "none":
        return f"'{name}' runs with no network: allow a host with `coffer edit {name} --allow-host HOST`"
    return None


def _on_host(path: str) -> bool:
    """The path, or the folder it would be made in, exists outside the sandbox: a denial, not a typo."""
    return os.path.exists(path) or os.path.isdir(os.path.dirname(path))


def _quote(path: str) -> str:
    """The path as a command line takes it: `~/...` where it is under the home directory."""
    shown = runtimes.tilde(path)
    return "~/" + shlex.quote(shown[2:]) if shown.startswith("~/") else shlex.quote(shown)
