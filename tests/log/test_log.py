"""The invocation log's writer and queries against a real coffer.db: concurrency, migrations, retention."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from coffer.errors import UsageError
from coffer.log import calls as log
from coffer.log import query as logq
from coffer.log.calls import CallLog, CallRecord
from coffer.vault.database import open_db
from tests.conftest import subprocess_env


def rec(tool: str = "search_issues", *, server: str = "github", ts: float | None = None, **kw: object) -> CallRecord:
    fields: dict[str, object] = {
        "ts": time.time() if ts is None else ts,
        "client_name": "claude-code",
        "client_version": "2.1.0",
        "server": server,
        "tool": tool,
        "duration_ms": 12.5,
        "outcome": "ok",
    }
    fields.update(kw)
    return CallRecord(**fields)  # type: ignore[arg-type]


def write(path: Path, *records: CallRecord) -> None:
    calllog = CallLog.open(path, retention_days=0)
    for r in records:
        calllog.record(r)
    calllog.close()
    assert calllog.dropped == 0


def test_record_flush_and_query_round_trip(coffer_home: Path) -> None:
    calllog = CallLog.open(retention_days=0)  # default path: COFFER_HOME/coffer.db
    calllog.record(rec(outcome="error", error_class="McpError", duration_ms=3.25))
    calllog.record(rec("search_tools", server="coffer", client_name=None, client_version=None))
    assert calllog.flush()
    rows = logq.query(log.open_log())
    calllog.close()
    assert [(r["server"], r["tool"], r["outcome"], r["error_class"]) for r in rows] == [
        ("github", "search_issues", "error", "McpError"),
        ("coffer", "search_tools", "ok", None),
    ]
    assert rows[0]["duration_ms"] == 3.25 and rows[0]["client_name"] == "claude-code"
    assert rows[1]["client_name"] is None and rows[0]["pid"] == os.getpid()
    assert (coffer_home / "coffer.db").stat().st_mode & 0o777 == 0o600
    assert calllog.written == 2 and calllog.dropped == 0


def test_error_class_never_holds_a_message_body(tmp_path: Path) -> None:
    path = tmp_path / "coffer.db"
    write(
        path,
        rec(outcome="error", error_class="Bad credentials: token ghp_abc rejected"),
        rec(outcome="error", error_class="COFFER_UPSTREAM_CRASHED"),
        rec(outcome="weird-outcome"),
        rec(tool="x" * 5000),
    )
    rows = logq.query(log.open_log(path))
    assert [r["error_class"] for r in rows] == ["unclassified", "COFFER_UPSTREAM_CRASHED", None, None]
    assert rows[2]["outcome"] == "error"  # an unknown outcome is stored as a failure, not as free text
    assert len(rows[3]["tool"]) == 200


def test_record_after_close_is_dropped_not_raised(tmp_path: Path) -> None:
    calllog = CallLog.open(tmp_path / "coffer.db", retention_days=0)
    calllog.close()
    calllog.record(rec())
    calllog.close()  # idempotent
    assert calllog.dropped == 1 and calllog.flush()


def test_unusable_database_drops_rows_with_one_warning(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    blocked = tmp_path / "is-a-directory.db"
    blocked.mkdir()
    calllog = CallLog.open(blocked)
    for i in range(3):
        calllog.record(rec(f"t{i}"))
        assert calllog.flush()
    calllog.close()
    assert calllog.dropped == 3 and calllog.written == 0
    err = capfd.readouterr().err
    assert err.count("coffer: warning: invocation log unavailable") == 1, err


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from coffer.log.calls import CallLog, CallRecord
    name, n, path = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    calllog = CallLog.open(path, retention_days=0)
    sys.stdin.readline()  # the go signal, so the writers really overlap
    for i in range(n):
        calllog.record(CallRecord(time.time(), name, "1", "srv", f"t{i}", 1.0, "ok"))
        if i % 2:
            calllog.flush()  # many small transactions, like calls spread over time
    calllog.close()
    print(calllog.written, calllog.dropped)
    """
)


def test_three_processes_write_500_rows_each_none_lost(tmp_path: Path) -> None:
    path = tmp_path / "coffer.db"
    env = subprocess_env(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, f"p{k}", "500", str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(3)
    ]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [p.communicate(timeout=60) for p in procs]
    for (out, err), p in zip(results, procs, strict=True):
        assert p.returncode == 0, err
        assert out.split() == ["500", "0"]
        assert "locked" not in err and "warning" not in err, err
    db = log.open_log(path)
    per_client = dict(db.execute("SELECT client_name, count(DISTINCT tool) FROM calls GROUP BY client_name"))
    assert per_client == {"p0": 500, "p1": 500, "p2": 500}
    assert db.execute("SELECT count(DISTINCT pid), count(*) FROM calls").fetchone() == (3, 1500)


