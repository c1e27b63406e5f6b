"""`coffer serve --http --team`: the gateway as an OAuth 2.1 protected resource behind the team's own
identity provider, as MCP's authorization spec (2025-06-18 onward) asks of a server.

The vault's `[team]` names the provider and this gateway:

    [team]
    issuer = "https://login.example.com"          # OpenID provider; its metadata names the JWKS
    resource = "https://coffer.example.com/mcp"   # this gateway's URL: the tokens' audience (RFC 8707)
    scopes = ["mcp:tools"]                        # what every token must grant
    members = ["group:eng", "sub:agent-ci", "email:ana@example.com"]   # who may use it: the whole vault
    listen = "0.0.0.0"                            # bind all addresses (a container); loopback by default

An access token is checked on every request: a JWT by the issuer's keys (fetched from its JWKS, kept,
fetched again when a token names a key not seen: rotation), its `iss`, `aud` (this resource), `exp`
and `nbf`, and the scopes; a token that is not a JWT by introspection (RFC 7662) where `[team]` names an
`introspection_client` (id and secret reference) the provider knows. A valid token whose claims match
no `members` entry is refused: a member with no mapping sees nothing. The token is never passed on:
upstreams get Coffer's own credentials, as they do for a single user, the member's own, or a token the
provider issues for them in exchange for the member's (coffer.trust.exchange, which is why the Verifier
keeps each member's latest token, in memory only).

`members` as a table maps each entry to the profile that bounds what its members reach, the first
entry a token matches in the order written (a firewall's rule, not a union):

    [team.members]
    "sub:agent-ci" = "ci"          # [profiles.ci]: its servers, tools and pinned tools; its code_mode
    "group:eng" = "dev"
    "email:owner@example.com" = "*"  # the whole vault

A profile alone only chooses what a client is shown; for a member it is a wall (coffer.gateway.advertise):
what lies outside it is not listed, not found by search, not callable by name, through
`coffer__call_tool` or from a script, and its prompts and resources are not served. Each request runs
with its member current (`speaking`): results it keeps are the member's, and other members' are not
found.

PyJWT (a dependency of the MCP SDK) does the JOSE; answers are kept per token until it expires (at most
`CACHE_S`), so a call costs a dictionary lookup, not a signature check.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from coffer.errors import UsageError

WHOLE = "*"  # a members entry's profile: the whole vault
CACHE_S = 60.0  # a validated token is trusted this long at most (and never past its exp)
REFUSED_S = 5.0  # a refused token is not checked again at every retry within this long
LEEWAY_S = 5  # clock skew allowed on exp / nbf / iat
KEY_REFETCH_S = 3.0  # a token naming an unknown key fetches the provider's keys again, at most this often
_CLAIM_KINDS = ("sub", "email", "group", "client")


@dataclass(frozen=True)
class Team:
    """The `[team]` table, checked."""

    issuer: str
    resource: str
    scopes: tuple[str, ...] = ()
    members: tuple[tuple[str, str], ...] = ()  # (claim kind, value)
    profiles: tuple[str | None, ...] = ()  # per members entry: the profile bounding it (None: the whole vault)
    introspection_client: tuple[str, str] | None = None  # (client id, secret), for opaque tokens
    console_client: tuple[str, str | None] | None = None  # (client id, secret or None: public), the members' console
    listen: str = "127.0.0.1"  # the address to bind: "0.0.0.0" in a container, behind the Service
    exchange_client: tuple[str, str] | None = None  # (client id, secret): token exchange (coffer.trust.exchange)

    @property
    def host(self) -> str:
        """The resource's `host:port` as clients send it in `Host`: accepted beside loopback."""
        from urllib.parse import urlsplit

        return urlsplit(self.resource).netloc

    @property
    def metadata_path(self) -> str:
        """Where RFC 9728 puts this resource's metadata: the well-known prefix before the resource's path."""
        from urllib.parse import urlsplit

        path = urlsplit(self.resource).path.rstrip("/")
        return f"/.well-known/oauth-protected-resource{path}"

    @property
    def metadata_url(self) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}{self.metadata_path}"

    def metadata(self) -> dict[str, Any]:
        """RFC 9728 Protected Resource Metadata: what a client discovers the provider by."""
        return {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": list(self.scopes),
            "bearer_methods_supported": ["header"],
            "resource_name": "Coffer team gateway",
        }


