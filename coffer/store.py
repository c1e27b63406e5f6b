"""coffer.db: the one SQLite file for the invocation log and the vault's memory.

Several `coffer serve` processes (one per agent) and the CLI write at once, so every connection uses
WAL and a busy timeout. Each part owns a named `sqlite_utils.Migrations` set and applies it on open,
so a newer Coffer upgrades an older file in place and an older Coffer never sees half a migration.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from coffer import paths

if TYPE_CHECKING:
    import sqlite_utils

BUSY_TIMEOUT_MS = 10_000


def open_db(path: Path | None = None, *, check_same_thread: bool = True) -> sqlite_utils.Database:
    """Open (creating 0600 if new) coffer.db with WAL and a busy timeout."""
    import sqlite3

    import sqlite_utils

    path = path or paths.db_path()
    paths.ensure_private_dir(path.parent)
    if not path.exists():
        # Create it 0600 from the first byte: it holds call history and notes.
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=check_same_thread)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db = sqlite_utils.Database(conn)
    if db.journal_mode != "wal":
        db.enable_wal()
    conn.execute("PRAGMA synchronous = NORMAL")
    for suffix in ("-wal", "-shm"):
        side = Path(str(path) + suffix)
        if side.exists():
            os.chmod(side, 0o600)
    return db
