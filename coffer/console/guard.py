"""Who may talk to the console: a loopback Host, a same-origin Origin, and the token (in the URL once,
then an HttpOnly SameSite=Strict cookie, or a Bearer header), as Jupyter does.

DNS rebinding is stopped by the Host check, cross-site requests by the Origin check and the cookie's
SameSite; a write must also be JSON (a form cannot send it) and come from this origin. The token is
compared in constant time and never logged; the URL that carries it is replaced by a redirect at once,
and the page sends no Referer.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE = ("GET", "HEAD")
HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
]


class Guard:
    """ASGI middleware in front of the console's app."""

    def __init__(self, app: App, token: str, port: int) -> None:
        self.app, self.token, self.port = app, token, port
        self.cookie = f"coffer-console-{port}"
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        page = _wants_page(scope, headers)  # a person's browser, not the console's own fetch
        if headers.get("host") not in self.hosts:
            await _answer(send, 403, "this console answers only on its loopback address", page)
            return
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            await _answer(send, 403, "cross-origin request refused")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.get("token")
        if given is not None and method in SAFE:
            if not self._is_token(given):
                await _answer(send, 401, "wrong token: open the URL `coffer ui` printed", page)
                return
            rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
            await self._enter(send, scope["path"] + (f"?{rest}" if rest else ""))
            return
        if not self._holds_token(headers):
            await _answer(send, 401, "no token: open the URL `coffer ui` printed", page)
            return
        is_json = headers.get("content-type", "").startswith("application/json")
        if method not in SAFE and (origin is None or not is_json):
            await _answer(send, 403, "a change must come from the console page (same origin, JSON)")
            return
        await self.app(scope, receive, _with_headers(send))

    def _is_token(self, value: str) -> bool:
        return hmac.compare_digest(value.encode(), self.token.encode())

    def _holds_token(self, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and self._is_token(auth[7:].strip()):
            return True
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no token, not a crash
            return False
        morsel = jar.get(self.cookie)
        return morsel is not None and self._is_token(morsel.value)

    async def _enter(self, send: Send, location: str) -> None:
        """The token was right: keep it as a cookie and send the browser on without it in the URL."""
        cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        headers = [(b"location", location.encode()), (b"set-cookie", cookie.encode()), *HEADERS]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def _with_headers(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *HEADERS]
        await send(message)

    return wrapped


def _wants_page(scope: Scope, headers: dict[str, str]) -> bool:
    """A browser navigating to a page (not /api/, HTML accepted) is answered with a page, not JSON."""
    return not str(scope.get("path", "")).startswith("/api/") and "text/html" in headers.get("accept", "")


PAGE = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>Coffer console</title>"
    "<h1>Coffer console</h1><p>{text}.</p><p>Run <code>coffer ui</code> in a terminal and open the URL "
    "it prints: it carries this session's token, which the console then keeps in a cookie.</p></html>"
)


async def _answer(send: Send, status: int, text: str, page: bool = False) -> None:
    if page:
        import html

        body = PAGE.format(text=html.escape(text.split(":")[0].capitalize())).encode()
        kind = b"text/html; charset=utf-8"
    else:
        body = json.dumps({"error": text}).encode()
        kind = b"application/json"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), *HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
