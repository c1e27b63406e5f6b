"""OAuth 2.1 for HTTP upstreams, as the MCP authorization spec describes, on the SDK's client.

The SDK's `OAuthClientProvider` does the protocol: protected-resource metadata (RFC 9728) and
authorization-server metadata (RFC 8414, with the 2025-03-26 fallbacks), dynamic registration or a
client ID metadata document or a pre-registered client, PKCE S256, the scopes the server asks for,
refresh before expiry and on 401, one step-up on 403 `insufficient_scope`. Coffer gives it a token
store (`coffer.trust.oauth_store`) and, when a person can authorise (`coffer auth`, or a step-up with
`COFFER_AUTH_HEADLESS=1`), a loopback redirect: the browser is opened on the authorization URL, or
with `headless` the URL is fetched and its redirects followed to the loopback callback (authorization
servers that approve without a login page, as test servers do). Without one (`coffer serve`), an
upstream that needs a new authorisation fails with `AuthorizationNeeded`, which names `coffer auth`.
"""

from __future__ import annotations

import os
import socket
import webbrowser
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from coffer import __version__
from coffer.errors import CofferError, UpstreamError
from coffer.loopback import tcp_listener
from coffer.trust import exchange, oauth_store
from coffer.trust.exchange import Exchanger
from coffer.trust.oauth_store import OAuthStore
from coffer.trust.redact import scrub
from coffer.upstreams import sdk
from coffer.vault.servers import ServerConfig

CALLBACK_PATH = "/callback"
HEADLESS_ENV = "COFFER_AUTH_HEADLESS"
PERSON_WAIT_S = 300.0  # how long `coffer auth` waits for the browser to come back


class AuthorizationNeeded(UpstreamError):
    """The server needs a (new) authorisation and nobody is there to give it."""


class FlowFailed(UpstreamError):
    """The authorization flow itself failed: the authorization server refused the request, or nobody
    came back from its page in time. Said as it is, not as the 401 that started the flow."""


_person: dict[str, bool] = {}  # set by `coffer auth` (and `coffer call` with COFFER_AUTH_HEADLESS=1)


@contextmanager
def person(headless: bool) -> Iterator[None]:
    """While inside, this process may run the authorization flow: a person is at the terminal (or
    `headless`). Scoped, so nothing started later (a `coffer call`) authorises without being asked."""
    before = dict(_person)
    _person["headless"] = headless
    try:
        yield
    finally:
        _person.clear()
        _person.update(before)


def person_mode() -> bool | None:
    """None: nobody can authorise here; else whether the flow runs headless."""
    if os.environ.get(HEADLESS_ENV) == "1":
        return True
    return _person.get("headless")


@asynccontextmanager
async def provider_for(
    server: str, url: str, enabled: bool, member: str | None = None
) -> AsyncIterator[httpx2.Auth | None]:
    """The auth an upstream connection uses: None without OAuth, else interactive or unattended; a team
    member's connection uses the member's own grant (given in the members' console), never the owner's."""
    if not enabled:
        yield None
        return
    mode = person_mode()
    if member is not None or mode is None:
        if await anyio.to_thread.run_sync(oauth_store.state, server, member, url) == "none":  # nothing granted:
            yield NotGranted(_needs(server, member))
            return  # said at once, with no client registered at its authorization server for nothing
        yield unattended(server, url, member)
        return
    async with interactive(server, url, headless=mode) as provider:
        yield provider


@asynccontextmanager
async def connection_auth(cfg: ServerConfig, member: str | None, exchanger: Exchanger | None) -> AsyncIterator[Any]:
    """The auth of a connection to an HTTP upstream: a team member's token exchanged for this server's
    (`exchange`, coffer.trust.exchange), an OAuth grant (the owner's, or a member's own), or none."""
    assert cfg.url is not None
    if cfg.exchange is not None:
        yield exchange.auth_for(exchanger, cfg.name, member, cfg.url, cfg.exchange)
        return
    async with provider_for(cfg.name, cfg.url, cfg.oauth, member) as auth:
        yield auth


class NotGranted(httpx2.Auth):
    """A connection to a server nobody has authorised yet (`coffer auth`, or a member in the console):
    refused before any request, so nothing is registered at its authorization server on the way."""

    def __init__(self, said: str) -> None:
        self.said = said

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.said:  # always: the request is never sent
            raise AuthorizationNeeded(self.said)
        yield request


class CofferOAuth(sdk.OAuthProvider):
    """The SDK's provider as Coffer completes it (coffer.gateway.sdk); a missing authorisation is a
    flow failure too, recorded for the upstream's one-line error."""

    flow_errors = (OAuthFlowError, AuthorizationNeeded, FlowFailed)


