"""Invocation-log figures: cost of `record()` on the call path, and writer throughput.

Run: `python bench/bench_log.py [ROWS]` (default 20000). Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coffer.log.calls import CallLog, CallRecord, open_log

CHILD = """
import sys, time
from pathlib import Path
from coffer.log.calls import CallLog, CallRecord
n, path = int(sys.argv[1]), Path(sys.argv[2])
calllog = CallLog.open(path, retention_days=0)
sys.stdin.readline()
start = time.perf_counter()
for i in range(n):
    calllog.record(CallRecord(time.time(), "bench", "1", "srv", f"t{i % 50}", 1.0, "ok"))
    if i % 2:
        calllog.flush()
calllog.close()
print(calllog.written, calllog.dropped, time.perf_counter() - start)
"""


def record_cost(path: Path, rows: int) -> None:
    calllog = CallLog.open(path, retention_days=0)
    costs = []
    for i in range(rows):
        rec = CallRecord(time.time(), "bench", "1", "github", f"tool_{i % 50}", 3.0, "ok")
        t0 = time.perf_counter_ns()
        calllog.record(rec)
        costs.append(time.perf_counter_ns() - t0)
    t0 = time.perf_counter()
    calllog.flush(60)
    drain = time.perf_counter() - t0
    calllog.close()
    costs.sort()
    p50, p99 = costs[len(costs) // 2] / 1000, costs[int(len(costs) * 0.99)] / 1000
    print(f"record(): p50 {p50:.1f} us, p99 {p99:.1f} us over {rows} calls (written {calllog.written})")
    print(f"writer, batched: {rows / drain:,.0f} rows/s draining a full queue ({drain * 1000:.0f} ms)")


def one_txn_per_row(path: Path, rows: int) -> None:
    calllog = CallLog.open(path, retention_days=0)
    t0 = time.perf_counter()
    for i in range(rows):
        calllog.record(CallRecord(time.time(), "bench", "1", "github", f"tool_{i % 50}", 3.0, "ok"))
        calllog.flush()
    elapsed = time.perf_counter() - t0
    calllog.close()
    print(f"writer, one transaction per row (calls spread out): {rows / elapsed:,.0f} rows/s")


def processes(path: Path, procs: int, rows: int) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(rows), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(procs)
    ]
    t0 = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outs = [child.communicate() for child in children]
    elapsed = time.perf_counter() - t0
    total = open_log(path).execute("SELECT count(*) FROM calls").fetchone()[0]
    dropped = sum(int(out.split()[1]) for out, _ in outs)
    locked = sum("locked" in err for _, err in outs)
    secs = statistics.median(float(out.split()[2]) for out, _ in outs)
    print(
        f"{procs} processes x {rows} rows (a transaction every 2 rows): {total}/{procs * rows} rows stored, "
        f"{dropped} dropped, {locked} 'locked' errors; median {secs:.2f} s per process, "
        f"{total / elapsed:,.0f} rows/s overall"
    )


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory() as tmp:
        record_cost(Path(tmp) / "a.db", rows)
        one_txn_per_row(Path(tmp) / "b.db", min(rows, 5000))
        processes(Path(tmp) / "c.db", 3, min(rows, 2000))
        processes(Path(tmp) / "d.db", 8, min(rows, 2000))


if __name__ == "__main__":
    main()
