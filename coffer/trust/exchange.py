"""Token exchange (RFC 8693): a team member reaches an HTTP upstream that trusts the team's provider
with a token the provider issues for that upstream, in exchange for the member's own.

    [team]
    exchange_client = { id = "coffer-gateway", secret = "${secret:IDP_SECRET}" }

    [servers.tickets]
    url = "https://tickets.example.com/mcp"
    share = "member"          # one connection per member: the token is the member's
    exchange = true           # or { scope = "tickets:read", audience = "tickets" }

The member's token is never sent upstream: its audience is this gateway. The gateway, as the confidential
client `exchange_client`, trades the member's latest valid token (kept in memory by the Verifier, never
on disk) at the provider's token endpoint for one whose audience is the upstream (`resource`: its URL,
RFC 8707, or the `audience` named) and whose subject is still the member. Exchanged tokens are kept per
member and upstream until shortly before they expire, and exchanged again after an upstream's 401.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2

from coffer.errors import UpstreamError
from coffer.trust.team import Refused, Verifier

GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
EARLY_S = 30.0  # an exchanged token is exchanged again this long before it expires
DEFAULT_TTL_S = 300.0  # kept this long when the provider does not say (`expires_in`)


class ExchangeFailed(UpstreamError):
    """The provider would not (or could not) exchange the member's token; the line says why."""


@dataclass
class Exchanger:
    """Trades members' tokens for upstreams' at the team's provider; thread-safe, one per team gateway."""

    verifier: Verifier
    _kept: dict[tuple[str, str, str], tuple[float, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def token(self, sub: str, url: str, options: Mapping[str, str]) -> str:
        """An access token for the upstream at `url`, speaking for the member `sub`."""
        key = (sub, url, repr(sorted(options.items())))
        kept = self._kept.get(key)
        if kept is not None and kept[0] > time.time():
            return kept[1]
        team = self.verifier.team
        if team.exchange_client is None:
            raise ExchangeFailed("[team] names no exchange_client: the gateway cannot exchange members' tokens")
        subject = self.verifier.latest(sub)
        if subject is None:
            raise ExchangeFailed(f"'{sub}' has no valid token here to exchange: its agent must sign in again")
        try:
            endpoint = self.verifier.provider_metadata().get("token_endpoint")
        except Refused as exc:
            raise ExchangeFailed(exc.description) from None
        if not isinstance(endpoint, str):
            raise ExchangeFailed(f"{team.issuer} publishes no token_endpoint")
        form = {
            "grant_type": GRANT,
            "subject_token": subject,
            "subject_token_type": ACCESS_TOKEN,
            "requested_token_type": ACCESS_TOKEN,
        }
        if "audience" in options:
            form["audience"] = options["audience"]
        else:
            form["resource"] = url
        if options.get("scope"):
            form["scope"] = options["scope"]
        try:
            answer = httpx2.post(endpoint, data=form, auth=team.exchange_client, timeout=10)
            data = answer.json()
        except (httpx2.HTTPError, ValueError) as exc:
            raise ExchangeFailed(f"token exchange at {team.issuer} failed: {exc}") from None
        token = data.get("access_token") if isinstance(data, dict) else None
        if answer.status_code != 200 or not isinstance(token, str):
            said = data.get("error_description") or data.get("error") if isinstance(data, dict) else None
            raise ExchangeFailed(f"{team.issuer} refused to exchange '{sub}''s token: {said or answer.status_code}")
        ttl = data.get("expires_in")
        ttl = float(ttl) if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else DEFAULT_TTL_S
        with self._lock:
            self._kept[key] = (time.time() + max(ttl - EARLY_S, 0.0), token)
        return token

    def forget(self, sub: str, url: str) -> None:
        """The upstream refused a token: the next request exchanges again."""
        with self._lock:
            for key in [k for k in self._kept if k[:2] == (sub, url)]:
                del self._kept[key]


class ExchangeAuth(httpx2.Auth):
    """An upstream connection's auth: each request carries the member's exchanged token; a 401 is
    answered once with a freshly exchanged one."""

    def __init__(self, exchanger: Exchanger, sub: str, url: str, options: Mapping[str, str]) -> None:
        self.exchanger, self.sub, self.url, self.options = exchanger, sub, url, dict(options)

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        import anyio

        token = await anyio.to_thread.run_sync(self.exchanger.token, self.sub, self.url, self.options)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            self.exchanger.forget(self.sub, self.url)
            token = await anyio.to_thread.run_sync(self.exchanger.token, self.sub, self.url, self.options)
            request.headers["Authorization"] = f"Bearer {token}"
            yield request


def auth_for(exchanger: Exchanger | None, server: str, sub: str | None, url: str, options: Any) -> Any:
    """The httpx auth of a member's connection to an `exchange` server; an error line where it cannot be."""
    if exchanger is None or sub is None:
        raise ExchangeFailed(
            f"server '{server}' is reached with a team member's exchanged token: only a team gateway's members reach it"
        )
    return ExchangeAuth(exchanger, sub, url, options)