def client_metadata(redirect_uri: str, scope: str | None = None) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name=f"Coffer {__version__}",
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )


def unattended(server: str, url: str, member: str | None = None) -> OAuthClientProvider:
    """A provider for `coffer serve`: stored tokens, refreshed as needed; never asks a person."""
    said = _needs(server, member)

    async def refuse(_url: str) -> None:
        raise AuthorizationNeeded(said)

    async def nothing() -> AuthorizationCodeResult:  # never reached: `refuse` raises first
        raise AuthorizationNeeded(said)

    store = OAuthStore(server, member, url)
    return CofferOAuth(url, client_metadata("http://127.0.0.1/callback"), store, refuse, nothing)


def _needs(server: str, member: str | None) -> str:
    """The line an upstream without an authorisation fails with: who gives it, and where."""
    how = f"run `coffer auth {server}`" if member is None else f"'{member}' connects it in the members' console"
    return f"server '{server}' needs authorisation: {how}"


class Grant:
    """One authorization-code flow that a web page carries rather than a terminal: a team member's grant
    to a per-member server in the members' console (coffer.gateway.memberconsole). `run` (in a task
    group) asks the server as the member with the SDK's provider; when it needs an authorisation the
    address to send the member to is `authorization_url`, and the provider's redirect back comes in
    through `arrive`. Tokens go to the member's own store."""

    def __init__(self, server: str, url: str, member: str, redirect_uri: str) -> None:
        self.server, self.url, self.member, self.redirect_uri = server, url, member, redirect_uri
        self.authorization_url: str | None = None
        self.state: str | None = None
        self.error: str | None = None
        self.asked = anyio.Event()  # the address is known, or the flow ended without needing one
        self.done = anyio.Event()
        self._result: AuthorizationCodeResult | None = None
        self._arrived = anyio.Event()

    async def run(self) -> None:
        async def redirect(authorization_url: str) -> None:
            self.authorization_url = authorization_url
            self.state = parse_qs(urlsplit(authorization_url).query).get("state", [None])[0]
            self.asked.set()

        async def callback() -> AuthorizationCodeResult:
            await self._arrived.wait()
            assert self._result is not None
            return self._result

        store = OAuthStore(self.server, self.member, self.url)
        provider = CofferOAuth(self.url, client_metadata(self.redirect_uri), store, redirect, callback)
        try:
            with anyio.fail_after(PERSON_WAIT_S):
                status = await _initialize(self.url, {}, provider)
            if status >= 400:
                self.error = f"'{self.server}' still answers HTTP {status} after the authorisation"
        except Exception as exc:  # the flow's own failure, for the page to show in one line
            self.error = str(getattr(provider, "failure", None) or exc) or type(exc).__name__
        finally:
            self.asked.set()
            self.done.set()

    def arrive(self, code: str, state: str | None, iss: str | None) -> None:
        self._result = AuthorizationCodeResult(code=code, state=state, iss=iss)
        self._arrived.set()


@asynccontextmanager
async def interactive(server: str, url: str, headless: bool | None = None) -> AsyncIterator[OAuthClientProvider]:
    """A provider that can run the authorization-code flow, with a loopback callback for as long as it is open."""
    headless = os.environ.get(HEADLESS_ENV) == "1" if headless is None else headless
    results: list[AuthorizationCodeResult] = []
    refused: list[str] = []  # the authorization server's error, sent back instead of a code
    arrived = anyio.Event()

    async def serve_callback(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                request = await _read_request(stream)
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return
            target = request.split(b" ", 2)[1].decode("latin-1") if request.count(b" ") >= 2 else "/"
            parts = urlsplit(target)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if parts.path == CALLBACK_PATH and "code" in query and not arrived.is_set():
                results.append(
                    AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
                )
                arrived.set()
            elif parts.path == CALLBACK_PATH and "error" in query and not arrived.is_set():  # RFC 6749 4.1.2.1
                refused.append(_error_words(query))
                arrived.set()
            body = b"Coffer: authorised. You can close this window." if "code" in query else b"Coffer: no code."
            head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n"
            await stream.send(head.encode() + body)

    listener = await anyio.abc.SocketListener.from_socket(await anyio.to_thread.run_sync(_callback_socket, server))
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    redirect_uri = f"http://127.0.0.1:{port}{CALLBACK_PATH}"

    async def redirect(authorization_url: str) -> None:
        if headless:
            await _follow(authorization_url)
            return
        import sys

        sys.stderr.write(f"coffer: opening your browser to authorise '{server}':\n  {authorization_url}\n")
        if not webbrowser.open(authorization_url):
            sys.stderr.write("coffer: no browser could be opened: open the address above yourself\n")

    async def callback() -> AuthorizationCodeResult:
        waited = PERSON_WAIT_S if not headless else 60.0
        with anyio.move_on_after(waited):
            await arrived.wait()
        if refused:
            raise FlowFailed(f"the authorization server refused: {refused[0]}")
        if not results:
            raise FlowFailed(f"nobody came back from the authorization page within {waited:g} s")
        return results[0]

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve_callback)
            try:
                yield CofferOAuth(url, client_metadata(redirect_uri), OAuthStore(server, url=url), redirect, callback)
            finally:
                tg.cancel_scope.cancel()
    finally:  # closed once the accept loop is cancelled: closing under a pending accept raises in it
        await listener.aclose()


