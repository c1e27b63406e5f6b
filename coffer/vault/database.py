"""coffer.db: the one SQLite file for the invocation log and the vault's memory.

Several `coffer serve` processes (one per agent) and the CLI write at once, so every connection uses
WAL and a busy timeout. Each part owns a named `sqlite_utils.Migrations` set and applies it on open,
so a newer Coffer upgrades an older file in place and an older Coffer never sees half a migration; a
file a newer Coffer wrote is refused before anything is written to it (coffer.vault.upgrade).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from coffer.errors import CofferError
from coffer.vault import paths, upgrade

if TYPE_CHECKING:
    import sqlite_utils
    from sqlite_utils import Migrations

BUSY_TIMEOUT_MS = 10_000


def open_db(path: Path | None = None, *, check_same_thread: bool = True) -> sqlite_utils.Database:
    """Open (creating 0600 if new) coffer.db with WAL and a busy timeout."""
    import sqlite_utils

    path = path or paths.db_path()
    paths.ensure_private_dir(path.parent)
    if not path.exists():
        # Create it 0600 from the first byte: it holds call history and notes.
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=check_same_thread)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        upgrade.check_database(conn, path)  # before the first write: a newer Coffer's file stays as it is
        upgrade.check_vault()  # and so does the rest of a vault a newer Coffer wrote
        db = sqlite_utils.Database(conn)
        if db.journal_mode != "wal":
            db.enable_wal()
        conn.execute("PRAGMA synchronous = NORMAL")
    except upgrade.NewerVaultError:
        conn.close()
        raise
    except sqlite3.DatabaseError as exc:
        conn.close()
        if isinstance(exc, sqlite3.OperationalError):  # locked, busy, read-only: not damage
            raise
        raise CofferError(  # the user's data: never replaced behind their back
            f"{path} cannot be read ({exc}): it holds the call log, the memory and the tools' pins, so "
            "Coffer leaves it as it is; restore it from a backup, or move it aside to begin a new one"
        ) from None
    for suffix in ("-wal", "-shm"):
        side = Path(str(path) + suffix)
        if side.exists():
            os.chmod(side, 0o600)
    return db


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction that takes the lock up front (waiting out busy_timeout), not mid-way.

    Every read-modify-write in coffer.db goes through this, so concurrent `coffer serve` processes queue
    instead of failing with "database is locked" when a deferred transaction tries to upgrade.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.rollback()
        raise
    conn.execute("COMMIT")


def migrate(db: sqlite_utils.Database, migrations: Migrations) -> None:
    """Apply a part's pending migrations under one write lock.

    sqlite-utils' `Migrations.apply` is not safe when two processes open a fresh file at once (a
    duplicate migration record, or "database is locked" while the other creates its tables), so apply
    re-checks under `BEGIN IMMEDIATE`, retrying until the busy timeout runs out.
    """
    # the names this code knows (sqlite-utils lists them only privately); one it does not is a newer Coffer's
    known = [m.name for m in migrations._migrations]
    upgrade.check_migrations(migrations.name, known, [m.name for m in migrations.applied(db)], _path(db))
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while migrations.pending(db):
        try:
            with immediate(db.conn):
                migrations.apply(db)  # re-reads what is applied now that we hold the lock
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    if db.conn.execute("PRAGMA user_version").fetchone()[0] < upgrade.DB_SCHEMA:
        with immediate(db.conn):
            upgrade.stamp_database(db.conn)


def _path(db: sqlite_utils.Database) -> Path:
    """The file `db` is open on (for messages)."""
    row = db.conn.execute("PRAGMA database_list").fetchone()
    return Path(row[2]) if row and row[2] else paths.db_path()