def _digest(token: str) -> str:
    """What a checked token is kept by: its hash, never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


def team_from(raw: dict[str, Any], profiles: Collection[str] = ()) -> Team:
    """The checked `[team]` table (`profiles`: the vault's profile names, which a members table may
    name); UsageError naming what is wrong."""
    from coffer.trust.expand import expand

    if not raw:
        raise UsageError("`--team` needs a [team] table in coffer.toml: issuer, resource, members (docs/team.md)")
    issuer, resource = raw.get("issuer"), raw.get("resource")
    for key, value in (("issuer", issuer), ("resource", resource)):
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            raise UsageError(f"[team] {key} must be an http(s) URL, not {value!r}")
    scopes = raw.get("scopes", [])
    if not isinstance(scopes, list) or not all(isinstance(s, str) and s for s in scopes):
        raise UsageError("[team] scopes must be a list of scope names")
    members: list[tuple[str, str]] = []
    bounds: list[str | None] = []
    listed = raw.get("members", [])
    entries = list(listed.items()) if isinstance(listed, dict) else [(e, WHOLE) for e in listed]
    for entry, profile in entries:
        kind, sep, value = str(entry).partition(":")
        if not sep or kind not in _CLAIM_KINDS or not value:
            raise UsageError(f"[team] members: '{entry}' is not one of {', '.join(k + ':VALUE' for k in _CLAIM_KINDS)}")
        if profile != WHOLE and profile not in profiles:
            known = ", ".join(sorted(profiles)) or "none yet: `coffer profile add`"
            raise UsageError(f"[team] members: '{entry}' names no profile '{profile}' ({WHOLE!r} or one of: {known})")
        members.append((kind, value))
        bounds.append(None if profile == WHOLE else str(profile))
    if not members:
        raise UsageError('[team] members is empty: no one could use the gateway (`members = ["group:eng"]`)')
    pair = _confidential(raw, "introspection_client")
    exchanger = _confidential(raw, "exchange_client")
    console = raw.get("console_client")
    console_pair: tuple[str, str | None] | None = None
    if isinstance(console, str) and console:
        console_pair = (console, None)
    elif isinstance(console, dict) and isinstance(console.get("id"), str) and isinstance(console.get("secret"), str):
        console_pair = (console["id"], expand(console["secret"], what="[team] console_client secret"))
    elif console is not None:
        raise UsageError('[team] console_client must be a client id, or { id = "...", secret = "${secret:NAME}" }')
    listen = raw.get("listen", "127.0.0.1")
    if listen not in ("127.0.0.1", "0.0.0.0", "::", "::1") and not str(listen).replace(".", "").isdigit():
        raise UsageError(f"[team] listen must be an IP address to bind (0.0.0.0 in a container), not {listen!r}")
    return Team(
        str(issuer).rstrip("/"),
        str(resource),
        tuple(scopes),
        tuple(members),
        tuple(bounds),
        pair,
        console_pair,
        str(listen),
        exchanger,
    )


def _confidential(raw: dict[str, Any], key: str) -> tuple[str, str] | None:
    """A confidential client of the provider's that the gateway is (introspection, token exchange)."""
    from coffer.trust.expand import expand

    client = raw.get(key)
    if client is None:
        return None
    if not isinstance(client, dict) or not all(isinstance(client.get(k), str) for k in ("id", "secret")):
        raise UsageError(f'[team] {key} must be {{ id = "...", secret = "${{secret:NAME}}" }}')
    return client["id"], expand(client["secret"], what=f"[team] {key} secret")


@dataclass(frozen=True)
class Member:
    """Who a valid token speaks for: its subject, and the claims that made it a member."""

    sub: str
    via: str
    scopes: tuple[str, ...]
    expires: float
    profile: str | None = None  # the profile bounding what it reaches; None: the whole vault


