"""Upgrades lose nothing: a vault written by Coffer 0.1.0 (tests/data/vault-0.1.0, recorded by its own
code) opens in this one with every server, secret, pin, profile, note and log row; and a vault written by
a newer Coffer than this one is refused in one line and left byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tomllib
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "vault-0.1.0"
FILES = ("coffer.toml", "secrets.json", "catalogue.json", "coffer.db")


@pytest.fixture
def old_vault(coffer_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the 0.1.0 vault as this test's COFFER_HOME (its secrets in the vault's file)."""
    coffer_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(DATA / name, coffer_home / name)
        (coffer_home / name).chmod(0o600)
    monkeypatch.setenv("COFFER_SECRETS_BACKEND", "file")
    return coffer_home


def cli_run(runner: Any, *args: str, code: int = 0, input: str | None = None) -> Any:
    """The real Typer app, in process (as tests.conftest.run_cli, with stdin)."""
    from coffer.cli import app

    result = runner.invoke(app, list(args), input=input, catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}\nstdout:{result.stdout}\nstderr:{result.stderr}"
    return result


def expected() -> dict[str, Any]:
    """What 0.1.0's own code read back from the vault it wrote (make.sh)."""
    data: dict[str, Any] = json.loads((DATA / "expected.json").read_text())
    return data


def test_every_server_secret_pin_profile_and_log_row_is_there_after_the_upgrade(old_vault: Path) -> None:
    from coffer.log.calls import open_log
    from coffer.log.query import query
    from coffer.memory import knowledge
    from coffer.trust import secrets
    from coffer.trust.pinning import Pins
    from coffer.vault import catalogue, registry, upgrade

    want = expected()
    reg = registry.load()
    assert {
        name: {
            "enabled": cfg.enabled,
            "command": cfg.command,
            "url": cfg.url,
            "disabled_tools": sorted(cfg.disabled_tools),
        }
        for name, cfg in reg.servers.items()
    } == want["servers"]
    notes, remote = reg.servers["notes"], reg.servers["remote"]
    assert (notes.prefix, notes.env, notes.timeout) == ("nb", {"TOKEN": "${secret:api_token}"}, 30.0)
    assert remote.headers == {"Authorization": "Bearer ${secret:other.key}"}
    assert sorted(reg.profiles) == want["profiles"]
    ci = reg.profiles["ci"]
    assert (ci.servers, ci.pinned, ci.max_tools, reg.profiles["search-only"].mode) == (
        ["demo"],
        ["demo__echo"],
        8,
        "search",
    )
    assert {s.name: secrets.resolve(s.name) for s in secrets.list_secrets()} == want["secrets"]
    snap = catalogue.load_snapshot()
    assert snap is not None
    assert {n: sorted(t["name"] for t in e.tools) for n, e in snap.servers.items()} == want["snapshot"]

    # Opening each part brings its tables forward, as Coffer does on use.
    pins = Pins.open()
    try:
        approved = {r[0] for r in want["rows"]["trust_servers"] if r[3] is not None}  # (server, hash, def, at, ..)
        assert approved >= {"demo", "notes"}
        # launch configs approved under 0.1.0 stay approved: the upgrade holds no server for review
        assert {n for n in approved if pins.server_state(reg.servers[n]) == "approved"} == approved
        assert pins.held() == []
    finally:
        pins.close()
    log = open_log()
    try:
        rows = query(log, limit=100)
        assert sorted((r["server"], r["tool"], r["outcome"]) for r in rows) == sorted(
            (r[4], r[5], r[7]) for r in want["rows"]["calls"]
        )
    finally:
        log.conn.close()
    assert [(n.text, n.tags) for n in knowledge.list_notes()] == [
        (row[1], json.loads(row[2])) for row in want["rows"]["memory_notes"]
    ]

    # Every row of every table 0.1.0 wrote is there as it was (columns a migration adds come after).
    db = sqlite3.connect(old_vault / "coffer.db")
    try:
        for table, old_rows in want["rows"].items():
            new_rows = [list(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY rowid")]
            assert [r[: len(o)] for r, o in zip(new_rows, old_rows, strict=False)] == old_rows, table
            assert len(new_rows) == len(old_rows), table
        assert db.execute("PRAGMA user_version").fetchone()[0] == upgrade.DB_SCHEMA
    finally:
        db.close()


def test_the_cli_reads_the_old_vault_and_writes_it_forward(old_vault: Path, cli: Any) -> None:
    from coffer.vault import registry, upgrade

    listed = json.loads(cli_run(cli, "list", "--json").stdout)
    assert {s["name"] for s in listed["servers"]} == set(expected()["servers"])
    calls = json.loads(cli_run(cli, "log", "--json").stdout)["calls"]
    assert len(calls) == len(expected()["rows"]["calls"])
    assert (old_vault / "coffer.toml").read_bytes() == (DATA / "coffer.toml").read_bytes()  # reads never write

    cli_run(cli, "enable", "idle")  # the first write stamps the format, and keeps the rest of the file
    text = (old_vault / "coffer.toml").read_text()
    assert tomllib.loads(text)["coffer"]["format"] == upgrade.REGISTRY_FORMAT
    old_lines = (DATA / "coffer.toml").read_text().splitlines()
    assert [line for line in old_lines if line not in text.splitlines()] == ["enabled = false"]
    assert set(registry.load().servers) == set(expected()["servers"])

    cli_run(cli, "secret", "set", "third", input="3")
    stored = json.loads((old_vault / "secrets.json").read_text())
    assert stored["version"] == 1 and set(stored["secrets"]) == {*expected()["secrets"], "third"}


def _digests(home: Path) -> dict[str, str]:
    """Each file's bytes, and what coffer.db's write-ahead log holds (a write not yet in the file)."""
    found = {name: hashlib.sha256((home / name).read_bytes()).hexdigest() for name in FILES}
    wal = home / "coffer.db-wal"
    found["wal"] = hashlib.sha256(wal.read_bytes()).hexdigest() if wal.exists() and wal.stat().st_size else ""
    return found


def _newer_toml(home: Path) -> None:
    path = home / "coffer.toml"
    path.write_text(path.read_text() + "\n[coffer]\nformat = 2\n")


def _newer_schema(home: Path) -> None:
    from coffer.vault import upgrade

    with sqlite3.connect(home / "coffer.db") as db:
        db.execute(f"PRAGMA user_version = {upgrade.DB_SCHEMA + 1}")
    db.close()


def _newer_migration(home: Path) -> None:
    """A migration this code does not know in a set it does (a newer Coffer's column), the schema number
    not raised: refused by that part, before it writes."""
    with sqlite3.connect(home / "coffer.db") as db:
        db.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('coffer.log', '0099_from_the_future', '2099-01-01 00:00:00+00:00')"
        )
        db.execute("ALTER TABLE calls ADD COLUMN future TEXT")
    db.close()


def _newer_json(name: str) -> Any:
    def make(home: Path) -> None:
        path = home / name
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "version": 2}))

    return make


