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

Storage: tables in coffer.db (migration set "coffer.trust"). SQLite rather than a JSON file because
several `coffer serve` processes observe listings at once: `BEGIN IMMEDIATE` makes each observation
one serialised read-modify-write, and holds/approvals are logged in `trust_events` in the same
transaction, so a hold is never recorded without its event.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlite_utils import Migrations

from coffer.errors import NotFoundError, RegistryError

if TYPE_CHECKING:
    import sqlite_utils

    from coffer.catalogue import CatalogueTool
    from coffer.registry import ServerConfig

MIGRATIONS = Migrations("coffer.trust")
NEW_TOOLS = ("allow", "hold")
APPROVED, HELD, NEW = "approved", "held", "new"
# Env variables whose *value* decides what code runs; their values are part of the launch hash.
CODE_ENV = frozenset(
    {
        "PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH", "NODE_OPTIONS",
        "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PERL5OPT", "PERL5LIB", "RUBYOPT",
        "RUBYLIB", "JAVA_TOOL_OPTIONS", "BASH_ENV", "ENV", "ZDOTDIR",
    }
)  # fmt: skip
_TOOL_FIELDS = {
    "name": ("name",),
    "title": ("title",),
    "description": ("description",),
    "inputSchema": ("inputSchema", "input_schema"),
    "outputSchema": ("outputSchema", "output_schema"),
    "annotations": ("annotations",),
    "_meta": ("_meta", "meta"),
}


