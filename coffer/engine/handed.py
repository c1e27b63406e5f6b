"""`coffer serve` as a front that hands its host's stdin and stdout to the engine (`SCM_RIGHTS`) and steps
out of the way: every message goes between host and engine with no process between them (a relay cost a
call two more wake-ups: 0.36 ms a call on 2 cores, bench/bench_front.py).

The front stays, as the process its host started, for what the engine cannot do once it is gone: the
engine tells it on its socket (coffer.engine.handover) of each request read and answered, the handshake,
and a large write under way. If the engine dies, the front answers each request read and not answered
with an error saying so (a line the death cut off is ended first), starts a new engine, hands the same
fds over with the handshake to replay, and carries on; when its host's stdin ends, the engine says so and
the front exits. Ctrl-C or a kill of the front closes its socket, and the engine lets the host's streams go.
Like the relay (coffer.engine.front), this module loads neither the SDK nor anyio.
"""

from __future__ import annotations

import json
import os
import select
import socket
import stat
import sys
from collections.abc import Iterable
from typing import Any

from coffer.engine import control

HANDING = b"F"  # a connection's first byte, sent with the host's fds 0 and 1
ASKED, ANSWERED, HANDSHAKE = b"+", b"-", b"h"  # each followed by a request's id as JSON, or a line
WRITING, WRITTEN, ENDED = b"w", b"d", b"."
ATOMIC = 4096  # a pipe takes a write this short whole (PIPE_BUF): a death cannot cut it
LOST = -32603  # internal error: the request's outcome is unknown
LOST_MESSAGE = (
    "coffer: the engine stopped while this request was in flight, so its outcome is unknown; "
    "a new engine has been started: send the request again"
)


def can_hand() -> bool:
    """Whether this process's stdin and stdout are what a host gives (pipes or sockets) and can be sent."""
    if not hasattr(socket, "send_fds"):
        return False
    try:
        modes = [os.fstat(fd).st_mode for fd in (0, 1)]
    except OSError:
        return False
    return all(stat.S_ISFIFO(m) or stat.S_ISSOCK(m) for m in modes)


class Handed:
    """One host's stdio, handed to the engine; what the engine owes it, as the engine said."""

    def __init__(self, profile: str | None) -> None:
        self.hello: dict[str, Any] = {"coffer": "front", "version": 1, "profile": profile, "pid": os.getpid()}
        self.env = control.handed_env()
        self.handshake: list[str] = []  # the host's initialize and initialized, to replay
        self.init_id: Any = None
        self.owed: set[bytes] = set()  # ids (as JSON) of requests read and not answered
        self.cut = False  # a large write under way
        self.ended = False
        self._warned = False
        self.sock = self._open()

    def _open(self, replay: bool = False) -> socket.socket:
        """A connection to the engine with the host's fds and our hello (and, `replay`, the handshake the
        new engine is to replay and the answer to it it is to drop)."""
        hello = dict(self.hello)
        if replay and self.handshake:
            hello.update(replay=self.handshake, drop=self.init_id)

        def hand(sock: socket.socket) -> None:
            socket.send_fds(sock, [HANDING], [0, 1])
            sock.sendall(json.dumps(hello).encode() + b"\n")

        sock, said = control.reach(self.env, hand)
        if said.get("differs") and not self._warned:
            self._warned = True
            sys.stderr.write(control.differs_line(said))
        return sock

    def run(self) -> int:
        """Follow the engine's notes until the host's stdin ends (0)."""
        pending = b""
        while True:
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                if self.ended:
                    return 0
                self._answer_lost()
                self.sock.close()
                self.sock = self._open(replay=True)
                pending = b""
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.note(line)

    def note(self, line: bytes) -> None:
        kind, rest = line[:1], line[1:]
        if kind == ASKED:
            self.owed.add(rest)
        elif kind == ANSWERED:
            self.owed.discard(rest)
        elif kind == WRITING:
            self.cut = True
        elif kind == WRITTEN:
            self.cut = False
        elif kind == ENDED:
            self.ended = True
        elif kind == HANDSHAKE and len(self.handshake) < 2:
            text = rest.decode("utf-8", "replace")
            try:
                message = json.loads(text)
            except ValueError:
                return
            if isinstance(message, dict) and message.get("method") == "initialize":
                self.init_id = message.get("id")
            self.handshake.append(text)

    def _answer_lost(self) -> None:
        """The engine died: what it read and did not answer gets an error (after a line it cut is ended)."""
        write_all(1, (b"\n" if self.cut else b"") + lost_answers(sorted(self.owed)))
        self.owed.clear()
        self.cut = False


def lost_answers(ids: Iterable[str | bytes]) -> bytes:
    """The error lines a front writes for the requests (ids as JSON) a dead engine owed: their outcome is
    unknown, and the host need not wait for its own timeout (the relay's and the handed front's alike)."""
    error = {"code": LOST, "message": LOST_MESSAGE}
    return b"".join(json.dumps({"jsonrpc": "2.0", "id": json.loads(i), "error": error}).encode() + b"\n" for i in ids)


def write_all(fd: int, data: bytes) -> None:
    """Write it all, waiting where the engine left the file non-blocking (the file is shared with it)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [], 1.0)
