"""The invocation log: one row per gateway call in coffer.db, written off the call path (the queries
behind `coffer log` are in coffer.log.query).

Recording sits on the call path of every `coffer serve` process, so `CallLog.record` only enqueues;
one writer thread per process batches rows into `BEGIN IMMEDIATE` transactions. Several serve
processes share the file (WAL + busy timeout). When the database cannot be written the writer retries
a bounded number of times, then drops the rows with one stderr warning: a log never breaks a call.

Rows hold who, when, which tool, how long and an outcome code. Never arguments, results, env values or
upstream error text: `error_class` is squeezed to a short identifier so a message body cannot slip in.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import re
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlite_utils import Migrations

from coffer.errors import UsageError
from coffer.vault.database import immediate

if TYPE_CHECKING:
    import sqlite_utils

OUTCOMES = ("ok", "error", "timeout", "cancelled", "refused")
# Outcomes counted in a tool's error rate; a cancel is the client's choice, not a failure.
FAILURES = ("error", "timeout", "refused")
DEFAULT_RETENTION_DAYS = 90
PRUNE_EVERY_S = 86_400.0

BATCH_MAX = 500
QUEUE_MAX = 50_000
WRITE_ATTEMPTS = 3
REOPEN_AFTER_S = 5.0
# The writer waits this long after a row before it writes, so a burst's rows share one transaction and
# the writer wakes once per burst, not once per call: per-call rows cost the gateway 0.2-0.35 ms of CPU
# (a thread woken and a transaction each) on the call's own path (bench_http_peers); `coffer log --tail`
# sees a row this much later.
LINGER_S = 0.05
_TEXT_MAX = 200
_ERROR_CLASS = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")

COLUMNS = (
    *("id", "ts", "client_name", "client_version", "server", "tool"),
    *("duration_ms", "outcome", "error_class", "pid", "kept", "result_bytes", "run", "parent", "member"),
)

MIGRATIONS = Migrations("coffer.log")


@MIGRATIONS(name="0001_calls")
def _m0001_calls(db: sqlite_utils.Database) -> None:
    # AUTOINCREMENT: ids never go back, even after pruning every row, so `--tail` can follow by id.
    db.execute(
        """CREATE TABLE calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            client_name TEXT,
            client_version TEXT,
            server TEXT NOT NULL,
            tool TEXT NOT NULL,
            duration_ms REAL NOT NULL,
            outcome TEXT NOT NULL,
            error_class TEXT
        )"""
    )
    db.execute("CREATE INDEX calls_ts ON calls (ts)")


@MIGRATIONS(name="0002_pid_tool_index_meta")
def _m0002_pid_tool_index_meta(db: sqlite_utils.Database) -> None:
    # pid tells the serve processes (one per agent session) apart; old rows keep NULL.
    db.execute("ALTER TABLE calls ADD COLUMN pid INTEGER")
    db.execute("CREATE INDEX calls_server_tool ON calls (server, tool)")
    db.execute("CREATE TABLE log_meta (key TEXT PRIMARY KEY, value TEXT)")


@MIGRATIONS(name="0003_kept_results")
def _m0003_kept_results(db: sqlite_utils.Database) -> None:
    # a result over the cap was kept (coffer.results): its id and size, never its content
    db.execute("ALTER TABLE calls ADD COLUMN kept TEXT")
    db.execute("ALTER TABLE calls ADD COLUMN result_bytes INTEGER")


@MIGRATIONS(name="0004_script_calls")
def _m0004_script_calls(db: sqlite_utils.Database) -> None:
    # a coffer__run row carries its run id; each call its script made names that id as its parent
    db.execute("ALTER TABLE calls ADD COLUMN run TEXT")
    db.execute("ALTER TABLE calls ADD COLUMN parent TEXT")
    db.execute("CREATE INDEX calls_parent ON calls (parent)")


@MIGRATIONS(name="0005_member")
def _m0005_member(db: sqlite_utils.Database) -> None:
    # a team gateway's member (the `sub` of the access token the call came with); NULL for one user
    db.execute("ALTER TABLE calls ADD COLUMN member TEXT")
    db.execute("CREATE INDEX calls_member ON calls (member)")


@dataclass(frozen=True)
class CallRecord:
    """One finished call. `ts` is when it started (epoch seconds)."""

    ts: float
    client_name: str | None
    client_version: str | None
    server: str
    tool: str
    duration_ms: float
    outcome: str  # "ok" | "error" | "timeout" | "cancelled" | "refused"
    error_class: str | None = None  # a short code or class name, never an upstream error body
    kept: str | None = None  # the id of a result kept for being over the cap (coffer.results)
    result_bytes: int | None = None  # that result's size
    run: str | None = None  # a coffer__run call's id (coffer.codemode)
    parent: str | None = None  # a call made by a coffer__run script: that run's id
    member: str | None = None  # `serve --http --team`: who (coffer.trust.team)


def _short(value: object, limit: int = _TEXT_MAX) -> str | None:
    return None if value is None else str(value)[:limit]


def safe_error_class(value: object) -> str | None:
    """Keep an identifier-like code; anything else (a message, a body) becomes "unclassified"."""
    if value is None:
        return None
    text = str(value)
    return text if _ERROR_CLASS.fullmatch(text) else "unclassified"


def _row(rec: CallRecord, pid: int) -> tuple[Any, ...]:
    return (
        float(rec.ts),
        _short(rec.client_name),
        _short(rec.client_version),
        _short(rec.server) or "",
        _short(rec.tool) or "",
        float(rec.duration_ms),
        rec.outcome if rec.outcome in OUTCOMES else "error",
        safe_error_class(rec.error_class),
        pid,
        rec.kept if rec.kept is not None and _KEPT_ID.fullmatch(rec.kept) else None,
        int(rec.result_bytes) if rec.result_bytes is not None else None,
        rec.run if rec.run is not None and _RUN_ID.fullmatch(rec.run) else None,
        rec.parent if rec.parent is not None and _RUN_ID.fullmatch(rec.parent) else None,
        _short(rec.member),
    )


_INSERT = (
    "INSERT INTO calls (ts, client_name, client_version, server, tool, duration_ms, outcome, error_class, pid, "
    "kept, result_bytes, run, parent, member) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_KEPT_ID = re.compile(r"[0-9a-f]{32}")
_RUN_ID = re.compile(r"[0-9a-f]{16}")


def migrate(db: sqlite_utils.Database) -> None:
    """Bring the log's tables up to date (safe with concurrent openers)."""
    from coffer.vault.database import migrate as apply

    apply(db, MIGRATIONS)


