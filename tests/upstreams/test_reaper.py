"""coffer/upstreams/reaper.py as the gateway runs it (`python -I -S reaper.py GATEWAY_PID`), driven directly:
the server's exit status comes back, a setsid escapee that ignores SIGTERM ends with the tree, and a
program that cannot run is exit 127 with one line on stderr."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coffer.upstreams import reaper
from coffer.upstreams.transport import REAPER
from tests.fixtures.gateway_harness import alive, descendants

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the supervisor (subreaper, parent-death signal) is Linux-only"
)

# Starts a child that leaves the process group with setsid and ignores SIGTERM, writes its pid, then waits.
ESCAPEE = """\
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)
    os._exit(0)
open(sys.argv[1], "w").write(str(pid))
time.sleep(120)
"""


def start(argv: list[str], parent: int | None = None) -> subprocess.Popen[bytes]:
    env = {reaper.ARGV_ENV: json.dumps(argv), "PATH": os.environ.get("PATH", "")}
    gateway = os.getpid() if parent is None else parent
    return subprocess.Popen([sys.executable, "-I", "-S", REAPER, str(gateway)], env=env, stderr=subprocess.PIPE)


def wait_until(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_server_exit_status_comes_back() -> None:
    proc = start([sys.executable, "-c", "raise SystemExit(3)"])
    assert proc.wait(10) == 3
    proc = start([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert proc.wait(10) == 128 + signal.SIGKILL


def test_a_program_that_cannot_run_is_127_with_one_line() -> None:
    proc = start(["/nonexistent/server"])
    assert proc.wait(10) == 127
    assert proc.stderr is not None
    assert proc.stderr.read().decode().strip() == "coffer: cannot run /nonexistent/server: No such file or directory"


def test_sigterm_ends_the_whole_tree_escapees_included(tmp_path: Path) -> None:
    pidfile = tmp_path / "escapee.pid"
    proc = start([sys.executable, "-c", ESCAPEE, str(pidfile)])
    wait_until(lambda: pidfile.exists() and pidfile.read_text())
    escapee = int(pidfile.read_text())
    assert escapee in descendants(proc.pid)  # setsid left the group, not the reaper's tree
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0  # told to stop before the server exited: status 0
    assert not alive(escapee)


def test_the_server_exiting_ends_what_it_left_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "escapee.pid"
    leaver = ESCAPEE.rsplit("time.sleep(120)", 1)[0] + "raise SystemExit(5)\n"
    proc = start([sys.executable, "-c", leaver, str(pidfile)])
    assert proc.wait(10) == 5
    assert not alive(int(pidfile.read_text()))


def test_a_reaper_whose_gateway_is_already_gone_exits_1() -> None:
    proc = start([sys.executable, "-c", "import time; time.sleep(60)"], parent=1)
    assert proc.wait(10) == 1
