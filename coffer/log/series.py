"""The log over time and per server, for the console's charts: calls and failures per time bucket, and
each server's p50/p95 and errors. Read-only queries over the same `calls` table `coffer log stats` reads."""

from __future__ import annotations

import math
from typing import Any

import sqlite_utils

from coffer.log.calls import FAILURES
from coffer.log.query import Filters, figures

# Bucket widths a chart may use, in seconds: the smallest that gives at most `buckets` bars wins.
WIDTHS = (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 86400, 7 * 86400)


def timeline(db: sqlite_utils.Database, filters: Filters, until: float, buckets: int = 48) -> dict[str, Any]:
    """Calls and failures per bucket from `filters.since` (else the first call) to `until`, oldest first,
    every bucket present (a gap is a zero, not a missing bar)."""
    where, params = filters.where()
    first = filters.since
    if first is None:
        row = db.execute(f"SELECT MIN(ts) FROM calls WHERE {where}", params).fetchone()
        first = float(row[0]) if row and row[0] is not None else until - 3600
    span = max(until - first, 1.0)
    width = next((w for w in WIDTHS if span / w <= buckets), WIDTHS[-1])
    start = math.floor(first / width) * width
    count = max(1, math.ceil((until - start) / width))
    points = [{"start": start + i * width, "calls": 0, "failures": 0} for i in range(count)]
    sql = f"SELECT CAST((ts - ?) / ? AS INTEGER) AS b, COUNT(*), SUM(outcome IN ({','.join('?' * len(FAILURES))})) "
    sql += f"FROM calls WHERE {where} GROUP BY b"
    for bucket, calls, failures in db.execute(sql, [start, width, *FAILURES, *params]):
        if 0 <= bucket < count:
            points[bucket]["calls"], points[bucket]["failures"] = int(calls), int(failures or 0)
    return {"bucket_s": width, "points": points}


def by_server(db: sqlite_utils.Database, filters: Filters) -> list[dict[str, Any]]:
    """Per server: calls, failures, error rate and p50/p95 duration; busiest first."""
    where, params = filters.where()
    groups: dict[str, tuple[list[float], int]] = {}
    sql = f"SELECT server, duration_ms, outcome FROM calls WHERE {where} ORDER BY server, duration_ms"
    for server, duration, outcome in db.execute(sql, params):
        durations, failures = groups.setdefault(server, ([], 0))
        durations.append(duration)
        groups[server] = (durations, failures + (outcome in FAILURES))
    out = [{"server": server, **figures(durations, failures)} for server, (durations, failures) in groups.items()]
    return sorted(out, key=lambda s: (-s["count"], s["server"]))