NEWER = {
    "coffer.toml format": (
        _newer_toml,
        [["list"], ["add", "x", "--no-probe", "--", "echo"], ["enable", "idle"], ["secret", "set", "x"], ["log"]],
    ),
    "coffer.db schema": (_newer_schema, [["log"], ["memory", "add", "a note"], ["secret", "set", "x"]]),
    "coffer.db migration": (_newer_migration, [["log"], ["log", "stats"]]),
    "secrets.json version": (_newer_json("secrets.json"), [["secret", "list"], ["secret", "set", "x"]]),
    "catalogue.json version": (_newer_json("catalogue.json"), [["search", "echo"], ["refresh", "demo"], ["log"]]),
}


@pytest.mark.parametrize("what", list(NEWER))
def test_a_newer_coffers_vault_is_refused_in_one_line_and_never_rewritten(what: str, old_vault: Path, cli: Any) -> None:
    make, commands = NEWER[what]
    make(old_vault)
    before = _digests(old_vault)
    for args in commands:
        result = cli_run(cli, *args, code=9, input="value")
        message = result.stderr.strip()
        assert "\n" not in message and "was written by a newer Coffer" in message, message
        assert "upgrade Coffer" in message
        assert _digests(old_vault) == before, f"{what}: `coffer {' '.join(args)}` changed the vault"


def test_the_schema_counts_every_migration_of_the_code() -> None:
    """`upgrade.MIGRATIONS` is what raises coffer.db's schema number: it must count each part's migrations,
    or an older Coffer would open a file with tables it does not know."""
    from coffer.log.calls import MIGRATIONS as LOG
    from coffer.memory.knowledge import MIGRATIONS as MEMORY
    from coffer.trust.pinschema import migrations
    from coffer.vault import upgrade

    counted = {m.name: len(m._migrations) for m in (LOG, migrations(), MEMORY)}
    assert counted == upgrade.MIGRATIONS
    assert sum(counted.values()) == upgrade.DB_SCHEMA
