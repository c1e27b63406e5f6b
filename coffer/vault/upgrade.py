"""Which vaults this Coffer opens: each file's format, coffer.db's schema, and the one way forward.

An upgrade must lose nothing, and a downgrade must break nothing: a vault written by a newer Coffer is
refused in one line and never rewritten (`NewerVaultError`). Each file is checked where it is read, and
the whole vault (`check_vault`, a few hundred bytes read) before Coffer writes any of it, so a command
never changes one file of a vault whose other file it would then refuse. An older vault is brought
forward here, in one place:

    coffer.toml      `[coffer] format`: absent in 0.1.0's files (read as 1); `REGISTRY_STEPS` bring an
                     older one forward when Coffer next changes the file, which it stamps. A read never
                     writes, so a vault on a read-only ConfigMap still opens.
    JSON files       catalogue.json, secrets.json, members/*.json carry `"version"` (`JSON_VERSIONS`);
                     one newer than this code's is refused.
    coffer.db        each part's migrations (`sqlite_utils.Migrations`, applied on open under one write
                     lock, coffer.vault.database), counted in `MIGRATIONS`; `PRAGMA user_version` is their
                     sum, `DB_SCHEMA` (0: before 0.2.0), so a newer Coffer's file is refused before any
                     part opens it. A migration applied that this code does not know is refused too.

Test data: tests/data/vault-0.1.0 (a vault written by 0.1.0), tests/vault/test_upgrade.py.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coffer.errors import RegistryError

if TYPE_CHECKING:
    from tomlkit.toml_document import TOMLDocument

REGISTRY_FORMAT = 1  # coffer.toml's `[coffer] format` this code reads and writes
FORMAT_NOTE = "the layout of this file, for upgrades (docs/upgrading.md)"
# format N -> N+1 of coffer.toml, applied in order by `stamp_registry` (none yet: 0.1.0's layout is format 1)
REGISTRY_STEPS: dict[int, Callable[[TOMLDocument], None]] = {}
JSON_VERSIONS = {"catalogue.json": 1, "secrets.json": 1, "members": 1}  # the `"version"` each is written with
# coffer.db's migration sets and how many migrations each has: a new migration counts here, which raises
# DB_SCHEMA (tests/vault/test_upgrade.py holds this to the code)
MIGRATIONS = {"coffer.log": 5, "coffer.trust": 2, "coffer.memory": 1}
DB_SCHEMA = sum(MIGRATIONS.values())


class NewerVaultError(RegistryError):
    """A vault file written by a newer Coffer than this one: refused, and left exactly as it is."""

    exit_code = 9
    code = "newer_vault"


def _refuse(path: Path, why: str) -> NewerVaultError:
    from coffer import __version__

    return NewerVaultError(
        f"{path} was written by a newer Coffer ({why}; this is Coffer {__version__}): "
        "upgrade Coffer to open this vault (the file is left as it is)"
    )


def _number(value: object, path: Path, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RegistryError(f"{path}: {what} must be a whole number, not {value!r}")
    return value


# ---------------------------------------------------------------- the whole vault


_TOML_FORMAT = re.compile(r"^\s*\[\s*coffer\s*\][^\[]*?^\s*format\s*=\s*(\d+)", re.M | re.S)
_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*(\d+)')


def check_vault() -> None:
    """Refuse, before Coffer writes any file of the vault, a vault any file of which a newer Coffer
    wrote. Reads coffer.toml's text, the JSON files' first bytes (Coffer writes `"version"` first) and
    coffer.db's header; a file that is missing or unreadable is left to its own reader."""
    from coffer.vault import paths

    registry = paths.registry_path()
    try:
        found = _TOML_FORMAT.search(registry.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        found = None
    if found and int(found[1]) > REGISTRY_FORMAT:
        raise _refuse(registry, f"format {found[1]}, this one reads up to {REGISTRY_FORMAT}")
    for name in ("catalogue.json", "secrets.json"):
        path = paths.data_dir() / name
        try:
            with path.open("rb") as file:
                head = _JSON_HEAD.match(file.read(64))
        except OSError:
            head = None
        if head and int(head[1]) > JSON_VERSIONS[name]:
            raise _refuse(path, f"version {int(head[1])}, this one reads up to {JSON_VERSIONS[name]}")
    db = paths.db_path()
    if db.exists():
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        except sqlite3.Error:
            return
        try:
            check_database(conn, db)
        except sqlite3.Error:
            pass
        finally:
            conn.close()


# ---------------------------------------------------------------- coffer.toml


def registry_format(data: Mapping[str, Any], path: Path) -> int:
    """The format of a parsed coffer.toml (1 when it names none); a newer one is refused."""
    table = data.get("coffer", {})
    if not isinstance(table, Mapping):
        raise RegistryError(f"{path}:1: 'coffer' must be a table")
    found = _number(table.get("format", 1), path, "[coffer] format")
    if found > REGISTRY_FORMAT:
        raise _refuse(path, f"format {found}, this one reads up to {REGISTRY_FORMAT}")
    return found


def stamp_registry(doc: TOMLDocument, path: Path) -> None:
    """Bring a document being written forward to `REGISTRY_FORMAT` and say so in `[coffer] format`."""
    import tomlkit

    found = registry_format(doc, path)
    for step in range(found, REGISTRY_FORMAT):
        REGISTRY_STEPS[step](doc)
    if found == REGISTRY_FORMAT and "format" in doc.get("coffer", {}):
        return
    if "coffer" not in doc:
        doc.add("coffer", tomlkit.table())
    doc["coffer"]["format"] = tomlkit.parse(f"format = {REGISTRY_FORMAT}  # {FORMAT_NOTE}\n")["format"]


# ---------------------------------------------------------------- JSON files


def check_json(data: object, path: Path, kind: str) -> None:
    """Refuse a JSON vault file of `kind` (a `JSON_VERSIONS` key) whose `"version"` is newer than ours."""
    known = JSON_VERSIONS[kind]
    if isinstance(data, dict) and "version" in data:
        found = data["version"]
        if isinstance(found, int) and not isinstance(found, bool) and found > known:
            raise _refuse(path, f"version {found}, this one reads up to {known}")


# ---------------------------------------------------------------- coffer.db


def check_database(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a coffer.db whose schema is newer than `DB_SCHEMA` (a read: nothing is written)."""
    found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if found > DB_SCHEMA:
        raise _refuse(path, f"schema {found}, this one reads up to {DB_SCHEMA}")


def stamp_database(conn: sqlite3.Connection) -> None:
    """Record this code's schema in the file (after `check_database`); a no-op once done."""
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) < DB_SCHEMA:
        conn.execute(f"PRAGMA user_version = {DB_SCHEMA}")


def check_migrations(set_name: str, known: Iterable[str], applied: Iterable[str], path: Path) -> None:
    """Refuse a coffer.db where a migration of `set_name` was applied that this code does not know: a
    newer Coffer's, whose tables this one would misread or, migrating, damage."""
    ours = set(known)
    unknown = [name for name in applied if name not in ours]
    if unknown:
        raise _refuse(path, f"migration {unknown[0]} of {set_name}, unknown to this one")
