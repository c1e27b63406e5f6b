"""The store of kept results: one file per result, named by its content hash, and an index.

`<data dir>/results/` (0700) holds `<id>.json`, the original tools/call result exactly as the upstream
sent it (re-serialised), mode 0600, and `index.db` (SQLite, 0600): who made it, when, how big, when it
expires. The id is the first 32 hex digits of the file's SHA-256: the same result kept twice is one
file. A result is written in slices, so keeping 50 MB costs one slice of memory on top of the result
already held. `sweep` removes expired results (`[settings] result_keep_days`, default 7) and, oldest
first, those past the size budget (`result_store_mb`, default 1024); coffer.results.kept runs it
whenever a result is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from coffer.errors import NotFoundError, UsageError
from coffer.results.spill import PREFIX as SPILL_PREFIX
from coffer.results.spill import STALE_S as SPILL_STALE_S
from coffer.results.spill import Spilled
from coffer.trust.team import speaking_for
from coffer.vault import paths

DEFAULT_KEEP_DAYS = 7.0
DEFAULT_STORE_MB = 1024.0
URI_PREFIX = "coffer://results/"
ID_RE = re.compile(r"^[0-9a-f]{32}$")
SLICE = 1 << 20  # characters of one long string serialised at a time
_COLUMNS = "id, server, tool, created, expires, bytes, tokens, kind, owner"  # a Kept, in order


@dataclass(frozen=True)
class Kept:
    """One kept result's index row (never its content)."""

    id: str
    server: str
    tool: str
    created: float
    expires: float
    bytes: int
    tokens: int  # counted up to the cap and a little past it: a floor for big results
    kind: str  # text, json, binary or mixed
    owner: str = ""  # the team member it was kept for (coffer.trust.team): only it reads it; "" the vault's owner

    @property
    def uri(self) -> str:
        return URI_PREFIX + self.id

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"uri": self.uri}


def directory() -> Path:
    return paths.ensure_private_dir(paths.data_dir() / "results")


def _db_path() -> Path:
    return directory() / "index.db"


