"""The invocation log's read side: filters, the latest rows, `--tail`, and per-tool figures, for
`coffer log`, `coffer log stats`, the profiles' busiest-first order and the console. Read-only."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coffer.log.calls import COLUMNS, FAILURES, open_log

if TYPE_CHECKING:
    import sqlite_utils


@dataclass(frozen=True)
class Filters:
    server: str | None = None
    tool: str | None = None  # the tool name, or the exposed SERVER__TOOL
    outcomes: tuple[str, ...] = ()
    client: str | None = None  # client name, case-insensitive
    since: float | None = None  # epoch seconds
    member: str | None = None  # a team gateway's member (coffer.trust.team)

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.server:
            clauses.append("server = ?")
            params.append(self.server)
        if self.tool:
            clauses.append("(tool = ? OR server || '__' || tool = ?)")
            params += [self.tool, self.tool]
        if self.outcomes:
            clauses.append(f"outcome IN ({', '.join('?' for _ in self.outcomes)})")
            params += list(self.outcomes)
        if self.client:
            clauses.append("client_name = ? COLLATE NOCASE")
            params.append(self.client)
        if self.since is not None:
            clauses.append("ts >= ?")
            params.append(self.since)
        if self.member:
            clauses.append("member = ?")
            params.append(self.member)
        return (" AND ".join(clauses) or "1"), params


def _as_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    data = dict(zip(COLUMNS, row, strict=True))
    data["time"] = datetime.fromtimestamp(data["ts"], tz=UTC).isoformat(timespec="milliseconds")
    return data


_SELECT = f"SELECT {', '.join(COLUMNS)} FROM calls"


def query(db: sqlite_utils.Database, filters: Filters | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The latest `limit` matching calls, oldest first (like `tail -n`)."""
    where, params = filters.where() if filters else ("1", [])
    rows = db.execute(f"{_SELECT} WHERE {where} ORDER BY ts DESC, id DESC LIMIT ?", [*params, limit]).fetchall()
    return [_as_dict(r) for r in reversed(rows)]


def last_id(db: sqlite_utils.Database) -> int:
    row = db.execute("SELECT max(id) FROM calls").fetchone()
    return int(row[0] or 0)


def tail(
    db: sqlite_utils.Database,
    filters: Filters | None = None,
    *,
    after_id: int | None = None,
    interval: float = 0.5,
    stop: threading.Event | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield matching rows with id > `after_id` (default: the newest now), polling until `stop` is set."""
    stop = stop or threading.Event()
    cursor = last_id(db) if after_id is None else after_id
    where, params = filters.where() if filters else ("1", [])
    while not stop.is_set():
        # Ids grow in commit order (AUTOINCREMENT, serialised writers): reading up to the newest id
        # seen first means rows the filter rejects are never scanned twice and none are skipped.
        newest = last_id(db)
        if newest > cursor:
            sql = f"{_SELECT} WHERE id > ? AND id <= ? AND {where} ORDER BY id"
            for row in db.execute(sql, [cursor, newest, *params]).fetchall():
                yield _as_dict(row)
            cursor = newest
        stop.wait(interval)


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def call_counts(path: Path | None = None) -> dict[tuple[str, str], int]:
    """Calls per (server, tool), all time: the order a profile's cap follows (coffer.gateway.advertise)."""
    db = open_log(path)
    try:
        rows = db.execute("SELECT server, tool, COUNT(*) FROM calls GROUP BY server, tool").fetchall()
    finally:
        db.conn.close()
    return {(str(server), str(tool)): int(count) for server, tool, count in rows}


def stats(db: sqlite_utils.Database, filters: Filters | None = None) -> list[dict[str, Any]]:
    """Per server/tool: calls, failures (error, timeout, refused), error rate, p50/p95 duration and when it
    was last called (epoch seconds); busiest first."""
    where, params = filters.where() if filters else ("1", [])
    groups: dict[tuple[str, str], tuple[list[float], int, float]] = {}
    sql = f"SELECT server, tool, duration_ms, outcome, ts FROM calls WHERE {where} ORDER BY server, tool, duration_ms"
    for server, tool, duration, outcome, ts in db.execute(sql, params):
        durations, failures, last = groups.get((server, tool), ([], 0, 0.0))
        durations.append(duration)
        groups[(server, tool)] = (durations, failures + (outcome in FAILURES), max(last, ts))
    out = [
        {"server": server, "tool": tool, **figures(durations, failures), "last_used": last}
        for (server, tool), (durations, failures, last) in groups.items()
    ]
    return sorted(out, key=lambda s: (-s["count"], s["server"], s["tool"]))


def figures(durations: list[float], failures: int) -> dict[str, Any]:
    """calls, failures, error rate and p50/p95 of one group's sorted durations (ms)."""
    return {
        "count": len(durations),
        "errors": failures,
        "error_rate": failures / len(durations),
        "p50_ms": round(percentile(durations, 50), 3),
        "p95_ms": round(percentile(durations, 95), 3),
    }


def members(db: sqlite_utils.Database, since: float | None = None) -> list[str]:
    """The team members (`serve --http --team`) who called anything since `since`, by name."""
    where, params = ("ts >= ?", [since]) if since is not None else ("1", [])
    sql = f"SELECT DISTINCT member FROM calls WHERE member IS NOT NULL AND {where} ORDER BY member"
    return [row[0] for row in db.execute(sql, params).fetchall()]