def open_log(path: Path | None = None, *, check_same_thread: bool = True) -> sqlite_utils.Database:
    """Open coffer.db with the log schema up to date (the CLI's reader, the writer's connection)."""
    from coffer.vault.database import open_db

    db = open_db(path, check_same_thread=check_same_thread)
    migrate(db)
    return db


def retention_days(settings: dict[str, Any] | None = None) -> float:
    """`[settings] log_retention_days` (default 90; 0 keeps rows forever). Raises UsageError if invalid."""
    if settings is None:
        from coffer.vault import registry

        settings = registry.load().settings
    value = settings.get("log_retention_days", DEFAULT_RETENTION_DAYS)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise UsageError(f"settings.log_retention_days must be a number of days >= 0, not {value!r}")
    return float(value)


def prune(db: sqlite_utils.Database, max_age_days: float, *, now: float | None = None) -> int:
    """Delete rows older than `max_age_days` in short chunks (no long write lock); returns the count."""
    now = time.time() if now is None else now
    deleted = 0
    conn = db.conn
    if max_age_days > 0:
        cutoff = now - max_age_days * 86_400
        while True:
            with immediate(conn):
                cur = conn.execute(
                    "DELETE FROM calls WHERE id IN (SELECT id FROM calls WHERE ts < ? ORDER BY ts LIMIT 5000)",
                    (cutoff,),
                )
            deleted += cur.rowcount
            if cur.rowcount < 5000:
                break
        with immediate(conn):
            conn.execute("INSERT OR REPLACE INTO log_meta (key, value) VALUES ('last_prune', ?)", (str(now),))
    return deleted


