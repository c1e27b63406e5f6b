"""Where a server's OAuth tokens and client registration are kept: the secret store (OS keyring, else
the 0600 secrets file), under `oauth.<server>.tokens` and `oauth.<server>.client`; never coffer.toml,
the log, a snapshot or any output. Implements the SDK's `TokenStorage`. A team member's grant to a
per-member server (`share = "member"`, given in the members' console) is kept in that member's own
0600 file instead (coffer.trust.member_secrets), never beside the owner's.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from coffer.errors import CofferError, NotFoundError, SecretError
from coffer.trust import redact, secrets

if TYPE_CHECKING:  # the SDK's models load only when a token is read or written (mcp costs ~1 s to import)
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


def _name(server: str, what: str) -> str:
    return f"oauth.{server}.{what}"


def _get(name: str, member: str | None = None) -> dict[str, Any] | None:
    from coffer.trust import member_secrets

    try:
        if member is not None:
            held = member_secrets.grant(member, name.removeprefix("oauth."))
            value = json.loads(held) if held is not None else None
        else:
            value = json.loads(secrets.resolve(name))
    except (SecretError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _set(name: str, value: str | None, member: str | None) -> None:
    from coffer.trust import member_secrets

    if member is not None:
        member_secrets.set_grant(member, name.removeprefix("oauth."), value)
    elif value is not None:
        secrets.set_secret(name, value)


def _tokens(server: str, member: str | None, url: str | None) -> dict[str, Any] | None:
    """The kept tokens, unless they were granted for another address than `url`: a server removed and
    added again under its name elsewhere, or edited to another URL, never receives the old one's token."""
    data = _get(_name(server, "tokens"), member)
    if data is None or (url is not None and data.get("for", url) != url):  # kept before `for`: no address
        return None
    return data


class OAuthStore:
    """One server's tokens and client information (the SDK's `TokenStorage` protocol); `member`: a team
    member's own grant to it; `url`: the server's address, which its tokens are kept for."""

    def __init__(self, server: str, member: str | None = None, url: str | None = None) -> None:
        self.server = server
        self.member = member
        self.url = url

    async def get_tokens(self) -> OAuthToken | None:
        data = _tokens(self.server, self.member, self.url)
        if data is None:
            return None
        from mcp.shared.auth import OAuthToken

        data.pop("obtained_at", None)
        data.pop("for", None)
        expires_at = data.pop("expires_at", None)
        if isinstance(expires_at, int | float) and data.get("expires_in") is not None:
            data["expires_in"] = max(0, int(expires_at - time.time()))  # what is left, not what was granted
        token = OAuthToken.model_validate(data)
        redact.register(token.access_token, token.refresh_token)
        return token

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = tokens.model_dump(mode="json", exclude_none=True)
        now = time.time()
        data["obtained_at"] = now
        if self.url is not None:
            data["for"] = self.url
        if tokens.expires_in is not None:
            data["expires_at"] = now + tokens.expires_in
        redact.register(tokens.access_token, tokens.refresh_token)
        _set(_name(self.server, "tokens"), json.dumps(data), self.member)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        data = _get(_name(self.server, "client"), self.member)
        return None if data is None else OAuthClientInformationFull.model_validate(data)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        _set(_name(self.server, "client"), client_info.model_dump_json(exclude_none=True), self.member)


def registered_client(server: str) -> dict[str, Any] | None:
    """The client registration kept for `server`: Coffer's own (registered by `coffer auth`) or the user's."""
    return _get(_name(server, "client"))


def forget_client(server: str) -> None:
    """Drop only the client registration (the tokens stay): the next flow registers a new client."""
    with contextlib.suppress(CofferError):  # NotFoundError among them: nothing was kept
        secrets.remove_secret(_name(server, "client"))


def grant_mark(server: str, member: str | None = None, url: str | None = None) -> float | None:
    """When the server's tokens were obtained (None: there are none): a new grant changes it, so an
    upstream that failed for want of one can tell that the user has since given it."""
    data = _tokens(server, member, url)
    obtained = data.get("obtained_at") if data else None
    return float(obtained) if isinstance(obtained, int | float) else None


def state(server: str, member: str | None = None, url: str | None = None) -> str:
    """`authorised`, `expired` (an access token past its time, refreshable or not) or `none` (also when
    its tokens were granted for another address than `url`)."""
    data = _tokens(server, member, url)
    if data is None or not data.get("access_token"):
        return "none"
    expires_at = data.get("expires_at")
    if isinstance(expires_at, int | float) and expires_at < time.time():
        return "expired (refreshable)" if data.get("refresh_token") else "expired"
    return "authorised"


def preregister(server: str, client_id: str, client_secret: str | None, redirect_uri: str) -> None:
    """Keep a client the user registered with the authorization server themselves."""
    from mcp.shared.auth import OAuthClientInformationFull

    info = OAuthClientInformationFull(
        client_id=client_id,
        client_secret=client_secret,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        # RFC 6749 2.3.1: every authorization server must accept HTTP Basic for a client with a secret
        token_endpoint_auth_method="client_secret_basic" if client_secret else "none",
    )
    if client_secret:
        redact.register(client_secret)
    secrets.set_secret(_name(server, "client"), info.model_dump_json(exclude_none=True))


def forget(server: str, client_too: bool = False, member: str | None = None) -> bool:
    """Drop the server's tokens (and its client registration); True when there was anything to drop."""
    if member is not None:
        had = _get(_name(server, "tokens"), member) is not None
        for what in ("tokens", "client") if client_too else ("tokens",):
            _set(_name(server, what), None, member)
        return had
    dropped = False
    for what in ("tokens", "client") if client_too else ("tokens",):
        try:
            secrets.remove_secret(_name(server, what))
            dropped = True
        except (NotFoundError, CofferError):
            continue
    return dropped
