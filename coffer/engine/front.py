"""`coffer serve`: the thin front between one host (or one HTTP port) and the vault's engine.

It connects to the engine's socket (starting the engine when none answers, under a lock, so two
fronts starting at once start one engine), says who it is in one JSON line, then copies bytes: the
host's stdin to the socket, the socket to stdout. Nothing is parsed on the way but the host's
handshake, which is kept: if the engine dies, the front starts a new one, replays the handshake,
drops the new engine's answer to it, and carries on (requests in flight at that moment are lost;
the host's own timeout ends them). It exits when the host closes stdin.

`coffer serve --http PORT` asks the engine to listen on the port for as long as the front runs
(`run_http`): HTTP requests go straight to the engine, with no hop through this process. If the
engine dies, the front starts a new one on the same port (HTTP clients then start new sessions, as the
streamable HTTP transport provides for).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

from coffer.engine import control, place
from coffer.errors import CofferError

START_WAIT_S = 20.0
CHUNK = 1 << 16


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _spawn() -> subprocess.Popen[bytes]:
    """The engine, detached: its own session (a host's Ctrl-C or hang-up does not reach it)."""
    from coffer.vault import paths

    log = place.log_path()
    paths.ensure_private_dir(log.parent)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "coffer.engine.daemon"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)


def attach() -> socket.socket:
    """A connection to this vault's engine, started first when none is running.

    Raises CofferError (with the engine log's last line) when it cannot be started.
    """
    from filelock import FileLock

    path = place.socket_path()
    sock = _connect(path)
    if sock is not None:
        return sock
    with FileLock(str(place.lock_path())):
        sock = _connect(path)
        if sock is not None:
            return sock
        proc = _spawn()  # it forks the engine off and exits at once (the engine is nobody's child)
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            sock = _connect(path)
            if sock is not None:
                proc.wait()
                return sock
            if proc.poll() not in (None, 0):
                break
            time.sleep(0.02)
    raise CofferError(f"the engine did not start: {_last_line(place.log_path())} (see {place.log_path()})")


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        if lines:
            return lines[-1][:300]
    return "no error was logged"


class Front:
    """One host's stdio, piped to the engine."""

    def __init__(self, profile: str | None) -> None:
        self.header = json.dumps({"coffer": "front", "version": 1, "profile": profile, "pid": os.getpid()})
        self.handshake: list[bytes] = []  # the host's initialize and initialized lines, to replay
        self.init_id: object = None
        self._pending = b""
        self._lock = threading.Condition()
        self.sock = self._open()
        self.stdin_open = True

    def _open(self) -> socket.socket:
        sock = attach()
        sock.sendall(self.header.encode() + b"\n")
        return sock

    def _note_handshake(self, chunk: bytes) -> None:
        """Keep the host's `initialize` and `notifications/initialized` lines (only until both are seen)."""
        self._pending += chunk
        while b"\n" in self._pending and len(self.handshake) < 2:
            line, self._pending = self._pending.split(b"\n", 1)
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                method = message.get("method") if isinstance(message, dict) else None
                if method == "initialize":
                    self.handshake.append(line + b"\n")
                    self.init_id = message.get("id")
                elif method == "notifications/initialized":
                    self.handshake.append(line + b"\n")
            if len(self._pending) > 1 << 20 and not self.handshake:  # a host without a handshake (2026-07-28)
                self._pending = b""
                break
        if len(self.handshake) >= 2:
            self._pending = b""

    def host_to_engine(self) -> None:
        while True:
            try:
                chunk = os.read(0, CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                break
            if len(self.handshake) < 2:
                self._note_handshake(chunk)
            while True:
                with self._lock:
                    sock = self.sock
                try:
                    sock.sendall(chunk)
                    break
                except OSError:  # the engine went away: wait for the reader to reattach
                    with self._lock:
                        if self.sock is sock:
                            self._lock.wait(timeout=START_WAIT_S)
        with self._lock:
            self.stdin_open = False
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)

    def engine_to_host(self) -> None:
        skip: object = None
        buffered = b""
        while True:
            try:
                chunk = self.sock.recv(CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                with self._lock:
                    if not self.stdin_open:
                        return
                skip = self._reattach()
                buffered = b""
                continue
            if skip is not None:  # the new engine's answer to the replayed handshake: the host has its own
                buffered += chunk
                chunk, buffered, found = _drop_answer(buffered, skip)
                if found:
                    skip, chunk, buffered = None, chunk + buffered, b""
            view = memoryview(chunk)
            while view:
                written = os.write(1, view)
                view = view[written:]

    def _reattach(self) -> object:
        sock = self._open()
        for line in self.handshake:
            sock.sendall(line)
        with self._lock:
            old, self.sock = self.sock, sock
            self._lock.notify_all()
        old.close()
        return self.init_id if self.handshake else None


def _drop_answer(buffered: bytes, answer_id: object) -> tuple[bytes, bytes, bool]:
    """(the complete lines to pass on, the incomplete rest, whether the answer to `answer_id` was found
    and dropped). The new engine may say something (a list change, a log line) before it answers the
    replayed initialize: those lines go to the host; only the answer, which the host already has, does not."""
    passed: list[bytes] = []
    while b"\n" in buffered:
        line, buffered = buffered.split(b"\n", 1)
        message: object = None
        with contextlib.suppress(ValueError):
            message = json.loads(line)
        if isinstance(message, dict) and message.get("id") == answer_id and "method" not in message:
            return b"".join(passed), buffered, True
        passed.append(line + b"\n")
    return b"".join(passed), buffered, False


def run(profile: str | None = None) -> NoReturn:
    """Serve the host on stdio through the engine until stdin closes (never returns).

    Raises CofferError before anything is read when the engine cannot be started.
    """
    front = Front(profile)
    reader = threading.Thread(target=front.host_to_engine, name="coffer-front-stdin", daemon=True)
    reader.start()
    code = 0
    try:
        front.engine_to_host()
    except CofferError as exc:
        sys.stderr.write(f"coffer: error: {exc}\n")
        code = 1
    except KeyboardInterrupt:
        pass
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(code)


def run_http(port: int, profile: str | None, auth: bool) -> NoReturn:
    """Have the engine serve streamable HTTP on 127.0.0.1:`port` until this process is stopped (never
    returns). Raises CofferError, before anything is served, when the port cannot be bound."""
    from coffer.gateway.serve import serving_line

    first = True
    while True:
        sock = attach()
        hello = {"coffer": "http", "version": 1, "port": port, "auth": auth, "profile": profile, "pid": os.getpid()}
        sock.sendall(json.dumps(hello).encode() + b"\n")
        answer = control.read_answer(sock) or {}
        if "port" not in answer:
            error = CofferError(str(answer.get("error") or "the engine did not answer"))
            code = answer.get("code")
            error.exit_code = code if isinstance(code, int) and code > 0 else 1
            if first:
                raise error
            time.sleep(1.0)  # the port of a dead engine may take a moment to be free
            continue
        port = int(answer["port"])  # the one the kernel chose for port 0, kept for a restarted engine
        if first:
            sys.stderr.write(serving_line(port, auth))
            sys.stderr.flush()
            first = False
        try:
            while sock.recv(CHUNK):  # the engine says nothing more: EOF is its going
                pass
        except KeyboardInterrupt:
            os._exit(0)
        except OSError:
            pass
        sock.close()
