"""The supervisor every stdio upstream runs under on Linux, so no upstream process outlives the gateway.

Run by path, never imported by the gateway: `python -I -S reaper.py GATEWAY_PID`, with the server's
argv as JSON in COFFER_SHIM_ARGV (not on its own command line, so process listings show the server
once). Standard library only, and `-I -S` keep its start short and free of the user's site packages.

- It is the child subreaper of the server's whole tree (PR_SET_CHILD_SUBREAPER): a worker that
  escapes with `setsid` is re-parented to it, not to init.
- The kernel sends it SIGTERM when the gateway dies (PR_SET_PDEATHSIG), so even `kill -9` of the
  gateway reaches it; the server itself gets SIGKILL when the reaper dies, whatever ends it.
- A server confined by Landlock (coffer.upstreams.lockdown's launch line) is restricted here, in the
  forked child before it becomes the server (or bubblewrap), not by a second interpreter.
- Whenever it is told to stop or the server exits, it ends every process left in the tree (SIGTERM,
  then SIGKILL after 1 s) and exits with the server's status (128 + N for a signal N; 127 when the
  program cannot be executed; 1 when the gateway died before the reaper was set up).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import time
from typing import Any, NoReturn

ARGV_ENV = "COFFER_SHIM_ARGV"
LOCKDOWN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lockdown.py")
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
TERM_WAIT_S = 1.0  # after SIGTERM to the tree, before SIGKILL
KILL_WAIT_S = 0.5


def _prctl(libc: Any, option: int, value: int) -> None:
    libc.prctl(option, value, 0, 0, 0)


def tree(root: int) -> list[int]:
    """Every live descendant of `root`, read from /proc (parents first)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def reap() -> None:
    """Collect every exited child without blocking (the reaper inherits the tree's orphans)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_tree(status: int) -> NoReturn:
    """SIGTERM every process in the tree, SIGKILL what is left after TERM_WAIT_S, then exit with `status`."""
    me = os.getpid()
    for sig, wait in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)):
        for pid in tree(me):
            with contextlib.suppress(OSError):  # gone already, or not ours to signal
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while tree(me) and time.monotonic() < deadline:
            reap()
            time.sleep(0.02)
        if not tree(me):
            break
    reap()
    os._exit(status)


def _exec_server(libc: Any, argv: list[str]) -> NoReturn:
    """In the forked child: die with the reaper, restore the signals Python ignores, become the server."""
    _prctl(libc, PR_SET_PDEATHSIG, signal.SIGKILL)
    for name in ("SIGPIPE", "SIGXFSZ"):  # ignored by Python at startup; exec would keep them ignored
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    if argv[0] == sys.executable and LOCKDOWN in argv[:4]:  # Landlock, applied here: one interpreter less
        import importlib.util  # coffer/upstreams/lockdown.py, beside this file (-I: not on sys.path)

        spec = importlib.util.spec_from_file_location("coffer_lockdown", LOCKDOWN)
        assert spec is not None and spec.loader is not None
        lockdown = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(lockdown)
        found = lockdown.split(argv)
        if found is not None:
            lockdown.become(*found)
    try:
        os.execv(argv[0], argv)
    except OSError as exc:
        os.write(2, f"coffer: cannot run {argv[0]}: {exc.strerror}\n".encode())
    os._exit(127)


def main(args: list[str]) -> NoReturn:
    libc = ctypes.CDLL(None)
    argv: list[str] = json.loads(os.environ.pop(ARGV_ENV))
    _prctl(libc, PR_SET_CHILD_SUBREAPER, 1)
    _prctl(libc, PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(args[0]):
        os._exit(1)  # the gateway died before the prctl took effect
    status = 0
    child = os.fork()
    if child == 0:
        _exec_server(libc, argv)
    signal.signal(signal.SIGTERM, lambda *_: end_tree(status))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # only the server holds the pipes: its exit is the gateway's EOF
    os.dup2(null, 1)
    while True:
        try:
            pid, raw = os.waitpid(-1, 0)
        except ChildProcessError:
            end_tree(status)
        if pid == child:
            code = os.waitstatus_to_exitcode(raw)
            status = code if code >= 0 else 128 - code
            end_tree(status)


if __name__ == "__main__":
    main(sys.argv[1:])
