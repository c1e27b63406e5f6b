"""Usage: `coffer log stats` (calls, errors, p50/p95, last used, listed tools never called) and
`coffer profile prune NAME --unused-for 30d` with `--undo`, on a real vault: coffer.toml, the catalogue
snapshot and the invocation log in a temporary COFFER_HOME.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from coffer.log.calls import CallLog, CallRecord
from coffer.manage import servers
from coffer.vault import catalogue, registry
from tests.conftest import run_cli

DAY = 86400.0


def vault() -> None:
    for name, tools in (("git", ["status", "commit", "push"]), ("web", ["fetch", "screenshot"])):
        servers.add_server(registry.ServerConfig(name=name, command="true"))
        catalogue.save_server(name, tools=[{"name": t, "inputSchema": {"type": "object"}} for t in tools])


def calls(*rows: tuple[str, str, float, str, float]) -> None:
    log = CallLog.open()
    for server, tool, age_days, outcome, ms in rows:
        log.record(CallRecord(time.time() - age_days * DAY, "claude-code", "2", server, tool, ms, outcome, None))
    log.close()


def test_log_stats_shows_calls_last_use_and_tools_never_called(coffer_home: Path) -> None:
    vault()
    calls(("git", "status", 1, "ok", 10.0), ("git", "status", 2, "error", 30.0), ("web", "fetch", 40, "ok", 5.0))
    runner = CliRunner()
    shown: Any = run_cli(runner, "log", "stats", "--json")
    data = json.loads(shown.stdout)
    status = next(r for r in data["stats"] if r["tool"] == "status")
    assert status["count"] == 2 and status["errors"] == 1 and status["p50_ms"] == 20.0
    assert time.time() - status["last_used"] < 1.1 * DAY
    assert {t["name"] for t in data["never_called"]} == {"git__commit", "git__push", "web__screenshot"}
    recent: Any = run_cli(runner, "log", "stats", "--since", "30d", "--json")
    assert "web__fetch" in {t["name"] for t in json.loads(recent.stdout)["never_called"]}  # 40 days ago
    table: Any = run_cli(runner, "log", "stats", "--since", "30d")
    assert "listed, never called since 30d (4)" in " ".join(table.stdout.split())


def test_prune_writes_a_profile_of_the_tools_used_and_undo_restores_it(coffer_home: Path) -> None:
    vault()
    calls(("git", "status", 1, "ok", 10.0), ("web", "fetch", 3, "ok", 5.0), ("git", "push", 45, "ok", 9.0))
    runner = CliRunner()
    registry.add_profile(registry.Profile(name="work", max_tools=30, servers=["git", "web"], pinned=["git__commit"]))
    before = (coffer_home / "coffer.toml").read_text()
    pruned: Any = run_cli(runner, "profile", "prune", "work", "--unused-for", "30d", "--json")
    data = json.loads(pruned.stdout)
    assert data["kept"] == ["git__status", "web__fetch"]
    assert data["left_out"] == ["git__commit", "git__push", "web__screenshot"] and not data["created"]
    work = registry.load().profile("work")
    assert work.tools == ["git__status", "web__fetch"] and work.pinned == ["git__commit"] and work.max_tools == 30
    shown: Any = run_cli(runner, "profile", "show", "work", "--json")
    advertised = json.loads(shown.stdout)["profile"]["advertised_tools"]
    assert {"git__status", "web__fetch", "git__commit"} <= set(advertised) and "git__push" not in advertised
    run_cli(runner, "profile", "prune", "work", "--undo")
    assert (coffer_home / "coffer.toml").read_text() == before  # exactly as it was
    again: Any = run_cli(runner, "profile", "prune", "work", "--undo", code=3)
    assert "no prune to undo" in again.stderr


def test_prune_makes_a_new_profile_and_refuses_to_leave_nothing(coffer_home: Path) -> None:
    vault()
    runner = CliRunner()
    before = (coffer_home / "coffer.toml").read_text()
    empty: Any = run_cli(runner, "profile", "prune", "fresh", "--unused-for", "30d", code=2)
    assert "pruning would leave nothing" in empty.stderr and (coffer_home / "coffer.toml").read_text() == before
    calls(("web", "screenshot", 0.5, "ok", 50.0))
    table: Any = run_cli(runner, "profile", "prune", "fresh", "--unused-for", "7d")
    out = " ".join(table.stdout.split()) + " ".join(table.stderr.split())
    assert "git__status" in out and "undo with `coffer profile prune fresh --undo`" in out
    assert registry.load().profile("fresh").tools == ["web__screenshot"]
    run_cli(runner, "profile", "prune", "fresh", "--undo")
    assert "fresh" not in registry.load().profiles
    bad: Any = run_cli(runner, "profile", "prune", "fresh", "--unused-for", "soon", code=2)
    assert "invalid --unused-for 'soon'" in bad.stderr
    both: Any = run_cli(runner, "profile", "prune", "fresh", code=2)
    assert "--unused-for DURATION or --undo" in both.stderr
