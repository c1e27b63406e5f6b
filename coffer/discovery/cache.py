"""What was read from each registry, kept in one SQLite file in the cache dir: the latest version of every
server, so `coffer find` and `coffer__search_tools` work offline and never wait on the network.

A refresh asks only for what changed since the newest `updatedAt` it has (`updated_since`); a deleted
entry leaves the cache. `generation` changes whenever the cached entries do: it keys the ranker's saved
index, so a search over an unchanged cache neither hashes nor re-indexes 30,000 entries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from coffer.discovery.entries import OFFICIAL_META, DiscoveryError, Entry, parse_item

log = logging.getLogger("coffer.discovery")

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    registry TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    short TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (registry, name)
);
CREATE INDEX IF NOT EXISTS entries_short ON entries (short);
CREATE TABLE IF NOT EXISTS synced (
    registry TEXT PRIMARY KEY,
    at REAL NOT NULL,
    since TEXT NOT NULL,
    generation TEXT NOT NULL
);
"""


class Row(NamedTuple):
    """One cached entry as the ranker reads it (the body is parsed only for the hits); a tuple, since
    `find` builds 30,000 of them per run."""

    registry: str
    name: str
    version: str
    short: str
    title: str
    text: str


@dataclass(frozen=True)
class State:
    """A registry's cache: when it was last read, how many entries it holds."""

    registry: str
    synced_at: float | None
    entries: int


def cache_path() -> Path:
    from coffer.vault import paths

    return paths.ensure_private_dir(paths.cache_dir()) / "registries.db"


def _open(path: Path | None = None) -> sqlite3.Connection:
    """The cache, with its schema. One that is not a database (a damaged disk, a file written over) is
    derived data: it is set aside beside itself, said once, and a new one is begun (the next read
    fills it), rather than every `find` and `coffer__search_tools` failing on it."""
    where = path or cache_path()
    conn = sqlite3.connect(where, timeout=10.0)
    try:
        conn.executescript(SCHEMA)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if isinstance(exc, sqlite3.OperationalError):  # locked, busy, read-only: not damage
            raise
        aside = where.with_name(f"{where.name}.unreadable")
        where.replace(aside)
        log.warning(
            "coffer: the registry cache was unreadable (%s): set aside as %s; the next read fills a new one", exc, aside
        )
        conn = sqlite3.connect(where, timeout=10.0)
        conn.executescript(SCHEMA)
    return conn


def store(entries: Iterable[Entry], registry: str, path: Path | None = None) -> int:
    """Keep these entries (latest versions) of `registry`; deleted ones leave. Returns how many changed."""
    changed = 0
    newest = ""
    digest = hashlib.sha256()
    with _open(path) as conn:
        for e in entries:
            newest = max(newest, e.updated_at)
            digest.update(f"{e.name}\0{e.version}\0{e.status}\0".encode())
            if e.status == "deleted":
                changed += conn.execute(
                    "DELETE FROM entries WHERE registry = ? AND name = ?", (registry, e.name)
                ).rowcount
                continue
            body = json.dumps({"server": e.server, "_meta": {OFFICIAL_META: _official(e)}}, separators=(",", ":"))
            row = (registry, e.name, e.version, e.short, e.title, e.text(), e.updated_at, body)
            old = conn.execute(
                "SELECT version, updated_at FROM entries WHERE registry = ? AND name = ?", (registry, e.name)
            ).fetchone()
            if old == (e.version, e.updated_at):
                continue
            conn.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
            changed += 1
        prior = conn.execute("SELECT since, generation FROM synced WHERE registry = ?", (registry,)).fetchone()
        since, generation = prior if prior else ("", "")
        if changed or not prior:
            generation = hashlib.sha256(f"{generation}{digest.hexdigest()}".encode()).hexdigest()[:24]
        conn.execute(
            "INSERT OR REPLACE INTO synced VALUES (?, ?, ?, ?)", (registry, time.time(), max(since, newest), generation)
        )
    return changed


def refresh(registry: str, path: Path | None = None, on_page: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Read what changed in `registry` since the last refresh (everything the first time) into the
    cache; `on_page(n)` is told each page's size (a progress display). Returns (entries changed,
    entries skipped as unreadable); raises DiscoveryError when down."""
    from coffer.discovery.client import RegistryClient

    since = _since(registry, path)
    entries: list[Entry] = []
    skipped = 0
    with RegistryClient(registry) as client:
        for page in client.pages(updated_since=since or None):
            entries.extend(page.entries)
            skipped += page.skipped
            if on_page is not None:
                on_page(len(page.entries) + page.skipped)
    return store(entries, registry, path), skipped


def _since(registry: str, path: Path | None) -> str:
    with _open(path) as conn:
        row = conn.execute("SELECT since FROM synced WHERE registry = ?", (registry,)).fetchone()
    return str(row[0]) if row else ""


def _official(e: Entry) -> dict[str, object]:
    return {"status": e.status, "isLatest": e.is_latest, "updatedAt": e.updated_at}


STALE_S = 24 * 3600.0  # a cache older than this is read again (by `find`, and by a running gateway)


def refresh_wanted(settings: dict[str, object]) -> bool:
    """Whether a running gateway keeps the registry cache fresh: `[settings] registry_refresh = false`
    turns it off (`COFFER_REGISTRY_REFRESH=off` too, for a machine that must not reach the registry)."""
    import os

    if os.environ.get("COFFER_REGISTRY_REFRESH", "").lower() in ("0", "off", "false", "no"):
        return False
    return settings.get("registry_refresh", True) is not False


def stale(registries: Iterable[str], path: Path | None = None) -> list[str]:
    """The registries whose cache is older than STALE_S, or that have none."""
    now = time.time()
    return [s.registry for s in states(registries, path) if s.synced_at is None or now - s.synced_at >= STALE_S]


def states(registries: Iterable[str], path: Path | None = None) -> list[State]:
    with _open(path) as conn:
        out = []
        for reg in registries:
            row = conn.execute("SELECT at FROM synced WHERE registry = ?", (reg,)).fetchone()
            count = conn.execute("SELECT count(*) FROM entries WHERE registry = ?", (reg,)).fetchone()[0]
            out.append(State(reg, float(row[0]) if row else None, int(count)))
    return out


def generation(registries: list[str], path: Path | None = None) -> str:
    """A key that changes whenever any of these registries' cached entries do."""
    marks = ",".join("?" * len(registries))
    with _open(path) as conn:
        gens = conn.execute(
            f"SELECT registry, generation FROM synced WHERE registry IN ({marks}) ORDER BY registry", registries
        ).fetchall()
    return hashlib.sha256(repr(gens).encode()).hexdigest()[:24]


