"""The host side of streamable HTTP: the gateway's ASGI app behind uvicorn, on a loopback socket.

The app is the SDK's streamable HTTP transport (replies shaped by `coffer.gateway.httpshape`) inside two
guards: a bearer token (coffer.trust.http_token) unless `--no-auth`, and a 400 for an
`MCP-Protocol-Version` Coffer does not speak. `coffer serve --http` in-process and the engine (one
server per `serve --http` front) both build theirs here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coffer.gateway.server import Gateway
    from coffer.trust.team import Verifier

# An idle kept-alive connection is closed by the client, not by us: uvicorn's default (5 s) equals httpx's
# pool expiry, and a call made 5 s after the last one raced the close and lost (ReadError), which ends
# the MCP SDK client's whole session. Longer than httpx (5 s), undici (4 s), aiohttp (15 s) and Go (90 s).
KEEP_ALIVE_S = 120


async def _answer(send: Any, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    """A whole JSON response from a guard, before the app sees the request."""
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json"), *headers]}
    )
    await send({"type": "http.response.body", "body": body})


def _guarded(app: Any, token: str) -> Any:
    """Every HTTP request must carry `Authorization: Bearer <token>` (coffer.trust.http_token)."""
    from coffer.trust.http_token import authorised

    body = b'{"error": "unauthorized", "error_description": "send Authorization: Bearer <coffer http token>"}'

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not authorised(dict(scope["headers"]).get(b"authorization", b""), token):
            await _answer(send, 401, body, (b"www-authenticate", b'Bearer realm="coffer"'))
            return
        await app(scope, receive, send)

    return guarded


MCP_SESSION = b"mcp-session-id"
MAX_SESSIONS = 100_000  # sessions remembered with their member (the oldest forgotten: it has long expired)


def _team_guarded(
    app: Any, verifier: Verifier, on_secret: Callable[[str], None] = lambda _sub: None, console: Any = None
) -> Any:
    """The gateway as an OAuth 2.1 protected resource (coffer.trust.team): its RFC 9728 metadata at the
    well-known path, and every other request carrying an access token the team's provider issued for it.
    A missing or invalid token is a 401 whose `WWW-Authenticate` names the metadata (how an MCP client
    finds the provider); a valid one that lacks a scope or speaks for no member is a 403. A session is
    its member's: another member's token naming it gets the SDK's own 404 for a session not there."""
    import json

    import anyio

    from coffer.gateway.memberconsole import PREFIX
    from coffer.trust.member_secrets import ROUTE
    from coffer.trust.team import Refused

    team = verifier.team
    sessions: dict[str, str] = {}  # MCP session id -> the member that opened it
    metadata = json.dumps(team.metadata()).encode()
    wellknown = {team.metadata_path, "/.well-known/oauth-protected-resource"}
    pointer = f'resource_metadata="{team.metadata_url}"'

    async def refuse(send: Any, status: int, challenge: str, body: dict[str, str]) -> None:
        value = challenge.encode("latin-1", errors="replace")
        await _answer(send, status, json.dumps(body).encode(), (b"www-authenticate", value))

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if console is not None and (scope["path"] == PREFIX or scope["path"].startswith(PREFIX + "/")):
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if host != team.host and host.rpartition(":")[0] not in ("127.0.0.1", "localhost", "[::1]"):
                await _answer(send, 421, json.dumps({"error": f"the console answers as {team.host}"}).encode())
                return
            await console(scope, receive, send)  # signs a person in itself (coffer.gateway.memberconsole)
            return
        if scope["path"] in wellknown and scope["method"] in ("GET", "HEAD"):
            await _answer(send, 200, metadata, (b"cache-control", b"max-age=300"))
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            body = {"error": "unauthorized", "error_description": "send Authorization: Bearer <access token>"}
            await refuse(send, 401, f"Bearer {pointer}", body)
            return
        try:
            member = verifier.peek(token.strip())
            if member is None:
                member = await anyio.to_thread.run_sync(verifier.check, token.strip())
        except Refused as exc:
            extra = f', scope="{" ".join(team.scopes)}"' if exc.error == "insufficient_scope" else ""
            quoted = exc.description.replace("\\", "").replace('"', "'")  # a quoted-string (RFC 9110)
            challenge = f'Bearer error="{exc.error}", error_description="{quoted}"{extra}, {pointer}'
            await refuse(send, exc.status, challenge, {"error": exc.error, "error_description": exc.description})
            return
        asked = dict(scope["headers"]).get(MCP_SESSION, b"").decode("latin-1")
        if asked and sessions.get(asked, member.sub) != member.sub:  # another member's session: not there
            gone: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32001, "message": "Session not found"},
            }
            await _answer(send, 404, json.dumps(gone).encode())
            return
        if scope["path"] == ROUTE or scope["path"].startswith(ROUTE + "/"):
            await _member_secrets(scope, receive, send, member.sub, on_secret)
            return
        scope.setdefault("state", {}).update(member=member.sub, team_member=member)

        async def binding(message: Any) -> None:  # a session the SDK opens is its member's alone
            if message["type"] == "http.response.start" and not asked:
                made = dict(message.get("headers") or []).get(MCP_SESSION, b"").decode("latin-1")
                if made:
                    sessions[made] = member.sub
                    while len(sessions) > MAX_SESSIONS:
                        sessions.pop(next(iter(sessions)))
            await send(message)

        await app(scope, receive, binding)

    return guarded


