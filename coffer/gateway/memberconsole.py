"""The members' console of a team gateway (`/console`): a member signs in at the team's identity provider
(OAuth 2.1 authorization code with PKCE, the console a public client named by `[team] console_client`),
then sees who it is to the gateway, what its profile lets it reach, and sets its own secrets for its
per-member servers (coffer.trust.member_secrets).

Only a member's own things are here. The owner's pages (servers, approvals, the log, profiles) are
`coffer ui`, on the owner's loopback, never served to the network: a member cannot reach them however
it signs in.

The sign-in: `/console/login` keeps a random `state` with a PKCE verifier (10 minutes, in memory) and
sends the browser to the provider's authorization endpoint for this gateway's resource; `/console/
callback` trades the code (with the verifier) at the token endpoint for an access token, which the
team `Verifier` checks as it checks every agent's (issuer, audience, scopes, member). The browser then
holds only a random session id (an HttpOnly, SameSite=Lax cookie, Secure over https) that expires with
the token; the token itself is dropped. A write must be JSON from this origin (a form or another site
cannot send it). authlib makes the PKCE verifier and challenge.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from coffer.trust.team import Member, Refused, Verifier

PREFIX = "/console"
COOKIE = "coffer-team-session"
LOGIN_S = 600.0  # a sign-in not finished within this long starts again
SESSION_S = 3600.0  # a session whose token named no expiry (an introspected one may not) lasts this long
MAX_PENDING = 10_000
PAGE_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
]


@dataclass(frozen=True)
class Reach:
    """What the console shows a member of what it reaches (the gateway answers it: `Gateway.reach_of`)."""

    profile: str | None
    tools: list[str]


class MemberConsole:
    """The `/console` routes of one team gateway, as ASGI."""

    def __init__(
        self, verifier: Verifier, reach_of: Callable[[Member], Awaitable[Reach]], on_secret: Callable[[str], None]
    ) -> None:
        self.verifier, self.reach_of, self.on_secret = verifier, reach_of, on_secret
        self.team = verifier.team
        parts = urlsplit(self.team.resource)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.secure = parts.scheme == "https"
        self.redirect_uri = f"{self.origin}{PREFIX}/callback"
        self.pending: dict[str, tuple[str, float]] = {}  # state -> (PKCE verifier, until)
        self.sessions: dict[str, tuple[Member, float]] = {}  # session id -> (member, until)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path, method = scope["path"].removeprefix(PREFIX) or "/", scope["method"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        client = self.team.console_client
        if client is None:
            await _text(send, 404, "this team gateway has no console: [team] console_client names its OAuth client")
            return
        if path == "/login" and method == "GET":
            await self._login(send, client[0])
        elif path == "/callback" and method == "GET":
            await self._callback(send, client, dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))))
        elif path in ("/", "/member.js") and method == "GET":
            if self._member(headers) is None:
                await _redirect(send, f"{PREFIX}/login")
            else:
                await _static(send, "member.html" if path == "/" else "member.js")
        elif path.startswith("/api/"):
            await self._api(scope, receive, send, path.removeprefix("/api"), headers)
        else:
            await _text(send, 404, "not found")

    # ------------------------------------------------------------------ sign-in

    async def _login(self, send: Any, client_id: str) -> None:
        from authlib.common.security import generate_token
        from authlib.oauth2.rfc7636 import create_s256_code_challenge

        meta = await _provider(self.verifier)
        now = time.time()
        self.pending = {k: v for k, v in self.pending.items() if v[1] > now}
        if len(self.pending) >= MAX_PENDING:
            await _text(send, 503, "too many sign-ins under way: try again in a few minutes")
            return
        state, code_verifier = generate_token(32), generate_token(64)
        self.pending[state] = (code_verifier, now + LOGIN_S)
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": self.redirect_uri,
            "scope": " ".join(["openid", *self.team.scopes]),
            "state": state,
            "code_challenge": create_s256_code_challenge(code_verifier),
            "code_challenge_method": "S256",
            "resource": self.team.resource,
        }
        await _redirect(send, f"{meta['authorization_endpoint']}?{urlencode(query)}")

    async def _callback(self, send: Any, client: tuple[str, str | None], query: dict[str, str]) -> None:
        import anyio
        import httpx2

        pending = self.pending.pop(query.get("state", ""), None)
        if pending is None or pending[1] < time.time():
            await _text(send, 400, f"this sign-in expired or was not started here: open {PREFIX}/login again")
            return
        if "error" in query or "code" not in query:
            await _text(
                send, 403, f"the identity provider said: {query.get('error_description') or query.get('error')}"
            )
            return
        meta = await _provider(self.verifier)
        client_id, client_secret = client
        form = {
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": self.redirect_uri,
            "code_verifier": pending[0],
            "resource": self.team.resource,
            "client_id": client_id,
        }
        try:
            async with httpx2.AsyncClient(timeout=10) as http:
                if client_secret:  # a confidential client: its secret by HTTP Basic
                    answer = await http.post(str(meta["token_endpoint"]), data=form, auth=(client_id, client_secret))
                else:  # a public one: the PKCE verifier is its proof
                    answer = await http.post(str(meta["token_endpoint"]), data=form)
            token = answer.json().get("access_token") if answer.status_code == 200 else None
        except (httpx2.HTTPError, ValueError) as exc:
            await _text(send, 502, f"the identity provider could not be asked for a token: {exc}")
            return
        if not isinstance(token, str):
            await _text(send, 403, f"the identity provider gave no token ({answer.status_code})")
            return
        try:
            member = await anyio.to_thread.run_sync(self.verifier.check, token)
        except Refused as exc:
            await _text(send, exc.status, exc.description)
            return
        sid = secrets.token_urlsafe(32)
        now = time.time()
        until = member.expires if member.expires > now else now + SESSION_S  # a token that told no expiry
        self.sessions = {k: v for k, v in self.sessions.items() if v[1] > now}
        self.sessions[sid] = (member, until)
        cookie = f"{COOKIE}={sid}; Path={PREFIX}; HttpOnly; SameSite=Lax; Max-Age={int(until - now)}"
        await _redirect(send, f"{PREFIX}/", (b"set-cookie", (cookie + ("; Secure" if self.secure else "")).encode()))

    def _member(self, headers: dict[str, str]) -> Member | None:
        from http.cookies import SimpleCookie

        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header holds no session
            return None
        held = jar.get(COOKIE)
        kept = self.sessions.get(held.value) if held is not None else None
        return kept[0] if kept is not None and kept[1] > time.time() else None

    # ------------------------------------------------------------------ the member's API

    async def _api(self, scope: Any, receive: Any, send: Any, path: str, headers: dict[str, str]) -> None:
        import anyio

        from coffer.errors import CofferError
        from coffer.trust import member_secrets
        from coffer.trust.team import speaking

        member = self._member(headers)
        if member is None:
            await _json(send, 401, {"error": "not signed in", "login": f"{PREFIX}/login"})
            return
        method = scope["method"]
        if method not in ("GET", "HEAD") and (
            headers.get("origin") != self.origin or not headers.get("content-type", "").startswith("application/json")
        ):
            await _json(send, 403, {"error": "a change must come from the console page (same origin, JSON)"})
            return
        if path == "/me" and method == "GET":
            with speaking(member):
                reach = await self.reach_of(member)
            names = await anyio.to_thread.run_sync(member_secrets.names, member.sub)
            body = {
                "sub": member.sub,
                "via": member.via,
                "profile": reach.profile,
                "tools": reach.tools,
                "secrets": names,
            }
            await _json(send, 200, body)
            return
        if path == "/logout" and method == "POST":
            self.sessions = {k: v for k, v in self.sessions.items() if v[0] is not member}
            await _json(send, 200, {"signed_out": True})
            return
        name = path.removeprefix("/secrets/") if path.startswith("/secrets/") else ""
        try:
            if name and method == "PUT":
                raw = await read_body(receive, member_secrets.MAX_VALUE + 1024)
                value = json.loads(raw or b"{}").get("value")
                if not isinstance(value, str):
                    raise ValueError('send {"value": "..."}')
                await anyio.to_thread.run_sync(member_secrets.put, member.sub, name, value)
            elif name and method == "DELETE":
                if not await anyio.to_thread.run_sync(member_secrets.remove, member.sub, name):
                    await _json(send, 404, {"error": f"no secret '{name}'"})
                    return
            else:
                await _json(send, 404, {"error": "not found"})
                return
        except (CofferError, ValueError) as exc:
            await _json(send, 400, {"error": str(exc)})
            return
        self.on_secret(member.sub)
        await _json(send, 200, {"secrets": await anyio.to_thread.run_sync(member_secrets.names, member.sub)})


async def _provider(verifier: Verifier) -> dict[str, Any]:
    import anyio

    return await anyio.to_thread.run_sync(verifier.provider_metadata)


async def read_body(receive: Any, limit: int) -> bytes:
    """An ASGI request's whole body; ValueError once it passes `limit` bytes (the rest is not read)."""
    body = b""
    while len(body) <= limit:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body
    raise ValueError("the request is too large")


async def _respond(send: Any, status: int, body: bytes, kind: bytes, *extra: tuple[bytes, bytes]) -> None:
    headers = [(b"content-type", kind), *PAGE_HEADERS, *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Any, status: int, body: dict[str, Any]) -> None:
    await _respond(send, status, json.dumps(body).encode(), b"application/json")


async def _text(send: Any, status: int, message: str) -> None:
    await _respond(send, status, f"coffer: {message}\n".encode(), b"text/plain; charset=utf-8")


async def _redirect(send: Any, to: str, *extra: tuple[bytes, bytes]) -> None:
    await _respond(send, 302, b"", b"text/plain", (b"location", to.encode()), *extra)


async def _static(send: Any, name: str) -> None:
    body = resources.files("coffer.gateway").joinpath("static", name).read_bytes()
    kind = b"text/html; charset=utf-8" if name.endswith(".html") else b"text/javascript; charset=utf-8"
    await _respond(send, 200, body, kind)
