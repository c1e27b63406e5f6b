"""`coffer log` and `coffer log stats` through the real Typer app (and one real `--tail` subprocess)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from coffer.log import calls as log
from coffer.log.calls import CallLog, CallRecord
from tests.conftest import run_cli, subprocess_env
from tests.log.test_log import rec, write


def json_lines(text: str) -> list[dict[str, Any]]:
    """Rows from `--json` output: one document (`calls` or `stats`), or JSON Lines from `--tail --json`."""
    try:
        doc = json.loads(text)
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    assert doc["version"] == 1
    return doc["calls"] if "calls" in doc else doc["stats"]


def test_json_is_one_document_even_when_empty(cli: CliRunner) -> None:
    assert json.loads(run_cli(cli, "log", "--json").stdout) == {"version": 1, "calls": []}  # type: ignore[attr-defined]
    empty = {"version": 1, "stats": [], "never_called": []}
    assert json.loads(run_cli(cli, "log", "stats", "--json").stdout) == empty  # type: ignore[attr-defined]


@pytest.fixture
def filled(coffer_home: Path) -> Path:
    now = time.time()
    path = coffer_home / "coffer.db"
    write(
        path,
        rec("search_issues", ts=now - 7200, client_name="Claude-Code", duration_ms=10.0),
        rec("get_issue", ts=now - 3000, client_name="codex", outcome="error", error_class="McpError"),
        rec("search_tools", server="coffer", ts=now - 600, client_name="codex", outcome="timeout"),
        rec("search_issues", ts=now - 60, client_name="cursor", outcome="refused", duration_ms=30.0),
    )
    return path


def tools(result: Any) -> list[str]:
    return [r["tool"] for r in json_lines(result.stdout)]


def test_empty_log_says_so(cli: CliRunner) -> None:
    result = run_cli(cli, "log")
    assert result.stdout == "" and "no calls recorded yet" in result.stderr


def test_latest_calls_as_a_table_oldest_first(cli: CliRunner, filled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # rich folds cells to fit the terminal; keep names whole here
    out = run_cli(cli, "log").stdout
    for text in ("search_issues", "get_issue", "McpError", "refused", "codex", "cursor"):
        assert text in out
    assert out.index("get_issue") < out.index("refused")
    limited = run_cli(cli, "log", "--limit", "1", "--json")
    assert tools(limited) == ["search_issues"] and json_lines(limited.stdout)[0]["outcome"] == "refused"


def test_json_lines_carry_every_column(cli: CliRunner, filled: Path) -> None:
    rows = json_lines(run_cli(cli, "log", "--json").stdout)
    assert len(rows) == 4
    assert set(rows[0]) == {*log.COLUMNS, "time"}
    assert rows[1]["error_class"] == "McpError" and rows[1]["client_version"] == "2.1.0"
    assert datetime.fromisoformat(rows[0]["time"]).timestamp() == pytest.approx(rows[0]["ts"], abs=0.001)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--server", "coffer"], ["search_tools"]),
        (["--tool", "search_issues"], ["search_issues", "search_issues"]),
        (["--tool", "github__get_issue"], ["get_issue"]),
        (["--outcome", "error,timeout"], ["get_issue", "search_tools"]),
        (["--outcome", "ok"], ["search_issues"]),
        (["--client", "claude-code"], ["search_issues"]),  # case-insensitive
        (["--since", "1h"], ["get_issue", "search_tools", "search_issues"]),
        (["--since", "15m", "--server", "github"], ["search_issues"]),
        (["--client", "nobody"], []),
    ],
)
def test_filters(cli: CliRunner, filled: Path, args: list[str], expected: list[str]) -> None:
    assert tools(run_cli(cli, "log", "--json", *args)) == expected


def test_since_accepts_an_iso_time(cli: CliRunner, filled: Path) -> None:
    iso = datetime.fromtimestamp(time.time() - 1200).isoformat(timespec="seconds")
    assert tools(run_cli(cli, "log", "--json", "--since", iso)) == ["search_tools", "search_issues"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "banana"], "invalid --since 'banana'"),
        (["--since", "-1h"], "invalid --since '-1h'"),
        (["--outcome", "nope"], "invalid --outcome 'nope'"),
        (["--outcome", ","], "invalid --outcome ','"),
        (["--limit", "-1"], "invalid --limit -1"),
        (["--tail", "--interval", "0"], "invalid --interval 0"),
        (["stats", "--outcome", "nope"], "invalid --outcome 'nope'"),
        (["stats", "--since", "yesterday"], "invalid --since 'yesterday'"),
    ],
)
def test_bad_values_give_one_line_and_exit_2(cli: CliRunner, filled: Path, args: list[str], message: str) -> None:
    result = run_cli(cli, "log", *args, code=2)
    assert result.stdout == ""
    assert result.stderr.startswith(f"coffer: error: {message}") and result.stderr.count("\n") == 1


def test_stats_table_and_json(cli: CliRunner, filled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    table = run_cli(cli, "log", "stats").stdout
    assert "search_issues" in table and "50.0%" in table and "p95 ms" in table
    rows = json_lines(run_cli(cli, "log", "stats", "--json").stdout)
    assert rows[0].pop("last_used") > 0
    assert rows[0] == {
        "server": "github",
        "tool": "search_issues",
        "count": 2,
        "errors": 1,
        "error_rate": 0.5,
        "p50_ms": 20.0,
        "p95_ms": 29.0,
    }
    assert {(r["server"], r["tool"]) for r in rows[1:]} == {("github", "get_issue"), ("coffer", "search_tools")}
    # the group's filters reach the sub-command too
    assert [r["tool"] for r in json_lines(run_cli(cli, "log", "--since", "30m", "stats", "--json").stdout)] == [
        "search_tools",
        "search_issues",
    ]


def test_each_log_command_applies_the_retention_setting(cli: CliRunner, coffer_home: Path) -> None:
    write(coffer_home / "coffer.db", rec("ancient", ts=time.time() - 10 * 86_400), rec("fresh"))
    assert tools(run_cli(cli, "log", "--json")) == ["ancient", "fresh"]  # default: 90 days
    (coffer_home / "coffer.toml").write_text("[settings]\nlog_retention_days = 5\n")
    assert tools(run_cli(cli, "log", "--json")) == ["fresh"]
    (coffer_home / "coffer.toml").write_text("[settings]\nlog_retention_days = 'forever'\n")
    result = run_cli(cli, "log", code=2)
    assert "settings.log_retention_days must be a number" in result.stderr


def test_a_broken_registry_never_prunes_but_the_log_still_shows(cli: CliRunner, coffer_home: Path) -> None:
    path = coffer_home / "coffer.db"
    write(path, rec("ancient", ts=time.time() - 200 * 86_400))
    (coffer_home / "coffer.toml").write_text("[settings\nlog_retention_days = 365\n")
    calllog = CallLog.open(path)  # retention from the (unreadable) registry: skip, never guess 90
    calllog.record(rec("fresh"))
    calllog.close()
    result = run_cli(cli, "log", "--json")
    assert tools(result) == ["ancient", "fresh"]
    assert "warning: not pruning the log" in result.stderr


def test_tail_picks_up_a_row_written_by_another_process(coffer_home: Path) -> None:
    path = coffer_home / "coffer.db"
    write(path, rec("first"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "coffer", "log", "--tail", "--json", "--limit", "1", "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # faulthandler: should Ctrl-C ever fail to end it, the SIGABRT below prints where it is stuck
        env=subprocess_env(coffer_home) | {"PYTHONFAULTHANDLER": "1"},
        # as a terminal runs it: a suite started in the background (`cmd &`) ignores SIGINT, and an
        # ignored SIGINT is inherited, so Python would never turn Ctrl-C into KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue[str] = queue.Queue()
    errors: list[str] = []
    assert proc.stdout is not None and proc.stderr is not None
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    drain = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()  # read as it comes: a full stderr pipe must never be what keeps it alive
    try:
        assert json.loads(lines.get(timeout=20))["tool"] == "first"  # the tail is up and has printed its backlog
        write(path, rec("second", outcome="cancelled"))
        row = json.loads(lines.get(timeout=20))
        assert (row["tool"], row["outcome"], row["pid"]) == ("second", "cancelled", os.getpid())
        proc.send_signal(signal.SIGINT)  # Ctrl-C ends it cleanly
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=10)
            drain.join(5)
            pytest.fail("coffer log --tail did not end on SIGINT within 20 s; its stacks:\n" + "".join(errors))
        drain.join(5)
        assert code == 0, "".join(errors)
        assert "".join(errors) == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_canary_secret_never_reaches_the_database_or_output(
    cli: CliRunner, coffer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway's call path as it records today: arguments and env exist, only metadata is passed on."""
    secret = f"COFFER_CANARY_{uuid.uuid4().hex}"
    monkeypatch.setenv("GITHUB_TOKEN", secret)  # the upstream's env value
    arguments = {"query": secret, "token": secret}
    calllog = CallLog.open(retention_days=90)
    started = time.time()
    try:
        raise PermissionError(f"401 Bad credentials for {arguments['token']}")  # an upstream error body
    except PermissionError as exc:
        calllog.record(CallRecord(started, "claude-code", "2.1.0", "github", "search_issues", 4.2, "error", "McpError"))
        # a careless caller handing over the message is still refused
        calllog.record(CallRecord(started, "claude-code", "2.1.0", "github", "search_issues", 4.2, "error", str(exc)))
    assert calllog.flush()
    try:
        files = sorted(coffer_home.glob("coffer.db*"))
        assert {f.name for f in files} >= {"coffer.db", "coffer.db-wal"}  # checked while the WAL still holds rows
        blob = b"".join(f.read_bytes() for f in files)
        assert blob.count(b"search_issues") >= 2  # the rows are there...
        assert secret.encode() not in blob  # ...the secret is not
        outputs = [
            run_cli(cli, *args) for args in (["log"], ["log", "--json"], ["log", "stats"], ["log", "stats", "--json"])
        ]
        assert [r["error_class"] for r in json_lines(outputs[1].stdout)] == ["McpError", "unclassified"]
        for result in outputs:
            assert secret not in result.stdout and secret not in result.stderr
    finally:
        calllog.close()