def index_rows(registries: list[str]) -> list[tuple[int, str, str, str]]:
    """(row id, name, short name, text) of every cached entry of these registries, in the table's order (a
    fixed one while `generation` is: the ranker's saved index is keyed by it, and holds the ids and
    names, so a search over an unchanged cache reads none of this)."""
    marks = ",".join("?" * len(registries))
    with _open() as conn:  # `+registry`: a plain scan, faster here than walking the primary key's index
        return conn.execute(
            f"SELECT rowid, name, short, text FROM entries WHERE +registry IN ({marks}) ORDER BY rowid", registries
        ).fetchall()


def name_rows(registries: list[str]) -> list[tuple[str, str, str, str]]:
    """(name, short, title, text) of every cached entry of these registries: what names servers."""
    marks = ",".join("?" * len(registries))
    with _open() as conn:
        return conn.execute(
            f"SELECT name, short, title, text FROM entries WHERE +registry IN ({marks})", registries
        ).fetchall()


def entries_at(ids: list[int]) -> dict[int, Entry]:
    """The entries at these row ids, parsed: what `find` weighs beyond words (publisher, status, kinds)."""
    marks = ",".join("?" * len(ids))
    with _open() as conn:
        found = conn.execute(f"SELECT rowid, registry, body FROM entries WHERE rowid IN ({marks})", ids).fetchall()
    return {rowid: _parse(body, registry) for rowid, registry, body in found}


def published_by(words: list[str], registries: list[str]) -> list[tuple[int, str]]:
    """(row id, name) of the entries whose short name starts with one of `words`: where a maker's own
    server for the product a word names is (`com.gitlab/mcp` is gitlab, `io.github.grafana/mcp-grafana`
    grafana); the caller checks who publishes each. A range over the short-name index, not a scan."""
    if not words or not registries:
        return []
    marks = ",".join("?" * len(registries))
    ranges = " OR ".join("(short >= ? AND short < ?)" for _ in words)
    bounds = [b for w in words for b in (w.lower(), w.lower() + "\uffff")]
    with _open() as conn:
        return conn.execute(
            f"SELECT rowid, name FROM entries WHERE ({ranges}) AND +registry IN ({marks})", [*bounds, *registries]
        ).fetchall()


def matching(terms: list[str], registries: list[str], limit: int = 50) -> list[Row]:
    """Cached entries whose name or text holds one of `terms` (BM25 stems: "slack", "messag"); none
    when nothing was ever cached. Read only: the gateway asks this on the call path."""
    where = cache_path()
    if not terms or not registries or not where.exists():
        return []
    marks = ",".join("?" * len(registries))
    likes = " OR ".join("lower(name || ' ' || short || ' ' || text) LIKE ?" for _ in terms)
    named = " OR ".join("lower(name || ' ' || short) LIKE ?" for _ in terms)
    patterns = [f"%{t.lower()}%" for t in terms]
    with _open(where) as conn:  # those that carry the word in their name first: a Slack server for "slack"
        found = conn.execute(
            f"SELECT registry, name, version, short, title, text FROM entries WHERE registry IN ({marks}) "
            f"AND ({likes}) ORDER BY ({named}) DESC, name LIMIT ?",
            [*registries, *patterns, *patterns, limit],
        ).fetchall()
    return [Row(*r) for r in found]


def entry(registry: str, name: str, path: Path | None = None) -> Entry | None:
    """The cached latest version of `name` in `registry`, parsed."""
    with _open(path) as conn:
        row = conn.execute("SELECT body FROM entries WHERE registry = ? AND name = ?", (registry, name)).fetchone()
    return None if row is None else _parse(row[0], registry)


def holders(short: str, registries: list[str], path: Path | None = None) -> list[tuple[str, str]]:
    """(registry, name) of every cached entry whose short name is `short`: whom a short name may mean."""
    marks = ",".join("?" * len(registries))
    with _open(path) as conn:
        found = conn.execute(
            f"SELECT registry, name FROM entries WHERE short = ? AND registry IN ({marks}) ORDER BY name",
            [short, *registries],
        ).fetchall()
    return [(str(reg), str(name)) for reg, name in found]


def _parse(body: str, registry: str) -> Entry:
    try:
        return parse_item(json.loads(body), registry)
    except (ValueError, DiscoveryError):  # a cache written by another version: refresh rewrites it
        raise DiscoveryError("the registry cache is unreadable: run `coffer find --refresh`") from None
