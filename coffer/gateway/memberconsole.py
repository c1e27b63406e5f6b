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

A member also grants its own access to the per-member servers that authorise with OAuth (`share =
"member"`, `oauth = true`): "Connect" runs the MCP authorization flow with the gateway as the OAuth
client (coffer.upstreams.oauth.Grant, the SDK's provider: discovery, registration, PKCE), the browser
sent to the server's authorization server and back to `/console/oauth/callback`, which only the same
member's session may complete. The tokens go to that member's own file, and the member's process of
the server starts again with them.
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
from coffer.upstreams.oauth import Grant

PREFIX = "/console"
COOKIE = "coffer-team-session"
LOGIN_S = 600.0  # a sign-in not finished within this long starts again
SESSION_S = 3600.0  # a session whose token named no expiry (an introspected one may not) lasts this long
MAX_PENDING = 10_000
GRANT_WAIT_S = 30.0  # how long a Connect waits for the server's authorization address, a callback for the tokens
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
    grantable: dict[str, str]  # per-member servers it reaches that authorise with OAuth: name -> URL


class MemberConsole:
    """The `/console` routes of one team gateway, as ASGI."""

    def __init__(
        self,
        verifier: Verifier,
        reach_of: Callable[[Member], Awaitable[Reach]],
        on_secret: Callable[[str], None],
        spawn: Callable[..., Any],
        grantable: Callable[[], dict[str, str]],
    ) -> None:
        self.verifier, self.reach_of, self.on_secret, self.spawn = verifier, reach_of, on_secret, spawn
        self.grantable = grantable  # the member being served's per-member OAuth servers (Listings.grantable)
        self.team = verifier.team
        parts = urlsplit(self.team.resource)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.secure = parts.scheme == "https"
        self.redirect_uri = f"{self.origin}{PREFIX}/callback"
        self.pending: dict[str, tuple[str, float]] = {}  # state -> (PKCE verifier, until)
        self.sessions: dict[str, tuple[Member, float]] = {}  # session id -> (member, until)
        self.grants: dict[str, tuple[Grant, float]] = {}  # OAuth state -> (a member's grant under way, until)

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
        elif path == "/oauth/callback" and method == "GET":
            await self._granted(send, headers, dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))))
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
        from coffer.trust import member_secrets, oauth_store
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
            grants = await anyio.to_thread.run_sync(
                lambda: {name: oauth_store.state(name, member.sub, at) for name, at in sorted(reach.grantable.items())}
            )
            body = {
                "sub": member.sub,
                "via": member.via,
                "profile": reach.profile,
                "tools": reach.tools,
                "secrets": names,
                "grants": grants,
            }
            await _json(send, 200, body)
            return
        if path.startswith("/connect/") and method in ("POST", "DELETE"):
            await self._connect(send, member, path.removeprefix("/connect/"), method == "DELETE")
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

    # ------------------------------------------------------------------ a member's OAuth grants

    async def _connect(self, send: Any, member: Member, server: str, drop: bool) -> None:
        """Start the member's grant to `server` (the page then sends the browser to `authorize`), or
        with `drop` forget it."""
        import anyio

        from coffer.trust import oauth_store
        from coffer.trust.team import speaking

        with speaking(member):
            url = self.grantable().get(server)
        if url is None:
            await _json(send, 404, {"error": f"'{server}' is no per-member OAuth server you reach"})
            return
        if drop:
            await anyio.to_thread.run_sync(lambda: oauth_store.forget(server, client_too=True, member=member.sub))
            self.on_secret(member.sub)
            await _json(send, 200, {"connected": False})
            return
        now = time.time()
        self.grants = {k: v for k, v in self.grants.items() if v[1] > now and not v[0].done.is_set()}
        if len(self.grants) >= MAX_PENDING:
            await _json(send, 503, {"error": "too many grants under way: try again in a few minutes"})
            return
        # a fresh grant, and a fresh registration: one made by a start that found no grant names another
        # redirect address than this console's
        await anyio.to_thread.run_sync(lambda: oauth_store.forget(server, client_too=True, member=member.sub))
        grant = Grant(server, url, member.sub, f"{self.origin}{PREFIX}/oauth/callback")
        self.spawn(grant.run)
        with anyio.move_on_after(GRANT_WAIT_S):
            await grant.asked.wait()
        if grant.authorization_url is not None and grant.state:
            self.grants[grant.state] = (grant, now + LOGIN_S)
            await _json(send, 200, {"authorize": grant.authorization_url})
        elif grant.done.is_set() and grant.error is None:  # the server let the member in without asking
            self.on_secret(member.sub)
            await _json(send, 200, {"connected": True})
        else:
            said = grant.error or "its authorization server did not answer in time"
            await _json(send, 502, {"error": f"'{server}' could not be connected: {said}"})

    async def _granted(self, send: Any, headers: dict[str, str], query: dict[str, str]) -> None:
        """The server's authorization server sends the browser back: the grant under way for this state
        goes on, if the browser's session is the member who started it."""
        import anyio

        state = query.get("state", "")
        held = self.grants.get(state)
        member = self._member(headers)
        if held is None or held[1] < time.time():
            await _text(send, 400, f"this grant expired or was not started here: Connect again at {PREFIX}/")
            return
        grant = held[0]
        if member is None or member.sub != grant.member:  # another person's browser finishing it: no (and
            # the grant stays its member's to finish)
            await _text(send, 403, "this grant was started by another session: Connect again from your console")
            return
        del self.grants[state]
        if "code" not in query:
            said = query.get("error_description") or query.get("error") or "no code"
            await _text(send, 403, f"'{grant.server}' was not connected: its authorization server said {said}")
            return
        grant.arrive(query["code"], query.get("state"), query.get("iss"))
        with anyio.move_on_after(GRANT_WAIT_S):
            await grant.done.wait()
        if grant.error is not None or not grant.done.is_set():
            await _text(send, 502, f"'{grant.server}' was not connected: {grant.error or 'no tokens in time'}")
            return
        self.on_secret(member.sub)  # its process of the server starts again, with the grant
        await _redirect(send, f"{PREFIX}/")


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
