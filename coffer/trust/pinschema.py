"""The trust tables in coffer.db (migration set "coffer.trust") and the counter their changes bump.

SQLite rather than a JSON file because several `coffer serve` processes observe listings at once:
`BEGIN IMMEDIATE` makes each observation one serialised read-modify-write, and holds/approvals are
logged in `trust_events` in the same transaction, so a hold is never recorded without its event.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils
    from sqlite_utils import Migrations

TRUST_TABLES = (
    "CREATE TABLE IF NOT EXISTS trust_servers (server TEXT PRIMARY KEY, hash TEXT, definition TEXT, "
    "approved_at REAL, observed_at REAL)",
    "CREATE TABLE IF NOT EXISTS trust_tools (server TEXT NOT NULL, tool TEXT NOT NULL, exposed TEXT, "
    "state TEXT NOT NULL, hash TEXT, definition TEXT, pending_hash TEXT, pending_definition TEXT, "
    "first_seen REAL NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (server, tool))",
    "CREATE TABLE IF NOT EXISTS trust_events (id INTEGER PRIMARY KEY, ts REAL NOT NULL, server TEXT NOT NULL, "
    "tool TEXT, event TEXT NOT NULL, old_hash TEXT, new_hash TEXT)",
)
# A counter every change to the trust tables bumps (triggers, so every writer does, in any process): the
# gateway checks trust on each call, and `PRAGMA data_version` alone changes with every commit to
# coffer.db, the call log's one per call included, which made each call re-read both tables.
TRUST_VERSION = (
    "CREATE TABLE IF NOT EXISTS trust_version (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO trust_version (id, n) VALUES (1, 0)",
    *(
        f"CREATE TRIGGER IF NOT EXISTS {table}_{op.lower()}_version AFTER {op} ON {table} "
        "BEGIN UPDATE trust_version SET n = n + 1 WHERE id = 1; END"
        for table in ("trust_servers", "trust_tools")
        for op in ("INSERT", "UPDATE", "DELETE")
    ),
)


@functools.cache
def migrations() -> Migrations:
    """The trust tables' migrations (built on first use: sqlite_utils costs ~0.2 s to import, which a
    read-only `coffer search` need not pay)."""
    from sqlite_utils import Migrations

    found = Migrations("coffer.trust")

    @found()
    def m0001_trust(db: sqlite_utils.Database) -> None:
        for statement in TRUST_TABLES:
            db.execute(statement)

    @found()
    def m0002_trust_version(db: sqlite_utils.Database) -> None:
        for statement in TRUST_VERSION:
            db.execute(statement)

    return found
