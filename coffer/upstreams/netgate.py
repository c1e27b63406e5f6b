"""The only way out of a confined upstream's network namespace: run inside the sandbox, by path.

`python -I -S netgate.py SOCKET PORT -- SERVER ARGV...`. A server
whose policy names hosts runs in a network namespace of its own (loopback only). This program listens
on 127.0.0.1:PORT there, starts the server (HTTPS_PROXY and friends point at that port), and carries
each connection to SOCKET, the Unix socket of Coffer's filtering proxy (coffer.upstreams.egress), bound
into the sandbox. A server that ignores the proxy variables finds no route: the namespace has none.
Standard library only; exits with the server's status when it exits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from typing import NoReturn

PORT = 3128  # inside the server's own network namespace: nothing else listens there
CHUNK = 65536


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(CHUNK):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _carry(client: socket.socket, path: str) -> None:
    """One connection from the server, carried to the proxy outside."""
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as out:
        try:
            out.connect(path)
        except OSError:
            return
        back = threading.Thread(target=_pump, args=(out, client), daemon=True)
        back.start()
        _pump(client, out)
        back.join()


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def main(args: list[str]) -> NoReturn:
    path, port, argv = args[0], int(args[1]), args[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    child = os.fork()
    if child == 0:
        listener.close()
        try:
            os.execv(argv[0], argv)
        except OSError as exc:
            os.write(2, f"coffer: cannot run {argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # only the server holds the pipes: its exit is the gateway's EOF
    os.dup2(null, 1)
    threading.Thread(target=_accept, args=(listener, path), daemon=True).start()
    _, raw = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(raw)
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv[1:])