def prune_if_due(db: sqlite_utils.Database, max_age_days: float, *, now: float | None = None) -> int:
    """Prune at most once a day (checked on each writer open)."""
    now = time.time() if now is None else now
    row = db.execute("SELECT value FROM log_meta WHERE key = 'last_prune'").fetchone()
    if row is not None and now - float(row[0]) < PRUNE_EVERY_S:
        return 0
    return prune(db, max_age_days, now=now)


_FLUSH = object()
_STOP = object()


class CallLog:
    """Per-process recorder: `record()` enqueues, a daemon thread writes batches."""

    def __init__(self, path: Path | None, retention: float | None) -> None:
        self.path = path
        self._retention = retention
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_MAX)
        self._hurry = threading.Event()  # a flush or close waits: no lingering
        self._closed = False
        self._warned = False
        self._pid = os.getpid()
        self.written = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="coffer-calllog", daemon=True)

    @classmethod
    def open(cls, path: Path | None = None, *, retention_days: float | None = None) -> CallLog:
        """Start the writer. Never raises: an unusable database is reported once, and rows are dropped."""
        calllog = cls(path, retention_days)
        calllog._thread.start()
        atexit.register(calllog.close)
        return calllog

    def record(self, rec: CallRecord) -> None:
        """Queue one row; never blocks and never raises."""
        try:
            if self._closed:
                self.dropped += 1
                return
            self._queue.put_nowait(rec)
        except queue.Full:
            self.dropped += 1
            self._warn("writer is behind, queue full")
        except Exception:
            self.dropped += 1

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every row queued so far is written (or dropped); False on timeout."""
        if not self._thread.is_alive():
            return self._queue.empty()
        done = threading.Event()
        self._hurry.set()
        try:
            self._queue.put((_FLUSH, done), timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flush and stop the writer; later `record()` calls are dropped."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        if self._thread.is_alive():
            self._hurry.set()
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=timeout)
            self._thread.join(timeout)

    # -- writer thread -------------------------------------------------------------------------

    def _warn(self, why: str) -> None:
        if self._warned:
            return
        self._warned = True
        with contextlib.suppress(Exception):
            sys.stderr.write(f"coffer: warning: invocation log unavailable ({why}); dropping call rows\n")
            sys.stderr.flush()

    def _run(self) -> None:
        db: sqlite_utils.Database | None = None
        retry_open_at = 0.0
        stop = False
        while not stop:
            batch = [self._queue.get()]
            if isinstance(batch[0], CallRecord):  # a burst's rows gather (LINGER_S)
                self._hurry.wait(LINGER_S)
            self._hurry.clear()
            while len(batch) < BATCH_MAX:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            rows = [_row(item, self._pid) for item in batch if isinstance(item, CallRecord)]
            if rows:
                if db is None and time.monotonic() >= retry_open_at:
                    db = self._connect()
                    if db is None:
                        retry_open_at = time.monotonic() + REOPEN_AFTER_S
                if db is None or not self._write(db, rows):
                    self.dropped += len(rows)
                    if db is not None:
                        with contextlib.suppress(Exception):
                            db.conn.close()
                        db = None
                        retry_open_at = time.monotonic() + REOPEN_AFTER_S
            for item in batch:
                if isinstance(item, tuple) and item[0] is _FLUSH:
                    item[1].set()
                stop = stop or item is _STOP
        if db is not None:
            with contextlib.suppress(Exception):
                db.conn.close()

    def _connect(self) -> sqlite_utils.Database | None:
        try:
            db = open_log(self.path)
        except Exception as exc:
            self._warn(f"{type(exc).__name__}: {exc}")
            return None
        try:
            # An unreadable setting skips pruning: guessing the default could delete rows the user keeps.
            days = retention_days() if self._retention is None else self._retention
            prune_if_due(db, days)
        except Exception:
            pass  # retention is housekeeping; the next open tries again
        return db

    def _write(self, db: sqlite_utils.Database, rows: list[tuple[Any, ...]]) -> bool:
        conn = db.conn
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with immediate(conn):
                    conn.executemany(_INSERT, rows)
                self.written += len(rows)
                return True
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.rollback()
                if attempt == WRITE_ATTEMPTS - 1:
                    self._warn(f"{type(exc).__name__}: {exc}")
                else:
                    time.sleep(0.05 * 2**attempt)
        return False
