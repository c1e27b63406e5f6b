"""`coffer ui`'s server: the guarded Starlette app on a loopback port, the URL with the token, and the
browser opened on it."""

from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
import webbrowser
from importlib import resources
from pathlib import Path
from typing import Any

from coffer.console.guard import Guard
from coffer.errors import CofferError
from coffer.loopback import LOOPBACK, tcp_listener

DEFAULT_PORT = 8760
TRIES = 20  # with the default port taken, the next ones are tried (a second console, another program)


def static_dir() -> Path:
    return Path(str(resources.files("coffer.console") / "static"))


def build(token: str, port: int) -> Any:
    """The console's ASGI app: the page and its assets, the JSON API, all behind the guard."""
    from starlette.applications import Starlette
    from starlette.responses import FileResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from coffer.console.api import ROUTES

    page = static_dir() / "index.html"

    async def index(_request: Any) -> FileResponse:
        return FileResponse(page, media_type="text/html; charset=utf-8")

    routes = [Route("/", index), *ROUTES, Mount("/static", StaticFiles(directory=static_dir()), name="static")]
    return Guard(Starlette(routes=routes), token, port)


def listen(port: int | None) -> socket.socket:
    """The port asked for, or the default and the next free one after it."""
    if port is not None:
        return tcp_listener(port)
    for candidate in range(DEFAULT_PORT, DEFAULT_PORT + TRIES):
        try:
            return tcp_listener(candidate)
        except CofferError:
            continue
    return tcp_listener(0)


def open_in_browser(url: str) -> bool:
    """Open `url` in the desktop's browser, off the main thread (a slow browser start must not delay the
    server). Not on a Linux box with no display: Python's webbrowser would fall back to a text browser
    in this very terminal; the printed URL is there to open instead."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        sys.stderr.write("coffer: no display here: open the URL above in a browser\n")
        return False
    threading.Thread(target=webbrowser.open, args=(url,), name="coffer-open-browser", daemon=True).start()
    return True


def run(port: int | None = None, open_browser: bool = True) -> None:
    """Serve the console until interrupted; prints the URL (with its token) on stdout, one line."""
    import uvicorn

    sock = listen(port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(32)
    url = f"http://{LOOPBACK}:{bound}/?token={token}"
    config = uvicorn.Config(build(token, bound), log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    sys.stdout.write(f"coffer console: {url}\n")
    sys.stdout.flush()
    if open_browser:
        open_in_browser(url)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