def test_old_schema_file_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "coffer.db"
    old = open_db(path)
    log.MIGRATIONS.apply(old, stop_before="0002_pid_tool_index_meta")
    old.execute(
        "INSERT INTO calls (ts, client_name, client_version, server, tool, duration_ms, outcome, error_class) "
        "VALUES (?, 'codex', '0.9', 'github', 'get_issue', 40.0, 'timeout', 'TimeoutError')",
        (time.time() - 60,),
    )
    old.conn.commit()
    assert "pid" not in old["calls"].columns_dict
    old.conn.close()

    write(path, rec("search_issues"))

    db = log.open_log(path)
    assert [m.name for m in log.MIGRATIONS.applied(db)] == [
        "0001_calls",
        "0002_pid_tool_index_meta",
        "0003_kept_results",
        "0004_script_calls",
        "0005_member",
    ]
    assert {"calls_server_tool", "calls_member"} <= {i.name for i in db["calls"].indexes}
    rows = logq.query(db)
    assert [(r["tool"], r["outcome"], r["pid"], r["parent"]) for r in rows] == [
        ("get_issue", "timeout", None, None),
        ("search_issues", "ok", os.getpid(), None),
    ]
    assert [r["tool"] for r in logq.query(db, logq.Filters(tool="github__get_issue"))] == ["get_issue"]
    assert all(r["member"] is None for r in rows)  # one user's calls have no member


def test_ids_keep_growing_after_everything_is_pruned(tmp_path: Path) -> None:
    path = tmp_path / "coffer.db"
    write(path, rec(ts=time.time() - 200 * 86_400), rec(ts=time.time() - 100 * 86_400))
    db = log.open_log(path)
    assert log.prune(db, 90) == 2 and logq.last_id(db) == 0
    write(path, rec())
    assert [r["id"] for r in logq.query(db)] == [3]  # AUTOINCREMENT: `--tail` never sees an id twice


def test_prune_keeps_recent_rows_and_runs_at_most_daily(tmp_path: Path) -> None:
    path = tmp_path / "coffer.db"
    now = time.time()
    write(path, rec("old", ts=now - 91 * 86_400), rec("recent", ts=now - 88 * 86_400), rec("new", ts=now))
    db = log.open_log(path)
    assert log.prune(db, 0) == 0  # 0 days: keep forever
    assert log.prune_if_due(db, 90, now=now) == 1
    assert log.prune_if_due(db, 2, now=now + 3600) == 0  # ran an hour ago: not due yet
    assert [r["tool"] for r in logq.query(db)] == ["recent", "new"]
    assert log.prune_if_due(db, 2, now=now + 86_401) == 1
    assert [r["tool"] for r in logq.query(db)] == ["new"]


def test_writer_applies_retention_on_open(tmp_path: Path) -> None:
    path = tmp_path / "coffer.db"
    write(path, rec("ancient", ts=time.time() - 30 * 86_400))
    calllog = CallLog.open(path, retention_days=7)
    calllog.record(rec("fresh"))
    calllog.close()
    assert [r["tool"] for r in logq.query(log.open_log(path))] == ["fresh"]


def test_retention_setting_validation() -> None:
    assert log.retention_days({}) == 90
    assert log.retention_days({"log_retention_days": 7}) == 7
    for bad in ("ninety", -1, True):
        with pytest.raises(UsageError, match="log_retention_days"):
            log.retention_days({"log_retention_days": bad})


def test_percentile_matches_the_reference() -> None:
    for data in ([4.0], [1.0, 2.0], [float(x) for x in range(1, 11)], [0.3, 9.1, 2.2, 7.7, 7.7, 100.0, 5.0]):
        values = sorted(data)
        cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
        assert logq.percentile(values, 50) == pytest.approx(cuts[49])
        assert logq.percentile(values, 95) == pytest.approx(cuts[94])


def test_stats_per_tool(tmp_path: Path) -> None:
    path = tmp_path / "coffer.db"
    outcomes = ["ok", "ok", "error", "timeout", "cancelled", "refused", "ok", "ok", "ok", "ok"]
    write(
        path,
        *(rec("search_issues", duration_ms=float(i + 1), outcome=o) for i, o in enumerate(outcomes)),
        rec("search_tools", server="coffer", duration_ms=2.0),
    )
    got = logq.stats(log.open_log(path))
    assert all(time.time() - row.pop("last_used") < 60 for row in got)  # the latest call's time
    assert got == [
        {"server": "github", "tool": "search_issues", "count": 10, "errors": 3, "error_rate": 0.3}
        | {"p50_ms": 5.5, "p95_ms": 9.55},
        {"server": "coffer", "tool": "search_tools", "count": 1, "errors": 0, "error_rate": 0.0}
        | {"p50_ms": 2.0, "p95_ms": 2.0},
    ]
    only_errors = logq.stats(log.open_log(path), logq.Filters(outcomes=("error", "timeout")))
    assert [(s["tool"], s["count"], s["errors"]) for s in only_errors] == [("search_issues", 2, 2)]


def test_tail_generator_follows_new_rows_and_filters(tmp_path: Path) -> None:
    path = tmp_path / "coffer.db"
    write(path, rec("before"))
    db = log.open_log(path)
    stop = threading.Event()
    deadline = threading.Timer(10, stop.set)  # a missed row ends the generator instead of hanging
    deadline.start()
    follower = logq.tail(db, logq.Filters(server="github"), after_id=logq.last_id(db), interval=0.05, stop=stop)
    write(path, rec("skipped", server="other"), rec("after"))
    try:
        assert next(follower)["tool"] == "after"  # "before" predates the tail; "skipped" fails the filter
    finally:
        deadline.cancel()