@contextlib.contextmanager
def _index() -> Iterator[Any]:
    import sqlite3

    path = _db_path()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # created private, never widened later
    os.close(fd)
    conn = sqlite3.connect(path, timeout=10)
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS kept (id TEXT PRIMARY KEY, server TEXT NOT NULL, tool TEXT NOT NULL, "
            "created REAL NOT NULL, expires REAL NOT NULL, bytes INTEGER NOT NULL, tokens INTEGER NOT NULL, "
            "kind TEXT NOT NULL)"
        )
        if "owner" not in {row[1] for row in conn.execute("PRAGMA table_info(kept)")}:  # an older store
            with conn:
                conn.execute("ALTER TABLE kept ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
        with conn:
            yield conn
    finally:
        conn.close()


def settings_of(settings: Mapping[str, Any]) -> tuple[float, float]:
    """(days a result is kept, store budget in MB) from `[settings]`; a bad value is one clear error."""
    out = []
    for key, default in (("result_keep_days", DEFAULT_KEEP_DAYS), ("result_store_mb", DEFAULT_STORE_MB)):
        value = settings.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise UsageError(f"settings.{key} must be a positive number, not {value!r}")
        out.append(float(value))
    return out[0], out[1]


def keep(
    result: Mapping[str, Any], server: str, tool: str, tokens: int, kind: str, settings: Mapping[str, Any]
) -> Kept:
    """Write `result` to the store (the same content is one file) and index the row. Kept for a team
    member, it is the member's: its id differs from another member's for the same content, and only
    that member finds it (`get`)."""
    keep_days, _ = settings_of(settings)
    folder = directory()
    tmp = folder / f".tmp-{os.getpid()}-{time.monotonic_ns()}"
    member = speaking_for()
    owner = member.sub if member is not None else ""
    digest = hashlib.sha256(f"member:{owner}\0".encode() if owner else b"")
    size = 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:

            def put(text: str) -> None:
                nonlocal size
                data = text.encode("utf-8", "surrogatepass")
                digest.update(data)
                size += len(data)
                fh.write(text)

            _dump(result, put)
        rid = digest.hexdigest()[:32]
        os.replace(tmp, folder / f"{rid}.json")
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    now = time.time()
    row = Kept(rid, server, tool, now, now + keep_days * 86400.0, size, tokens, kind, owner)
    with _index() as db:
        db.execute("INSERT OR REPLACE INTO kept VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", tuple(asdict(row).values()))
    return row


def _dump(value: Any, put: Any) -> None:
    """`json.dumps(value)` written piece by piece: a long string goes out in slices, never whole twice."""
    if isinstance(value, Spilled) or (isinstance(value, str) and len(value) > SLICE):
        # a spilled string (coffer.results.spill) is read from its file a slice at a time
        slices = (
            value.slices(SLICE)
            if isinstance(value, Spilled)
            else (value[start : start + SLICE] for start in range(0, len(value), SLICE))
        )
        put('"')
        for piece in slices:
            put(json.dumps(piece, ensure_ascii=False)[1:-1])
        put('"')
    elif isinstance(value, dict):
        put("{")
        for n, (key, item) in enumerate(value.items()):
            put(("," if n else "") + json.dumps(str(key), ensure_ascii=False) + ":")
            _dump(item, put)
        put("}")
    elif isinstance(value, list):
        put("[")
        for n, item in enumerate(value):
            if n:
                put(",")
            _dump(item, put)
        put("]")
    else:
        put(json.dumps(value, ensure_ascii=False))


def sweep(budget_mb: float, now: float | None = None, spare: str | None = None) -> list[str]:
    """Remove expired results, then the oldest until the store fits `budget_mb`; returns the ids gone."""
    now = time.time() if now is None else now
    _sweep_spilled(now)
    gone: list[str] = []
    with _index() as db:
        rows = db.execute("SELECT id, expires, bytes FROM kept ORDER BY created").fetchall()
        total = sum(r[2] for r in rows)
        for rid, expires, size in rows:
            over = total > budget_mb * 1024 * 1024
            if rid != spare and (expires <= now or over):
                _remove_file(rid)
                db.execute("DELETE FROM kept WHERE id = ?", (rid,))
                total -= size
                gone.append(rid)
    return gone


def _sweep_spilled(now: float) -> None:
    """Spilled values of a gateway that stopped before it claimed them (killed mid-call)."""
    for path in directory().glob(SPILL_PREFIX + "*"):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mtime < now - 6 * SPILL_STALE_S:
                path.unlink()


def _remove_file(rid: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory() / f"{rid}.json").unlink()


def parse_id(value: str) -> str:
    """A result id from an id or a `coffer://results/<id>` URI; UsageError otherwise."""
    rid = value.removeprefix(URI_PREFIX).strip()
    if not ID_RE.match(rid):
        raise UsageError(f"not a kept result id: {value!r} (expected 32 hex digits or {URI_PREFIX}<id>)")
    return rid


def get(value: str) -> Kept:
    """The index row of a live (unexpired) kept result; NotFoundError when there is none, or when a team
    member asks for a result kept for another."""
    rid = parse_id(value)
    with _index() as db:
        row = db.execute(f"SELECT {_COLUMNS} FROM kept WHERE id = ?", (rid,)).fetchone()
    member = speaking_for()
    stranger = member is not None and row is not None and row[8] != member.sub
    if row is None or stranger or row[4] <= time.time() or not (directory() / f"{rid}.json").exists():
        raise NotFoundError(f"no kept result {rid} (it may have expired: `coffer results list`)")
    return Kept(*row)


def open_kept(value: str) -> tuple[Kept, dict[str, Any]]:
    """A live kept result's index row and the original, as the upstream sent it."""
    kept = get(value)
    with open(directory() / f"{kept.id}.json", encoding="utf-8") as fh:
        data = json.load(fh)
    return kept, data if isinstance(data, dict) else {}


def load(value: str) -> dict[str, Any]:
    """The original result, as the upstream sent it."""
    return open_kept(value)[1]


def listing() -> list[Kept]:
    now = time.time()
    with _index() as db:
        rows = db.execute(f"SELECT {_COLUMNS} FROM kept WHERE expires > ? ORDER BY created DESC", (now,)).fetchall()
    return [Kept(*r) for r in rows]


def remove(value: str) -> Kept:
    kept = get(value)
    _remove_file(kept.id)
    with _index() as db:
        db.execute("DELETE FROM kept WHERE id = ?", (kept.id,))
    return kept


def remove_all() -> int:
    """Every kept result, its file and its index row; the folder is left empty (and the index file gone)."""
    folder = directory()
    count = 0
    for path in folder.iterdir():
        if path.suffix == ".json" or path.name.startswith((".tmp-", SPILL_PREFIX)):
            count += path.suffix == ".json"
            path.unlink(missing_ok=True)
    for name in ("index.db", "index.db-journal", "index.db-wal", "index.db-shm"):
        (folder / name).unlink(missing_ok=True)
    return count
