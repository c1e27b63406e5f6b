"""What belongs to one host session: its context (`HostSession`), and which upstreams an engine runs once
for every session and which once per session (`decide`).

The engine serves many hosts from one gateway; a handler knows whose request it serves from the one
`HostSession` current in its context (`current()`, set around the session's `server.run` by `serving()`;
the tasks it starts inherit it): the profile it named, its own pool of per-session servers, and the
tasks it made (coffer.gateway.tasks). In-process serving has one host and no `HostSession`.

Most servers hold no state about their client: one process serves every agent session (the engine's
point). Some do: a browser whose tabs and cookies are one agent's, a shell whose working directory and
running commands are one agent's, a reasoning scratchpad whose history is one conversation's, and any
server that asks its client for roots outside a call (it scopes itself to one client's workspace, as the
filesystem server does after its handshake). Those get one process per session.

`share` in a server's registry entry: "shared", "session", or "auto" (the default), which decides from
what the server's launch line says it runs (`KNOWN`) and from what it was seen doing (`SEEN_ROOTS`, kept
in the catalogue so the next engine knows from the start).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from coffer.vault.registry import ServerConfig


@dataclass(eq=False)
class HostSession:
    """One host session of the engine, as its handlers see it. `pool`: its own pool for the servers it
    runs itself (`coffer.gateway.pool.Pool.session`, which decides once which those are); the tasks it
    creates are owned by this object."""

    profile: str | None = None
    pool: object = None


_current: ContextVar[HostSession | None] = ContextVar("coffer_host_session", default=None)


def current() -> HostSession | None:
    """The host session being served, None in-process (one host)."""
    return _current.get()


@contextmanager
def serving(session: HostSession) -> Iterator[HostSession]:
    """`session` is current inside the block, and in every task started from it."""
    token = _current.set(session)
    try:
        yield session
    finally:
        _current.reset(token)


SEEN_ROOTS = "roots_outside_call"  # the catalogue's note: it asked for roots with no call in flight
SEEN_ASKS = "asks_during_call"  # it asked its client during a call: calls of different clients take turns

# Servers that keep per-client state in their process, by the package their launch line runs (a whole
# word anywhere in the command or arguments: `npx -y @playwright/mcp`, `node .../node_modules/@playwright/
# mcp/cli.js`) or a program that package installs (`playwright-mcp`, `/x/node_modules/.bin/playwright-mcp`,
# a global install). docs/serving.md: "Sharing upstreams".
BROWSER = "a browser (tabs, cookies, the page an agent is on)"
KNOWN: dict[str, tuple[tuple[str, ...], str]] = {
    "@playwright/mcp": (("playwright-mcp",), BROWSER),
    "@executeautomation/playwright-mcp-server": ((), BROWSER),
    "@modelcontextprotocol/server-puppeteer": (("mcp-server-puppeteer",), BROWSER),
    "puppeteer-mcp-server": (("puppeteer-mcp-server",), BROWSER),
    "chrome-devtools-mcp": (("chrome-devtools-mcp",), BROWSER),
    "@browsermcp/mcp": ((), BROWSER),
    "@browserbasehq/mcp-server-browserbase": ((), "a browser session"),
    "@wonderwhy-er/desktop-commander": (("desktop-commander",), "a shell (running processes, terminal sessions)"),
    "mcp-shell-server": (("mcp-shell-server",), "a shell (working directory, environment)"),
    "iterm-mcp": (("iterm-mcp",), "a terminal"),
    "@modelcontextprotocol/server-sequential-thinking": (
        ("mcp-server-sequential-thinking",),
        "one conversation's thought history",
    ),
}
_SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".cmd", ".exe", ".ps1")


@dataclass(frozen=True)
class Share:
    """How one server is run under an engine, and why (`coffer show`, `coffer status`)."""

    mode: str  # "shared" or "session"
    reason: str

    @property
    def per_session(self) -> bool:
        return self.mode == "session"


def decide(cfg: ServerConfig, seen: Collection[str] = ()) -> Share:
    """The share mode of `cfg`, given what the catalogue saw it do (`seen`)."""
    if cfg.share == "shared":
        return Share("shared", 'share = "shared" in coffer.toml')
    if cfg.share == "session":
        return Share("session", 'share = "session" in coffer.toml')
    if cfg.share == "member":  # once per team member (coffer.gateway.pool); one user is one member
        return Share("shared", 'share = "member": one process per team member, one for a single user')
    keeps = known_state(cfg)
    if keeps is not None:
        return Share("session", f"auto: it runs {keeps[0]}, which keeps {keeps[1]}")
    if SEEN_ROOTS in seen:
        return Share("session", "auto: it asked for roots outside a call (it scopes itself to one client)")
    return Share("shared", "auto: it keeps no per-client state that Coffer knows of")


def known_state(cfg: ServerConfig) -> tuple[str, str] | None:
    """(package, what it keeps) when the launch line runs a server known to keep per-client state."""
    if cfg.url:
        return None
    words = [cfg.command or "", *cfg.args]
    programs = {_program(w) for w in words}
    for package, (bins, keeps) in KNOWN.items():
        pattern = re.compile(rf"(^|[/\s]){re.escape(package)}(@[\w.\-]+)?($|[\s/])")
        if any(pattern.search(w) for w in words) or programs.intersection(bins):
            return package, keeps
    return None


def _program(word: str) -> str:
    """The program a word names: its last path part without a script suffix (`/x/.bin/playwright-mcp`)."""
    name = re.split(r"[/\\]", word)[-1]
    for suffix in _SCRIPT_SUFFIXES:
        name = name.removesuffix(suffix)
    return name
