"""The one place Coffer opens a TCP listener (`serve --http`, the OAuth callback, later listeners).

Every accepted connection must have Nagle's algorithm off. A kept-alive HTTP client (Node's fetch,
curl, `http.client`) otherwise waits up to 40 ms per call: uvicorn writes an SSE answer in three
pieces and the last one is held until the client's delayed ACK of the one before it. asyncio turns
`TCP_NODELAY` on for an accepted connection only when the listening socket was created with
`proto=IPPROTO_TCP` (a plain `socket.socket(AF_INET, SOCK_STREAM)` has proto 0), so the listener is
created that way; `TCP_NODELAY` is also set on the listener itself, which Linux and the BSDs copy to
every socket `accept()` returns, for servers that accept without asyncio's transports.
"""

from __future__ import annotations

import socket

from coffer.errors import CofferError

LOOPBACK = "127.0.0.1"


def tcp_listener(port: int = 0, host: str = LOOPBACK, backlog: int = 128) -> socket.socket:
    """A bound, listening, non-inheritable TCP socket whose connections have `TCP_NODELAY` on.

    Raises CofferError (one line: the address and the reason) when the port cannot be bound.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise CofferError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock
