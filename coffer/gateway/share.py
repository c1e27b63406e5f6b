"""Which upstreams an engine runs once for every session, and which once per session.

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
from collections.abc import Collection
from dataclasses import dataclass

from coffer.vault.registry import ServerConfig

SEEN_ROOTS = "roots_outside_call"  # the catalogue's note: it asked for roots with no call in flight

# Servers that keep per-client state in their process, by the package or program their launch line runs
# (matched as a whole word anywhere in the command or arguments). README: "Sharing upstreams".
KNOWN: dict[str, str] = {
    "@playwright/mcp": "a browser (tabs, cookies, the page an agent is on)",
    "@executeautomation/playwright-mcp-server": "a browser (tabs, cookies, the page an agent is on)",
    "@modelcontextprotocol/server-puppeteer": "a browser (tabs, cookies, the page an agent is on)",
    "puppeteer-mcp-server": "a browser (tabs, cookies, the page an agent is on)",
    "chrome-devtools-mcp": "a browser (tabs, cookies, the page an agent is on)",
    "@browsermcp/mcp": "a browser (tabs, cookies, the page an agent is on)",
    "@browserbasehq/mcp-server-browserbase": "a browser session",
    "@wonderwhy-er/desktop-commander": "a shell (running processes, terminal sessions)",
    "mcp-shell-server": "a shell (working directory, environment)",
    "iterm-mcp": "a terminal",
    "@modelcontextprotocol/server-sequential-thinking": "one conversation's thought history",
}


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
    for package, keeps in KNOWN.items():
        pattern = re.compile(rf"(^|[/\s]){re.escape(package)}(@[\w.\-]+)?($|\s)")
        if any(pattern.search(w) for w in words):
            return package, keeps
    return None
