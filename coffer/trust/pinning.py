"""Pinning: tool definitions and launch configs are hashed when first trusted; a change is held back.

A "rug pull" is an upstream that later serves a different definition for a tool the user already
trusted. Each tool's canonical JSON (name, title, description, inputSchema, outputSchema, annotations,
_meta; the whole definition, since a schema-only change can be the attack) is hashed with SHA-256.
A changed tool is *held*: not advertised, not searchable, refused at call time, until
`coffer approve SERVER[__TOOL]`. New tools of a known server follow `[settings] new_tools`
("allow", the default, or "hold"); a server's very first listing is its baseline.

The launch config (command, args, cwd, url, env and header *names*, and the values of env variables
that load code, such as LD_PRELOAD or NODE_OPTIONS) is hashed too. `coffer add` approves it; any other
change (a hand edit, an agent editing coffer.toml) leaves the server unapproved, and the gateway does
not start it until `coffer approve SERVER`.

Storage: tables in coffer.db (coffer.trust.pinschema). Reads on the call path come from an in-memory
copy, reloaded only when SQLite's `data_version` says another connection committed and the trust
tables' change counter says that commit changed them (the call log commits once per call).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coffer.errors import NotFoundError, RegistryError
from coffer.trust.injection import scan
from coffer.trust.pinhash import (
    CODE_ENV,
    NEW_TOOLS,
    canonical,
    config_definition,
    config_hash,
    digest,
    new_tools_setting,
    pretty,
    tool_definition,
    tool_hash,
    unified,
)
from coffer.trust.pinschema import TRUST_TABLES, migrations
from coffer.vault.database import immediate

if TYPE_CHECKING:
    import sqlite_utils

    from coffer.vault.catalogue import CatalogueTool
    from coffer.vault.registry import Registry, ServerConfig

__all__ = [
    "CODE_ENV", "NEW_TOOLS", "Pins", "ToolPin", "approve_server_config", "canonical", "config_definition",
    "config_hash", "digest", "new_tools_setting", "pretty", "tool_definition", "tool_hash", "unified",
]  # fmt: skip

APPROVED, HELD, NEW = "approved", "held", "new"


@dataclass(frozen=True)
class ToolPin:
    server: str
    tool: str
    exposed: str | None
    state: str
    old: dict[str, Any] | None  # the approved definition (None for a new tool)
    new: dict[str, Any] | None  # the held definition waiting for approval

    def diff(self) -> str:
        old = pretty(self.old) if self.old is not None else ""
        new = pretty(self.new) if self.new is not None else ""
        return unified(old, new, f"{self.server}__{self.tool}")


class Pins:
    """The trust store: one connection, safe to share between the gateway's threads."""

    def __init__(self, db: sqlite_utils.Database, new_tools: str = "allow") -> None:
        self.db = db
        self.new_tools = new_tools
        self._lock = threading.RLock()
        self._cache: tuple[int, dict[str, str | None], set[tuple[str, str]]] | None = None
        self._trust: int | None = None  # `trust_version` when the cache was read
        self._generation = 0

    @classmethod
    def open(cls, path: Path | None = None, *, new_tools: str | None = None) -> Pins:
        """Open coffer.db's trust tables; `new_tools` defaults to the registry's `[settings]`."""
        from coffer.vault.database import migrate, open_db

        if new_tools is None:
            from coffer.vault import registry

            new_tools = new_tools_setting(registry.load().settings)
        elif new_tools not in NEW_TOOLS:
            raise RegistryError(f"new_tools must be 'allow' or 'hold', not {new_tools!r}")
        pins = cls(open_db(path, check_same_thread=False), new_tools)
        with pins._lock:
            migrate(pins.db, migrations())
        return pins

    @classmethod
    def read(cls, path: Path | None = None) -> Pins:
        """A read-only view of the trust state on the standard library's sqlite3 (for `coffer search`):
        never migrates or writes; a vault with no trust tables yet reads as empty."""
        from coffer.vault import paths, upgrade

        path = path or paths.db_path()
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            upgrade.check_database(conn, path)  # a newer Coffer's tables are not read as these
            conn.execute("SELECT 1 FROM trust_servers LIMIT 1").fetchall()
            conn.execute("SELECT 1 FROM trust_tools LIMIT 1").fetchall()
        except sqlite3.Error:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            for statement in TRUST_TABLES:
                conn.execute(statement)
        return cls(conn, "allow")  # type: ignore[arg-type]

    def close(self) -> None:
        getattr(self.db, "conn", self.db).close()  # a sqlite_utils Database, or sqlite3's own (`read`)

    def __enter__(self) -> Pins:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ the cached view

    def _view(self) -> tuple[dict[str, str | None], set[tuple[str, str]]]:
        """(approved launch hash per server, held (server, name) pairs), reloaded when coffer.db changed."""
        with self._lock:
            version = int(self.db.execute("PRAGMA data_version").fetchone()[0])
            if self._cache is None or self._cache[0] != version:  # a commit: to trust, or the call log's
                trust = self._trust_version()  # read first: an edit after it is seen at the next check
                if self._cache is not None and trust is not None and trust == self._trust:
                    self._cache = (version, self._cache[1], self._cache[2])
                else:
                    self._trust = trust
                    self._cache = self._reload(version)
            return self._cache[1], self._cache[2]

    def _reload(self, version: int) -> tuple[int, dict[str, str | None], set[tuple[str, str]]]:
        servers = dict(self.db.execute("SELECT server, hash FROM trust_servers").fetchall())
        held: set[tuple[str, str]] = set()
        for server, tool, exposed in self.db.execute(
            "SELECT server, tool, exposed FROM trust_tools WHERE state != 'approved'"
        ):
            held |= {(server, tool), (server, exposed or tool)}
        if self._cache is None or (servers, held) != self._cache[1:]:
            self._generation += 1
        return version, servers, held

    def _trust_version(self) -> int | None:
        """The trust tables' change counter (None where it is missing: a read-only view of an old vault)."""
        try:
            row = self.db.execute("SELECT n FROM trust_version WHERE id = 1").fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else int(row[0])

    def stamp(self) -> int:
        """Changes whenever the trust state changed (here or in another process, e.g. `coffer approve`)."""
        self._view()
        return self._generation

    # ------------------------------------------------------------ launch configs

    def server_state(self, cfg: ServerConfig) -> str:
        """One of approved, new (never approved: hand-added) or changed (edited since approval)."""
        approved = self._view()[0].get(cfg.name)
        if approved is None:
            return "new"
        return "approved" if approved == config_hash(cfg) else "changed"

    def check_server(self, cfg: ServerConfig) -> bool:
        """May the gateway start this server? Logs one `config_held` event per unapproved config."""
        state = self.server_state(cfg)
        if state == "approved":
            return True
        current = config_hash(cfg)
        with self._write():
            last = self.db.execute(
                "SELECT new_hash FROM trust_events WHERE server = ? AND event = 'config_held' ORDER BY id DESC LIMIT 1",
                [cfg.name],
            ).fetchone()
            if last is None or last[0] != current:
                self._event(cfg.name, None, "config_held", None, current)
        return False

    def approve_server(self, cfg: ServerConfig, *, fresh: bool = False) -> bool:
        """Approve the launch config; `fresh` (a new `coffer add`) also forgets old tool pins.

        Returns False when it was already approved (and not fresh).
        """
        with self._write():
            return self._approve(cfg, fresh)

    def approve_servers(self, configs: Iterable[ServerConfig]) -> None:
        """Approve many new launch configs in one transaction (`coffer import` of a large file)."""
        with self._write():
            for cfg in configs:
                self._approve(cfg, True)

    def _approve(self, cfg: ServerConfig, fresh: bool) -> bool:
        new_hash = config_hash(cfg)
        row = self.db.execute("SELECT hash FROM trust_servers WHERE server = ?", [cfg.name]).fetchone()
        if row is not None and row[0] == new_hash and not fresh:
            return False
        if fresh:
            self.db.execute("DELETE FROM trust_tools WHERE server = ?", [cfg.name])
            self.db.execute("DELETE FROM trust_servers WHERE server = ?", [cfg.name])
        self.db.execute(
            "INSERT INTO trust_servers (server, hash, definition, approved_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(server) DO UPDATE SET hash = excluded.hash, definition = excluded.definition, "
            "approved_at = excluded.approved_at",
            [cfg.name, new_hash, canonical(config_definition(cfg)), time.time()],
        )
        self._event(cfg.name, None, "config_added" if fresh else "config_approved", row and row[0], new_hash)
        return True

    def forget_server(self, server: str) -> bool:
        """Drop a removed server's launch approval and tool pins, so a stale approval is never reused.

        A later `coffer add` of the name starts fresh; a hand-added entry of it waits for approval. The
        events stay as history (a `removed` event is added). Returns False when nothing was kept.
        """
        with self._write():
            gone = self.db.execute("DELETE FROM trust_servers WHERE server = ?", [server]).rowcount
            gone += self.db.execute("DELETE FROM trust_tools WHERE server = ?", [server]).rowcount
            if gone:
                self._event(server, None, "removed", None, None)
        return bool(gone)

    def startable(self, reg: Registry) -> list[ServerConfig]:
        """The gateway's view of a (re-)read registry: apply `new_tools`, keep approved enabled servers."""
        try:
            self.new_tools = new_tools_setting(reg.settings)
        except RegistryError as exc:
            import logging  # here: `coffer search` reads pins and never logs

            logging.getLogger("coffer.pinning").error("%s; holding new tools", exc)
            self.new_tools = "hold"
        return [cfg for cfg in reg.enabled_servers() if self.check_server(cfg)]

    def refusal(self, cfg: ServerConfig, tool: str | None = None, exposed: str | None = None) -> str | None:
        """Why trust forbids listing or calling this server (or tool) now; None when it allows it."""
        state = self.server_state(cfg)
        if state != "approved":
            how = "was never approved" if state == "new" else "changed since it was approved"
            return (
                f"server '{cfg.name}' is not started: its launch config {how} "
                f"(review with `coffer diff {cfg.name}`, then `coffer approve {cfg.name}`)"
            )
        if tool is not None and self.is_held(cfg.name, tool):
            name = exposed or f"{cfg.name}__{tool}"
            return (
                f"tool '{name}' is held: its definition is new or changed since it was approved "
                f"(review with `coffer diff {cfg.name}`, then `coffer approve {name}`)"
            )
        return None

    def config_change(self, cfg: ServerConfig) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """(approved launch definition or None, current one) for `coffer diff`."""
        with self._lock:
            row = self.db.execute("SELECT definition FROM trust_servers WHERE server = ?", [cfg.name]).fetchone()
        old = json.loads(row[0]) if row and row[0] else None
        return old, config_definition(cfg)

    # ------------------------------------------------------------ tools

    def observe(self, server: str, tools: Iterable[CatalogueTool]) -> set[str]:
        """Record a listing of `server`; returns the exposed names that are held now.

        The first listing of a server is its baseline; after that a changed definition is held, and a
        new tool is held only under `new_tools = "hold"`. A new tool whose text addresses the model
        (`coffer.trust.injection`) is held in any case, baseline included. A held tool served again with
        its approved definition is released.
        """
        tools = list(tools)
        now = time.time()
        held: set[str] = set()
        with self._write():
            rows = {
                r[0]: r
                for r in self.db.execute(
                    "SELECT tool, state, hash, pending_hash, exposed FROM trust_tools WHERE server = ?", [server]
                ).fetchall()
            }
            srv = self.db.execute("SELECT observed_at FROM trust_servers WHERE server = ?", [server]).fetchone()
            baseline = not rows and (srv is None or srv[0] is None)
            for tool in tools:
                definition = tool_definition(tool)
                text, new_hash = canonical(definition), digest(definition)
                row = rows.get(tool.tool)
                if row is None and scan(definition, server):  # aimed at the model: held, even in a baseline
                    self._insert(server, tool, NEW, None, None, new_hash, text, now)
                    self._event(server, tool.tool, "held_injection", None, new_hash)
                    held.add(tool.name)
                    continue
                if row is None:
                    if baseline or self.new_tools == "allow":
                        self._insert(server, tool, APPROVED, new_hash, text, None, None, now)
                    else:
                        self._insert(server, tool, NEW, None, None, new_hash, text, now)
                        self._event(server, tool.tool, "held_new", None, new_hash)
                        held.add(tool.name)
                    continue
                _, state, approved_hash, pending_hash, exposed = row
                if new_hash == approved_hash:
                    if state != APPROVED:
                        self._set(server, tool, APPROVED, None, None, now)
                        self._event(server, tool.tool, "released", pending_hash, new_hash)
                    elif exposed != tool.name:
                        self._set(server, tool, APPROVED, None, None, now)
                    continue
                held.add(tool.name)
                if new_hash != pending_hash:
                    new_state = HELD if approved_hash else NEW
                    self._set(server, tool, new_state, new_hash, text, now)
                    event = "held_changed" if approved_hash else "held_new"
                    self._event(server, tool.tool, event, approved_hash, new_hash)
            if baseline:
                self._event(server, None, "baseline", None, None)
            self.db.execute(
                "INSERT INTO trust_servers (server, observed_at) VALUES (?, ?) "
                "ON CONFLICT(server) DO UPDATE SET "
                "observed_at = COALESCE(trust_servers.observed_at, excluded.observed_at)",
                [server, now],
            )
        return held

    def is_held(self, server: str, tool_name: str) -> bool:
        """Is this tool (upstream or exposed name) waiting for approval? Unknown tools are not held."""
        return (server, tool_name) in self._view()[1]

    def held(self, server: str | None = None) -> list[ToolPin]:
        where, params = ("AND server = ?", [server]) if server else ("", [])
        with self._lock:
            rows = self.db.execute(
                "SELECT server, tool, exposed, state, definition, pending_definition FROM trust_tools "
                f"WHERE state != 'approved' {where} ORDER BY server, tool",
                params,
            ).fetchall()
        return [
            ToolPin(s, t, e, st, json.loads(d) if d else None, json.loads(p) if p else None)
            for s, t, e, st, d, p in rows
        ]

    def approve_tool(self, server: str, tool_name: str) -> ToolPin:
        """Accept the held definition of one tool (upstream or exposed name)."""
        match = [p for p in self.held(server) if tool_name in (p.tool, p.exposed)]
        if not match:
            raise NotFoundError(f"'{server}__{tool_name}' is not held (see `coffer diff {server}`)")
        pin = match[0]
        with self._write():
            self.db.execute(
                "UPDATE trust_tools SET state = 'approved', hash = pending_hash, definition = pending_definition, "
                "pending_hash = NULL, pending_definition = NULL, updated_at = ? WHERE server = ? AND tool = ?",
                [time.time(), server, pin.tool],
            )
            self._event(server, pin.tool, "approved", None, digest(pin.new) if pin.new is not None else None)
        return pin

    def approve_tools(self, server: str) -> list[ToolPin]:
        return [self.approve_tool(server, pin.tool) for pin in self.held(server)]

    def events(self, server: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        where, params = ("WHERE server = ?", [server]) if server else ("", [])
        with self._lock:
            rows = self.db.execute(
                f"SELECT ts, server, tool, event, old_hash, new_hash FROM trust_events {where} "
                "ORDER BY id DESC LIMIT ?",
                [*params, limit],
            ).fetchall()
        keys = ("ts", "server", "tool", "event", "old_hash", "new_hash")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    # ------------------------------------------------------------ internals (inside `_write`)

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """`BEGIN IMMEDIATE` ... COMMIT: take the write lock up front, so read-modify-write never races."""
        with self._lock:
            with immediate(self.db.conn):
                yield
            self._cache = None  # our own commits do not change data_version

    def _insert(
        self, server: str, tool: CatalogueTool, state: str, h: str | None, d: str | None,
        ph: str | None, pd: str | None, now: float,
    ) -> None:  # fmt: skip
        self.db.execute(
            "INSERT INTO trust_tools (server, tool, exposed, state, hash, definition, pending_hash, "
            "pending_definition, first_seen, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [server, tool.tool, tool.name, state, h, d, ph, pd, now, now],
        )

    def _set(self, server: str, tool: CatalogueTool, state: str, ph: str | None, pd: str | None, now: float) -> None:
        self.db.execute(
            "UPDATE trust_tools SET state = ?, pending_hash = ?, pending_definition = ?, exposed = ?, updated_at = ? "
            "WHERE server = ? AND tool = ?",
            [state, ph, pd, tool.name, now, server, tool.tool],
        )

    def _event(self, server: str, tool: str | None, event: str, old: str | None, new: str | None) -> None:
        self.db.execute(
            "INSERT INTO trust_events (ts, server, tool, event, old_hash, new_hash) VALUES (?, ?, ?, ?, ?, ?)",
            [time.time(), server, tool, event, old, new],
        )


def approve_server_config(cfg: ServerConfig, *, fresh: bool = True) -> None:
    """Called by `coffer add`/`coffer import`: the user just chose this launch config, so it is trusted."""
    with Pins.open(new_tools="allow") as pins:
        pins.approve_server(cfg, fresh=fresh)