async def _member_secrets(scope: Any, receive: Any, send: Any, sub: str, changed: Callable[[str], None]) -> None:
    """`/member/secrets[/NAME]`: the member's own secrets for its per-member servers, by its own token
    (coffer.trust.member_secrets). GET lists their names; PUT sets one (the body, as text); DELETE
    drops one. A change stops the member's own processes, to start again with it."""
    import json

    import anyio

    from coffer.errors import CofferError
    from coffer.gateway.memberconsole import read_body
    from coffer.trust import member_secrets

    name = scope["path"].removeprefix(member_secrets.ROUTE).strip("/")
    method = scope["method"]
    try:
        if not name and method == "GET":
            names = await anyio.to_thread.run_sync(member_secrets.names, sub)
            await _answer(send, 200, json.dumps({"names": names}).encode())
            return
        if name and method == "PUT":
            body = await read_body(receive, member_secrets.MAX_VALUE + 1024)
            value = body.decode("utf-8", errors="strict").strip()
            await anyio.to_thread.run_sync(member_secrets.put, sub, name, value)
        elif name and method == "DELETE":
            if not await anyio.to_thread.run_sync(member_secrets.remove, sub, name):
                await _answer(send, 404, json.dumps({"error": f"no member secret '{name}'"}).encode())
                return
        else:
            said = f"{method} {member_secrets.ROUTE}{'/NAME' if name else ''} is not served"
            await _answer(send, 405, json.dumps({"error": said}).encode())
            return
    except (CofferError, ValueError) as exc:  # ValueError: too large, or not UTF-8
        await _answer(send, 400, json.dumps({"error": str(exc)}).encode())
        return
    changed(sub)
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _versioned(app: Any) -> Any:
    """A request whose `MCP-Protocol-Version` header names no revision Coffer speaks gets 400 with that
    said (the SDK would take it for a 2026-07-28 request and complain about missing `_meta` keys)."""
    import json

    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    async def versioned(scope: Any, receive: Any, send: Any) -> None:
        version = dict(scope["headers"]).get(b"mcp-protocol-version") if scope["type"] == "http" else None
        if version is not None and version.decode("latin-1").strip() not in SUPPORTED_PROTOCOL_VERSIONS:
            shown = version.decode("latin-1")[:40]
            message = (
                f"Bad Request: unsupported MCP-Protocol-Version {shown!r}; "
                f"coffer speaks {', '.join(SUPPORTED_PROTOCOL_VERSIONS)}"
            )
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
            await _answer(send, 400, json.dumps(error).encode())
            return
        await app(scope, receive, send)

    return versioned


def server(gateway: Gateway, token: str | None, quiet: bool = False, team: Verifier | None = None) -> Any:
    """A uvicorn server for the gateway's streamable HTTP app (bearer-guarded unless `token` is None;
    behind the team's identity provider with `team`); `quiet`: it leaves signals to its process (the
    engine runs several, one per `serve --http`)."""
    import uvicorn

    from coffer.gateway.sdk import streamable_http_app

    # Host and Origin checks stay on; an answer with nothing before it goes out as JSON (httpshape)
    app = _versioned(streamable_http_app(gateway.server, public=team.team.host if team is not None else None))
    if team is not None:
        from coffer.gateway.memberconsole import MemberConsole
        from coffer.trust.exchange import Exchanger

        gateway.pool.exchanger = Exchanger(team)  # `exchange` servers: members' tokens traded (RFC 8693)
        listings, pool = gateway.listings, gateway.pool
        console = MemberConsole(team, listings.reach_of, pool.forget_member, pool.spawn, listings.grantable)
        app = _team_guarded(app, team, gateway.pool.forget_member, console)
    elif token is not None:
        app = _guarded(app, token)
    # httptools (a dependency) parses HTTP in C: measured 0.5-1 ms less per call than h11 (bench --http)
    # in the engine, a `serve --http` that ends must not wait on a client's open event stream for ever
    # no proxy headers: loopback only, and one middleware less on every request
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        http="auto",
        proxy_headers=False,
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=2 if quiet else None,
    )

    class Quiet(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Quiet(config) if quiet else uvicorn.Server(config)


def serving_line(port: int, token: bool, team: Verifier | None = None) -> str:
    how = "bearer token required (coffer paths: http_token)" if token else "no authentication (--no-auth)"
    if team is not None:
        how = f"access tokens from {team.team.issuer} for {team.team.resource} required ([team])"
        return f"coffer: serving MCP on http://{team.team.listen}:{port}/mcp, {how}\n"
    return f"coffer: serving MCP on http://127.0.0.1:{port}/mcp, {how}\n"