class Refused(Exception):
    """A token this gateway does not take: `status` 401 (invalid, expired, wrong audience) or 403
    (valid, but lacking a scope or not a member); `error` is RFC 6750's error code."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


@dataclass
class Verifier:
    """Checks access tokens for one `Team`; thread-safe, one per served gateway."""

    team: Team
    _jwks: Any = None
    _introspection: str | None = None
    _metadata: dict[str, Any] | None = None
    _seen: dict[str, tuple[float, Member | Refused]] = field(default_factory=dict)
    # each member's latest valid token, in memory only: what token exchange trades (coffer.trust.exchange)
    _latest: dict[str, tuple[float, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def peek(self, token: str) -> Member | None:
        """The member a token already checked speaks for, without blocking (the per-request fast path);
        None when it must be checked (`check`, in a thread: it may fetch the provider's keys)."""
        kept = self._kept(_digest(token))
        if not isinstance(kept, Member):
            return None
        self._hold(kept, token)
        return kept

    def check(self, token: str) -> Member:
        """The member `token` speaks for; raises Refused."""
        key = _digest(token)
        kept = self._kept(key)
        if isinstance(kept, Refused):
            raise Refused(kept.status, kept.error, kept.description)
        if kept is not None:
            return kept
        now = time.time()
        try:
            member = self._member(self._claims(token))
        except Refused as exc:
            with self._lock:
                self._seen[key] = (now + REFUSED_S, exc)
            raise
        with self._lock:
            if len(self._seen) > 10_000:
                self._seen = {k: v for k, v in self._seen.items() if v[0] > now}
            self._seen[key] = (min(now + CACHE_S, member.expires), member)
        self._hold(member, token)
        return member

    def _hold(self, member: Member, token: str) -> None:
        held = self._latest.get(member.sub)
        if held is None or (held[1] != token and held[0] <= member.expires):
            self._latest[member.sub] = (member.expires, token)

    def latest(self, sub: str) -> str | None:
        """The member's latest token that has not expired (None: it has not called since it did)."""
        held = self._latest.get(sub)
        if held is None or 0 < held[0] <= time.time() + LEEWAY_S:  # 0: the provider gave no expiry
            return None
        return held[1]

    def _kept(self, key: str) -> Member | Refused | None:
        """What a check of this token decided, while it holds."""
        kept = self._seen.get(key)
        return kept[1] if kept is not None and kept[0] > time.time() else None

    def _claims(self, token: str) -> dict[str, Any]:
        import jwt

        if token.count(".") != 2:
            return self._introspect(token)
        try:
            key = self._keys().get_signing_key_from_jwt(token)
        except jwt.PyJWKClientError as exc:
            raise Refused(401, "invalid_token", f"the token's signing key is not the issuer's: {exc}") from None
        except jwt.DecodeError as exc:
            raise Refused(401, "invalid_token", f"the token is not a readable JWT: {exc}") from None
        try:
            return dict(
                jwt.decode(
                    token,
                    key.key,
                    algorithms=["RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA"],
                    audience=self.team.resource,
                    issuer=self.team.issuer,
                    leeway=LEEWAY_S,
                    options={"require": ["exp", "iss", "aud", "sub"]},
                )
            )
        except jwt.ExpiredSignatureError:
            raise Refused(401, "invalid_token", "the token has expired") from None
        except jwt.InvalidAudienceError:
            raise Refused(401, "invalid_token", f"the token is not for this resource ({self.team.resource})") from None
        except jwt.InvalidIssuerError:
            raise Refused(401, "invalid_token", f"the token was not issued by {self.team.issuer}") from None
        except jwt.ImmatureSignatureError:
            raise Refused(401, "invalid_token", "the token is not valid yet") from None
        except jwt.InvalidTokenError as exc:
            raise Refused(401, "invalid_token", f"the token is invalid: {exc}") from None

    def _member(self, claims: dict[str, Any]) -> Member:
        granted = tuple(str(claims.get("scope", "")).split()) or tuple(claims.get("scp") or ())
        missing = [s for s in self.team.scopes if s not in granted]
        if missing:
            raise Refused(403, "insufficient_scope", f"the token lacks the scope {' '.join(missing)}")
        sub = str(claims.get("sub", ""))
        groups = claims.get("groups") or []
        held = {
            ("sub", sub),
            ("email", str(claims.get("email", ""))),
            ("client", str(claims.get("client_id") or claims.get("azp") or "")),
            *(("group", str(g)) for g in (groups if isinstance(groups, list) else [groups])),
        }
        at = next((i for i, m in enumerate(self.team.members) if m in held), None)
        if at is None:
            raise Refused(403, "access_denied", f"'{sub}' is not a member of this team gateway ([team] members)")
        kind, value = self.team.members[at]
        bound = self.team.profiles[at] if at < len(self.team.profiles) else None
        return Member(sub, f"{kind}:{value}", granted, float(claims.get("exp", 0)), bound)

    def _keys(self) -> Any:
        """The issuer's JWKS client: found through its OpenID metadata once, its keys kept (and fetched
        again when a token names a key id it has not seen: the provider rotated)."""
        import jwt

        if self._jwks is None:
            meta = self.provider_metadata()
            uri = meta.get("jwks_uri")
            if not isinstance(uri, str):
                raise Refused(401, "invalid_token", f"{self.team.issuer} publishes no jwks_uri")
            self._jwks = jwt.PyJWKClient(
                uri, cache_keys=True, lifespan=3600, timeout=10, cooldown_duration=KEY_REFETCH_S
            )
            introspection = meta.get("introspection_endpoint")
            self._introspection = introspection if isinstance(introspection, str) else None
        return self._jwks

    def provider_metadata(self) -> dict[str, Any]:
        """The provider's OpenID (or OAuth) metadata, read once: its endpoints and keys' address."""
        if self._metadata is None:
            self._metadata = self._provider_metadata()
        return self._metadata

    def _provider_metadata(self) -> dict[str, Any]:
        import httpx2

        for suffix in ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"):
            try:
                answer = httpx2.get(self.team.issuer + suffix, timeout=10)
            except httpx2.HTTPError as exc:
                raise Refused(
                    401, "invalid_token", f"the identity provider {self.team.issuer} is unreachable: {exc}"
                ) from None
            if answer.status_code == 200:
                data = answer.json()
                if isinstance(data, dict):
                    return data
        raise Refused(401, "invalid_token", f"{self.team.issuer} publishes no OpenID or OAuth metadata")

    def _introspect(self, token: str) -> dict[str, Any]:
        """RFC 7662 for a token that is not a JWT."""
        import httpx2

        self._keys()
        if self._introspection is None or self.team.introspection_client is None:
            raise Refused(401, "invalid_token", "the token is not a JWT, and [team] names no introspection_client")
        client_id, secret = self.team.introspection_client
        try:
            answer = httpx2.post(self._introspection, data={"token": token}, auth=(client_id, secret), timeout=10)
            data = answer.json()
        except (httpx2.HTTPError, ValueError) as exc:
            raise Refused(401, "invalid_token", f"introspection failed: {exc}") from None
        if not isinstance(data, dict) or data.get("active") is not True:
            raise Refused(401, "invalid_token", "the provider says the token is not active")
        aud = data.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        if self.team.resource not in audiences:
            raise Refused(401, "invalid_token", f"the token is not for this resource ({self.team.resource})")
        if data.get("iss", self.team.issuer).rstrip("/") != self.team.issuer:
            raise Refused(401, "invalid_token", f"the token was not issued by {self.team.issuer}")
        return data


_speaking: ContextVar[Member | None] = ContextVar("coffer_team_member", default=None)


def speaking_for() -> Member | None:
    """The member the request being served speaks for; None for one user (stdio, a static token)."""
    return _speaking.get()


@contextmanager
def speaking(member: Member | None) -> Iterator[None]:
    """`member` is current inside the block and in every task and thread started from it."""
    token = _speaking.set(member)
    try:
        yield
    finally:
        _speaking.reset(token)
