"""`coffer serve`: the thin front between one host (or one HTTP port) and the vault's engine.

It connects to the engine's socket (starting the engine when none answers, under a lock, so two
fronts starting at once start one engine: `place.attach`). A host's pipes or sockets are handed to the
engine (coffer.engine.handed); where stdin or stdout is a terminal or a file, this front says who it is
in one JSON line, then copies bytes: the host's stdin to the socket, the socket to stdout. Nothing is
parsed on the way but the host's handshake, which is kept, and each line's id (read from its ends,
never parsed whole when large: `LineEnds`): if the engine dies, the front answers each request it had
passed on and not seen answered with an error saying so (the host need not wait for its own timeout; a
line cut off by the death is ended first), starts a new engine, replays the handshake, drops the new
engine's answer to it, and carries on. It exits when the host closes stdin.

`coffer serve --http PORT` asks the engine to listen on the port for as long as the front runs
(`run_http`): HTTP requests go straight to the engine, with no hop through this process. If the
engine dies, the front starts a new one on the same port (HTTP clients then start new sessions, as the
streamable HTTP transport provides for).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import NoReturn

from coffer.engine import control, handed
from coffer.engine.handed import lost_answers, write_all
from coffer.engine.place import START_WAIT_S, attach
from coffer.errors import INTERRUPTED, CofferError

CHUNK = 1 << 16
EDGE = 4096  # bytes kept of each end of a line: a line this short is parsed, a longer one read at its ends
_ID = rb'(-?\d+|"(?:[^"\\]|\\.){0,200}")'
# Where the top-level id of a large line is: right after "jsonrpc" at its start (Python SDKs, and the
# engine itself), or as its last member (the TypeScript SDK puts `jsonrpc` and `id` after `params`).
_HEAD_ID = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*' + _ID)
_TAIL_ID = re.compile(rb'"id"\s*:\s*' + _ID + rb"\s*\}\s*$")
_METHOD = re.compile(rb'"method"\s*:\s*"')


class LineEnds:
    """The lines of a byte stream as it passes, each as its first and last `EDGE` bytes and its size:
    what tells its id, without holding a 50 MB line."""

    def __init__(self) -> None:
        self.head, self.tail, self.size = bytearray(), b"", 0

    def feed(self, chunk: bytes) -> Iterator[tuple[bytes, bytes, int]]:
        view, start = memoryview(chunk), 0
        while (newline := chunk.find(b"\n", start)) != -1:
            self._add(view[start:newline])
            yield bytes(self.head), self.tail, self.size
            self.head, self.tail, self.size = bytearray(), b"", 0
            start = newline + 1
        self._add(view[start:])

    @property
    def cut(self) -> bool:
        """Whether a line has begun and not ended."""
        return self.size > 0

    def _add(self, part: memoryview) -> None:
        if len(self.head) < EDGE:
            self.head += part[: EDGE - len(self.head)]
        self.tail = (self.tail + bytes(part[-EDGE:]))[-EDGE:]
        self.size += len(part)


def message_id(head: bytes, tail: bytes, size: int, request: bool) -> str | None:
    """The id of a request (`request`) or of an answer, from a line's ends; None when the line is not
    one (a notification, the other kind) or its id cannot be told. Ids are kept as their JSON text."""
    if size <= EDGE:
        try:
            message = json.loads(head)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("id") is None or ("method" in message) != request:
            return None
        return json.dumps(message["id"])
    if (_METHOD.search(head) is not None or _METHOD.search(tail) is not None) != request:
        return None
    found = _HEAD_ID.search(head) or _TAIL_ID.search(tail)
    return json.dumps(json.loads(found.group(1))) if found else None


class Front:
    """One host's stdio, piped to the engine."""

    def __init__(self, profile: str | None) -> None:
        self.header = json.dumps({"coffer": "front", "version": 1, "profile": profile, "pid": os.getpid()})
        self.env = control.handed_env()
        self.handshake: list[bytes] = []  # the host's initialize and initialized lines, to replay
        self.init_id: object = None
        self._pending = b""
        self._lock = threading.Condition()
        # the host's requests passed on and not answered yet (id as JSON -> its chunk was wholly sent)
        self.in_flight: dict[str, bool] = {}
        self._from_host, self._to_host = LineEnds(), LineEnds()
        self._warned = False
        self.sock = self._open()
        self.stdin_open = True

    def _open(self, replay: bool = False) -> socket.socket:
        """A connection to the engine with our header sent (and, `replay`, the host's handshake)."""

        def hello(sock: socket.socket) -> None:
            sock.sendall(self.header.encode() + b"\n")
            for line in self.handshake if replay else ():
                sock.sendall(line)

        sock, said = control.reach(self.env, hello)
        if said.get("differs") and not self._warned:
            self._warned = True
            sys.stderr.write(control.differs_line(said))
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
            sent = [i for line in self._from_host.feed(chunk) if (i := message_id(*line, request=True)) is not None]
            with self._lock:  # noted before they are sent, so that no answer can come first
                self.in_flight.update((i, False) for i in sent)
            while True:
                with self._lock:
                    sock = self.sock
                try:
                    sock.sendall(chunk)
                    break
                except OSError:  # the engine went away: wait for the reader to reattach (it is sent again)
                    with self._lock:
                        if self.sock is sock:
                            self._lock.wait(timeout=START_WAIT_S)
            with self._lock:
                for i in sent:
                    if i in self.in_flight:
                        self.in_flight[i] = True
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
                self._answer_lost()
                skip = self._reattach()
                buffered = b""
                continue
            if skip is not None:  # the new engine's answer to the replayed handshake: the host has its own
                buffered += chunk
                chunk, buffered, found = _drop_answer(buffered, skip)
                if found:
                    skip, chunk, buffered = None, chunk + buffered, b""
            answered = [i for line in self._to_host.feed(chunk) if (i := message_id(*line, request=False)) is not None]
            if answered:
                with self._lock:
                    for i in answered:
                        self.in_flight.pop(i, None)
            write_all(1, chunk)

    def _answer_lost(self) -> None:
        """The engine died: each request it was given and did not answer gets an error (a line it was
        writing is ended first, so that the host's reader sees the errors as lines of their own)."""
        out = b"\n" if self._to_host.cut else b""
        self._to_host = LineEnds()
        with self._lock:
            lost = [i for i, sent in self.in_flight.items() if sent]
            for i in lost:
                del self.in_flight[i]
        write_all(1, out + lost_answers(lost))

    def _reattach(self) -> object:
        sock = self._open(replay=True)
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

    Raises CofferError before anything is read when the engine cannot be started. A host's pipes or
    sockets are handed to the engine (coffer.engine.handed); a terminal or a file is relayed here.
    """
    if handed.can_hand():
        handing = handed.Handed(profile)
        try:
            code = handing.run()
        except CofferError as exc:
            sys.stderr.write(f"coffer: error: {exc}\n")
            code = 1
        except KeyboardInterrupt:
            code = INTERRUPTED
        os._exit(code)
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
        code = INTERRUPTED
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(code)


def run_http(port: int, profile: str | None, auth: bool) -> NoReturn:
    """Have the engine serve streamable HTTP on 127.0.0.1:`port` until this process is stopped (never
    returns). Raises CofferError, before anything is served, when the port cannot be bound."""
    from coffer.gateway.http import serving_line

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
            os._exit(INTERRUPTED)
        except OSError:
            pass
        sock.close()