@MIGRATIONS()
def m0001_trust(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS trust_servers (
            server TEXT PRIMARY KEY, hash TEXT, definition TEXT, approved_at REAL, observed_at REAL);
        CREATE TABLE IF NOT EXISTS trust_tools (
            server TEXT NOT NULL, tool TEXT NOT NULL, exposed TEXT, state TEXT NOT NULL,
            hash TEXT, definition TEXT, pending_hash TEXT, pending_definition TEXT,
            first_seen REAL NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (server, tool));
        CREATE INDEX IF NOT EXISTS trust_tools_exposed ON trust_tools (server, exposed);
        CREATE TABLE IF NOT EXISTS trust_events (
            id INTEGER PRIMARY KEY, ts REAL NOT NULL, server TEXT NOT NULL, tool TEXT,
            event TEXT NOT NULL, old_hash TEXT, new_hash TEXT);
        """
    )


# ---------------------------------------------------------------- canonical forms (pure)


def _normal(value: Any) -> Any:
    """JSON-equal values get one spelling: 1.0 and 1 are the same number to a schema."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    return value


def tool_definition(tool: CatalogueTool | Mapping[str, Any]) -> dict[str, Any]:
    """The pinned fields of a tool, as the upstream served them (absent, null and {} are the same)."""
    if isinstance(tool, Mapping):
        raw: Mapping[str, Any] = tool
    elif tool.raw:
        raw = tool.raw
    else:
        raw = {
            "name": tool.tool,
            "title": tool.title,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "annotations": tool.annotations,
        }
    out: dict[str, Any] = {}
    for key, aliases in _TOOL_FIELDS.items():
        value = next((raw[a] for a in aliases if raw.get(a) is not None), None)
        if value is None or (key not in ("name", "description") and value in ({}, "")):
            continue
        out[key] = _normal(value)
    out.setdefault("description", "")
    return out


def canonical(data: Any) -> str:
    return json.dumps(_normal(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(data: Any) -> str:
    return hashlib.sha256(canonical(data).encode("utf-8")).hexdigest()


def tool_hash(tool: CatalogueTool | Mapping[str, Any]) -> str:
    return digest(tool_definition(tool))


def config_definition(cfg: ServerConfig) -> dict[str, Any]:
    """What decides which program runs and where it connects; never secret values."""
    return {
        "transport": cfg.transport,
        "command": cfg.command,
        "args": list(cfg.args),
        "cwd": cfg.cwd,
        "url": cfg.url,
        "env": sorted(cfg.env),
        "code_env": {k: v for k, v in sorted(cfg.env.items()) if k.upper() in CODE_ENV},
        "headers": sorted(cfg.headers),
    }


def config_hash(cfg: ServerConfig) -> str:
    return digest(config_definition(cfg))


def pretty(definition: Any) -> str:
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def unified(old: str, new: str, label: str, now: str = "served now") -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"{label} (approved)", f"{label} ({now})"
    )
    return "".join(lines)


def new_tools_setting(settings: Mapping[str, Any]) -> str:
    value = settings.get("new_tools", "allow")
    if value not in NEW_TOOLS:
        raise RegistryError(f'settings.new_tools must be "allow" or "hold", not {value!r}')
    return str(value)


# ---------------------------------------------------------------- storage


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
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | None = None, *, new_tools: str | None = None) -> Pins:
        """Open coffer.db's trust tables; `new_tools` defaults to the registry's `[settings]`."""
        from coffer.store import open_db

        if new_tools is None:
            from coffer import registry

            new_tools = new_tools_setting(registry.load().settings)
        elif new_tools not in NEW_TOOLS:
            raise RegistryError(f"new_tools must be 'allow' or 'hold', not {new_tools!r}")
        db = open_db(path, check_same_thread=False)
        if MIGRATIONS.pending(db):
            with _immediate(db):
                MIGRATIONS.apply(db)  # re-checks under the write lock, so concurrent openers never race
        return cls(db, new_tools)

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Pins:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ launch configs

    def server_state(self, cfg: ServerConfig) -> str:
        """One of approved, new (never approved: hand-added) or changed (edited since approval)."""
        with self._lock:
            row = self.db.execute("SELECT hash FROM trust_servers WHERE server = ?", [cfg.name]).fetchone()
        if row is None or row[0] is None:
            return "new"
        return "approved" if row[0] == config_hash(cfg) else "changed"

    def check_server(self, cfg: ServerConfig) -> bool:
        """May the gateway start this server? Logs one `config_held` event per unapproved config."""
        state = self.server_state(cfg)
        if state == "approved":
            return True
        current = config_hash(cfg)
        with self._lock, _immediate(self.db):
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
        new_hash = config_hash(cfg)
        now = time.time()
        with self._lock, _immediate(self.db):
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
                [cfg.name, new_hash, canonical(config_definition(cfg)), now],
            )
            self._event(cfg.name, None, "config_added" if fresh else "config_approved", row and row[0], new_hash)
        return True

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
        new tool is held only under `new_tools = "hold"`. A held tool served again with its approved
        definition is released.
        """
        tools = list(tools)
        now = time.time()
        held: set[str] = set()
        with self._lock, _immediate(self.db):
            rows = {
                r[0]: r
                for r in self.db.execute(
                    "SELECT tool, state, hash, pending_hash FROM trust_tools WHERE server = ?", [server]
                ).fetchall()
            }
            srv = self.db.execute("SELECT observed_at FROM trust_servers WHERE server = ?", [server]).fetchone()
            baseline = not rows and (srv is None or srv[0] is None)
            for tool in tools:
                definition = tool_definition(tool)
                text, new_hash = canonical(definition), digest(definition)
                row = rows.get(tool.tool)
                if row is None:
                    if baseline or self.new_tools == "allow":
                        self._insert(server, tool, APPROVED, new_hash, text, None, None, now)
                    else:
                        self._insert(server, tool, NEW, None, None, new_hash, text, now)
                        self._event(server, tool.tool, "held_new", None, new_hash)
                        held.add(tool.name)
                    continue
                _, state, approved_hash, pending_hash = row
                if new_hash == approved_hash:
                    if state != APPROVED:
                        self._set(server, tool, APPROVED, None, None, now)
                        self._event(server, tool.tool, "released", pending_hash, new_hash)
                    elif self._exposed_changed(server, tool):
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
        with self._lock:
            row = self.db.execute(
                "SELECT state FROM trust_tools WHERE server = ? AND (tool = ? OR exposed = ?) "
                "ORDER BY tool = ? DESC LIMIT 1",
                [server, tool_name, tool_name, tool_name],
            ).fetchone()
        return row is not None and row[0] != APPROVED

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
        with self._lock, _immediate(self.db):
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

    # ------------------------------------------------------------ internals (caller holds the lock)

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

    def _exposed_changed(self, server: str, tool: CatalogueTool) -> bool:
        row = self.db.execute(
            "SELECT exposed FROM trust_tools WHERE server = ? AND tool = ?", [server, tool.tool]
        ).fetchone()
        return row is not None and row[0] != tool.name

    def _event(self, server: str, tool: str | None, event: str, old: str | None, new: str | None) -> None:
        self.db.execute(
            "INSERT INTO trust_events (ts, server, tool, event, old_hash, new_hash) VALUES (?, ?, ?, ?, ?, ?)",
            [time.time(), server, tool, event, old, new],
        )


class _immediate:
    """`BEGIN IMMEDIATE` ... COMMIT: take the write lock up front, so read-modify-write never races."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.conn = db.conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.rollback()


def approve_server_config(cfg: ServerConfig, *, fresh: bool = True) -> None:
    """Called by `coffer add`/`coffer import`: the user just chose this launch config, so it is trusted."""
    with Pins.open(new_tools="allow") as pins:
        pins.approve_server(cfg, fresh=fresh)
