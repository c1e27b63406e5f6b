"""A front hands its host's stdin and stdout to the engine and steps out of the way (coffer.engine.handed):
the engine answers the host with the front stopped, lets the host's streams go when the front dies, and a
front whose stdout is a file still relays. Real processes: `python -m coffer serve` on pipes, raw JSON lines.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from coffer.engine import control, place
from tests.fixtures.gateway_harness import add_fixture, alive, serve_env

pytestmark = pytest.mark.usefixtures("engine_stopped")

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def line(n: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


_BUFFERED: dict[int, bytes] = {}  # what was read past a line, by fd (a line's reader must not wait on the fd
# for a line already read: a buffered reader's select would)


def read_line(stream: IO[bytes], timeout: float = 20.0) -> bytes:
    """One line from `stream`'s fd, b"" at its end; fails after `timeout` seconds of nothing."""
    fd = stream.fileno()
    data = _BUFFERED.pop(fd, b"")
    deadline = time.monotonic() + timeout
    while b"\n" not in data:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"nothing within {timeout} s"
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return data
        data += chunk
    first, rest = data.split(b"\n", 1)
    _BUFFERED[fd] = rest
    return first + b"\n"


def start(home: Path) -> subprocess.Popen[bytes]:
    """`coffer serve`, initialized, as a host starts it (pipes for stdin and stdout)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "coffer", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=serve_env(home),
    )
    assert proc.stdin is not None and proc.stdout is not None
    _BUFFERED.pop(proc.stdout.fileno(), None)  # another process's, whose fd had the number
    proc.stdin.write(line(1, "initialize", INIT) + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    assert b'"result"' in read_line(proc.stdout)
    return proc


def call(proc: subprocess.Popen[bytes], n: int, text: str) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line(n, "tools/call", {"name": "alpha__echo", "arguments": {"text": text}}))
    proc.stdin.flush()
    while True:
        answer = json.loads(read_line(proc.stdout))
        if answer.get("id") == n:
            return dict(answer)


def test_the_engine_answers_the_host_itself_with_its_front_stopped(coffer_home: Path) -> None:
    """The front is not on the way: stopped (SIGSTOP), its host's calls are still answered."""
    add_fixture(coffer_home, "alpha")
    proc = start(coffer_home)
    try:
        assert call(proc, 2, "before")["result"]["content"][0]["text"] == "before"
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            assert call(proc, 3, "stopped")["result"]["content"][0]["text"] == "stopped"
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_front_lets_its_host_see_the_end_of_its_streams(coffer_home: Path) -> None:
    """The engine holds the host's stdout too: when the front is killed, the engine lets it go, so the
    host sees its server's output end (it would wait for ever on a stream someone still holds)."""
    add_fixture(coffer_home, "alpha")
    proc = start(coffer_home)
    assert proc.stdout is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert read_line(proc.stdout, timeout=15) == b""  # EOF: nobody holds it any more
    deadline = time.monotonic() + 15
    while (state := control.status()) is not None and state["sessions"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state is not None and state["sessions"] == []


def test_the_host_closing_stdin_ends_its_front(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    proc = start(coffer_home)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
    assert read_line(proc.stdout) == b""
    engine = control.status()
    assert engine is not None and alive(int(engine["engine"]["pid"]))  # the engine stays for the next session


def test_a_front_whose_stdout_is_a_file_relays(coffer_home: Path, tmp_path: Path) -> None:
    """Only pipes and sockets are handed over (a terminal or a file is the user's, not a host's): a
    front writing to a file relays the engine's answers itself."""
    add_fixture(coffer_home, "alpha")
    out = tmp_path / "out.jsonl"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "coffer", "serve"],
            stdin=subprocess.PIPE,
            stdout=sink,
            stderr=subprocess.DEVNULL,
            env=serve_env(coffer_home),
        )
        assert proc.stdin is not None
        proc.stdin.write(line(1, "initialize", INIT) + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proc.stdin.write(line(2, "tools/call", {"name": "alpha__echo", "arguments": {"text": "filed"}}))
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while b'"id":2' not in out.read_bytes().replace(b" ", b"") and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
    answers = {m["id"]: m for m in map(json.loads, out.read_bytes().splitlines()) if "id" in m}
    assert answers[2]["result"]["content"][0]["text"] == "filed"


def test_the_front_loads_no_sdk() -> None:
    """What runs per agent session stays small: neither way of fronting loads the SDK, anyio or pydantic."""
    code = (
        "import sys\nimport coffer.engine.front, coffer.engine.handed\n"
        "print(sorted(m for m in ('mcp', 'anyio', 'pydantic', 'typer', 'rich') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_every_request_the_dead_engine_had_read_is_answered_by_the_front(coffer_home: Path, tmp_path: Path) -> None:
    """Three requests sent in one write, the engine killed while they run: each gets the front's error at
    once (the engine noted all three as it read them), and the session goes on through a new engine."""
    events = tmp_path / "events.txt"
    add_fixture(coffer_home, "alpha", events=events, timeout=60)
    proc = start(coffer_home)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        slow = {"name": "alpha__slow", "arguments": {"seconds": 50}}
        proc.stdin.write(b"".join(line(n, "tools/call", slow) for n in (2, 3, 4)))
        proc.stdin.flush()
        deadline = time.monotonic() + 20
        while "slow:start" not in (events.read_text() if events.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        state = control.status()
        assert state is not None
        os.kill(int(state["engine"]["pid"]), signal.SIGKILL)
        errors = {}
        while len(errors) < 3:
            answer = json.loads(read_line(proc.stdout, timeout=15))
            if answer.get("id") in (2, 3, 4):
                errors[answer["id"]] = answer["error"]["message"]
        assert all("engine stopped while this request was in flight" in m for m in errors.values())
        assert call(proc, 5, "after")["result"]["content"][0]["text"] == "after"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("first", [b"{", b"F"])
def test_fds_sent_with_anything_but_a_fronts_hello_are_not_kept(coffer_home: Path, first: bytes) -> None:
    """The engine keeps a passed fd only for a front's session: fds sent with a status request (or with a
    front's first byte and then no front's hello) are closed at once, so their pipe's reader sees its end."""
    add_fixture(coffer_home, "alpha")
    start(coffer_home).kill()  # an engine running
    read_end, write_end = os.pipe()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(place.socket_path()))
        socket.send_fds(sock, [first], [write_end])
        os.close(write_end)
        hello = b'{"coffer": "status"}\n'
        sock.sendall(hello[1:] if first == b"{" else hello)  # "{" was the hello's first byte
        sock.recv(65536)
        sock.close()
        ready, _, _ = select.select([read_end], [], [], 15)
        assert ready and os.read(read_end, 1) == b""  # EOF: nobody holds the write end any more
    finally:
        os.close(read_end)