def _callback_socket(server: str) -> socket.socket:
    """The loopback socket the authorization server sends the browser back to. A client registered
    before (by an earlier `coffer auth`, or given by the user) names one redirect address, and a strict
    authorization server (the MCP SDK's own) accepts no other, so its port is listened on again. Where
    Coffer's own registration names no port or its port is taken, it is dropped and the flow registers
    anew; a user's client without a port gets any port (RFC 8252 7.3)."""
    client = oauth_store.registered_client(server) or {}
    uris = client.get("redirect_uris")
    port = urlsplit(str(uris[0])).port if isinstance(uris, list) and uris else None
    ours = str(client.get("client_name") or "").startswith("Coffer ")  # what a registration echoes back
    if port:
        try:
            return tcp_listener(port)
        except CofferError:
            if not ours:
                raise UpstreamError(
                    f"cannot listen on 127.0.0.1:{port}, the redirect address of the client registered for "
                    f"'{server}': free the port, or run `coffer auth {server} --logout` to register a new client"
                ) from None
    if ours:
        oauth_store.forget_client(server)
    return tcp_listener()


async def _read_request(stream: anyio.abc.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        data += await stream.receive()
    return data


async def _follow(authorization_url: str) -> None:
    """Headless: fetch the authorization URL and follow its redirects to the loopback callback."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=30.0) as http:
        response = await http.get(authorization_url)
    back = urlsplit(str(response.url)).path == CALLBACK_PATH  # the redirects reached the loopback callback
    if response.status_code in (401, 403) or (response.status_code < 400 and not back):
        raise FlowFailed(
            f"the authorization server answered HTTP {response.status_code}: it needs a person "
            "(run `coffer auth` without --headless)"
        )
    if response.status_code >= 400:
        raise FlowFailed(f"the authorization server refused the request (HTTP {response.status_code}{_said(response)})")


def _said(response: httpx2.Response) -> str:
    """An error page's OAuth words, if it has any (a JSON body), as `: words`."""
    try:
        body = response.json()
    except ValueError:
        return ""
    words = _error_words(body) if isinstance(body, dict) else ""
    return f": {words}" if words else ""


def _error_words(said: dict[str, Any]) -> str:
    """An OAuth error's own words, short and scrubbed: `error` and `error_description`, as a redirect's
    query (RFC 6749 4.1.2.1) or an error body carries them: what the authorization server objected to."""
    return scrub(" ".join(str(said[k]) for k in ("error", "error_description") if isinstance(said.get(k), str)))[:200]


def needs_oauth(status: int | None, www_authenticate: str | None) -> bool:
    """A 401 with a Bearer challenge: the server authorises with OAuth, not a static header."""
    return status == 401 and (www_authenticate or "").lower().startswith("bearer")


async def challenge(url: str, headers: dict[str, str]) -> bool:
    """Does the server at `url` answer an unauthenticated initialize with 401 and a Bearer challenge?"""
    try:
        async with httpx2.AsyncClient(timeout=10.0) as http:
            response = await http.post(url, json=_INITIALIZE, headers=headers | _ACCEPT)
    except httpx2.HTTPError:
        return False
    return needs_oauth(response.status_code, response.headers.get("www-authenticate"))


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "coffer"}},
}
_ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def _initialize(url: str, headers: dict[str, str], auth: Any) -> int:
    """An initialize with `auth` (which may run its flow first): the server's final status."""
    async with (
        httpx2.AsyncClient(timeout=30.0, auth=auth) as http,
        http.stream("POST", url, json=_INITIALIZE, headers=headers | _ACCEPT) as response,
    ):
        return response.status_code
