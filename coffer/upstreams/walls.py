"""What no grant opens: Coffer's own files, every server's private home and temp, and the secret places.

A grant (`--allow-read ~`, a filesystem server started on `/`, a symlink to a parent, a path with `..`) is
the user's word for what a server may see, and it is never wider than the vault's walls:

- Coffer's own places: its config and data folders, wherever `COFFER_HOME` puts them (the registry, the
  database, the secrets file, the HTTP token, the catalogue snapshot, every server's and member's private
  home), the engines' runtime folder (their sockets) and the servers' private temps (their proxy sockets).
  No grant may name them (`coffer add/edit` refuse it, a hand-written one is dropped), and a grant that
  holds them has them carved out: a server finds its own home and temp there and nothing beside them.
- Secret places (coffer.upstreams.policy.SECRETS: keys, cloud and registry credentials, agents' configs
  with their servers' tokens, shell history, browser profiles; and the agents' sockets in the session's
  runtime folder): carved out of every grant that holds them, granted only by name (`--allow-secret`).

The mechanism does the carving (coffer.upstreams.sandbox): bubblewrap mounts an empty read-only folder
(or /dev/null) over each wall inside a grant; Landlock alone replaces a grant that holds a wall by its
other entries, recursively, so the wall and what lies in it are neither read, listed nor written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from coffer.upstreams import runtimes
from coffer.upstreams.policy import AGENT_CONFIGS, SECRETS
from coffer.vault import paths

_BROWSERS = (".mozilla", "chrome", "chromium", "Brave", "edge")


@dataclass(frozen=True)
class Wall:
    """One place no grant opens. `coffer`: Coffer's own (never grantable); else a secret place."""

    path: str  # the real path
    what: str  # what it is, in words
    coffer: bool

    @property
    def shown(self) -> str:
        return runtimes.tilde(self.path)

    def why(self) -> str:
        """Why Coffer hides it, as a person reads it."""
        if self.coffer:
            return f"{self.shown} is {self.what}: hidden from every server, whatever it is granted"
        return f"{self.shown} is a secret place ({self.what}): Coffer hides it from every server on purpose"


def coffer_places() -> list[Wall]:
    """Coffer's own folders that exist here, as real paths, outermost only."""
    found = [  # the data folder first: where COFFER_HOME makes them one, it says the most
        (paths.data_dir(), "Coffer's vault (its database, secrets, HTTP token and every server's home)"),
        (paths.config_dir(), "Coffer's vault (its registry)"),
        (paths.runtime_root(), "Coffer's runtime folder (the engines' sockets)"),
        (paths.private_tmp_root(), "Coffer's folder of the servers' private temps"),
    ]
    first: dict[str, Wall] = {}  # one wall per folder: the first named for it says the most
    for folder, what in found:
        if os.path.lexists(folder):
            first.setdefault(os.path.realpath(folder), Wall(os.path.realpath(folder), what, True))
    return [first[p] for p in runtimes.outermost(list(first))]


def secret_places(opened: Iterable[str] = ()) -> list[Wall]:
    """The secret places that exist here (real paths), but for those a grant opened by name (`opened`:
    real paths given with --allow-secret; a place inside one of them is opened with it)."""
    user = runtimes.home()
    opened = [os.path.realpath(o) for o in opened]
    out: list[Wall] = []
    for path, what in _candidates():
        real = os.path.realpath(path)
        if os.path.lexists(path) and real not in ("/", user) and not any(runtimes.within(real, o) for o in opened):
            out.append(Wall(real, what, False))
    return out


def _candidates() -> list[tuple[str, str]]:
    """Every secret place by name, whether it exists or not: (path, what it holds)."""
    user = runtimes.home()
    found = [(os.path.join(user, place), _secret_kind(place)) for place in SECRETS]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        found.append((runtime, "the session's sockets: the SSH and GPG agents, the session bus"))
    agent = os.environ.get("SSH_AUTH_SOCK")
    if agent and os.path.isabs(agent):
        found.append((os.path.dirname(agent), "the SSH agent's socket"))
    return found


def walls(opened: Iterable[str] = ()) -> list[Wall]:
    """Every place hidden from a server whose policy opened `opened` by name."""
    return [*coffer_places(), *secret_places(opened)]


def holding(path: str, among: Iterable[Wall]) -> Wall | None:
    """The wall `path` (a real path) lies in, or None."""
    return next((w for w in among if runtimes.within(path, w.path)), None)


def inside(path: str, among: Iterable[Wall]) -> list[Wall]:
    """The walls strictly inside `path` (a real path): what stays hidden when it is granted."""
    return [w for w in among if runtimes.within(w.path, path) and w.path != path]


def coffers(path: str) -> Wall | None:
    """The place of Coffer's own that a grant of `path` would name (it, or a path in it), or None."""
    return holding(os.path.realpath(os.path.expanduser(path)), coffer_places())


def secret_of(path: str) -> Wall | None:
    """The secret place a grant of `path` would name (it, or a path in it), existing or not."""
    real = os.path.realpath(os.path.expanduser(path))
    for place, what in _candidates():
        secret = os.path.realpath(place)
        if runtimes.within(real, secret) and secret not in ("/", runtimes.home()):
            return Wall(secret, what, False)
    return None


def hidden_inside(grants: Iterable[str], every: list[Wall]) -> list[Wall]:
    """The walls of `every` that stay hidden inside these grants (paths as given: `~` and symlinks resolved)."""
    out: dict[str, Wall] = {}
    for grant in grants:
        real = os.path.realpath(os.path.expanduser(grant))
        for wall in inside(real, every):
            out.setdefault(wall.path, wall)
    return list(out.values())


def _secret_kind(place: str) -> str:
    if "history" in place:
        return "shell and REPL history"
    if place in AGENT_CONFIGS:
        return "an agent's config, with its servers' tokens"
    if any(b in place for b in _BROWSERS):
        return "a browser profile: cookies and saved passwords"
    if place == ".ssh":
        return "SSH keys"
    if place == ".gnupg":
        return "GPG keys"
    return "credentials"
