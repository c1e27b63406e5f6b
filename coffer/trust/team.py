"""`coffer serve --http --team`: the gateway as an OAuth 2.1 protected resource behind the team's own
identity provider, as MCP's authorization spec (2025-06-18 onward) asks of a server.

The vault's `[team]` names the provider and this gateway:

    [team]
    issuer = "https://login.example.com"          # OpenID provider; its metadata names the JWKS
    resource = "https://coffer.example.com/mcp"   # this gateway's URL: the tokens' audience (RFC 8707)
    scopes = ["mcp:tools"]                        # what every token must grant
    members = ["group:eng", "sub:agent-ci", "email:ana@example.com"]   # who may use it: the whole vault
    listen = "0.0.0.0"                            # bind all addresses (a container); loopback by default

An access token is checked on every request (coffer.trust.provider: a JWT by the issuer's keys, read
again every few minutes, its `iss`, `aud` (this resource), `exp` and `nbf`; a token that is not a JWT
by introspection, RFC 7662), then its scopes and who it is: one identity per member, the issuer's
subject or, for a token without one, its client id (`identity`); a token naming neither is refused.
A valid token whose claims match no `members` entry is refused: a member with no mapping sees nothing.
Every bad token is a `Refused`, 401 or 403, never another error. The token is never passed on:
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

Answers are kept per token (by its hash) until it expires, at most `CACHE_S` and never past the next
read of the keys, so a call costs a dictionary lookup, not a signature check; refusals are kept
`REFUSED_S`, both in bounded tables, so a flood of bad tokens costs a check each and bounded memory.
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
from coffer.trust.provider import KEY_REFETCH_S as KEY_REFETCH_S
from coffer.trust.provider import LEEWAY_S as LEEWAY_S
from coffer.trust.provider import Provider, jwks_interval
from coffer.trust.provider import Refused as Refused

WHOLE = "*"  # a members entry's profile: the whole vault
CACHE_S = 60.0  # a validated token is trusted this long at most (never past its exp, nor the next key read)
REFUSED_S = 5.0  # a refused token is not checked again at every retry within this long
MAX_KEPT = 10_000  # validated tokens kept (the oldest dropped beyond it)
MAX_REFUSED = 4_096  # refused tokens kept: a flood of bad tokens is bounded in memory
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
    """Who a valid token speaks for: its identity, and the claims that made it a member."""

    sub: str  # the identity (`identity`): what sessions, results, secrets, homes, processes and log rows are keyed by
    via: str
    scopes: tuple[str, ...]
    expires: float
    profile: str | None = None  # the profile bounding what it reaches; None: the whole vault

    def __post_init__(self) -> None:
        if not self.sub:  # `identity` refuses such a token first: this keeps any other path from keying by ""
            raise ValueError("a member has an identity")


def identity(claims: dict[str, Any]) -> str:
    """Who a token speaks for: the issuer's subject, or, for a token without one (a client's own: RFC 7662
    makes `sub` optional, RFC 9068 puts the client id there), its client id; raises Refused when it
    names neither, so that no two members ever share one (empty) identity."""
    for claim in ("sub", "client_id", "azp"):
        value = claims.get(claim)
        if value is not None and not isinstance(value, str):
            raise Refused(401, "invalid_token", f"the token's {claim} is not a string")
        if value:
            return value
    raise Refused(401, "invalid_token", "the token names no subject (sub) and no client (client_id)")


def _scopes(claims: dict[str, Any]) -> tuple[str, ...]:
    """The scopes granted: `scope` (a space-separated string, RFC 6749 / 9068) or `scp` (a list)."""
    scope, scp = claims.get("scope"), claims.get("scp")
    if isinstance(scope, str) and scope:
        return tuple(scope.split())
    if isinstance(scp, str):
        return tuple(scp.split())
    return tuple(s for s in scp if isinstance(s, str)) if isinstance(scp, list) else ()


def _keep(kept: dict[str, tuple[float, Any]], key: str, until: float, answer: Any, cap: int) -> None:
    """Keep an answer, dropping the oldest beyond `cap`: a flood of distinct tokens costs memory once."""
    kept.pop(key, None)
    kept[key] = (until, answer)
    while len(kept) > cap:
        kept.pop(next(iter(kept)))


@dataclass
class Verifier:
    """Checks access tokens for one `Team`; thread-safe, one per served gateway. `jwks_s`: how often
    the provider's keys are read again, and so the longest any answer is kept (a dropped key's tokens
    are refused within it)."""

    team: Team
    jwks_s: float = field(default_factory=jwks_interval)
    _provider: Provider | None = None
    _members: dict[str, tuple[float, Member]] = field(default_factory=dict)  # by token hash, bounded
    _refused: dict[str, tuple[float, Refused]] = field(default_factory=dict)  # by token hash, bounded
    # each member's latest valid token, in memory only: what token exchange trades (coffer.trust.exchange)
    _latest: dict[str, tuple[float, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            team = self.team
            self._provider = Provider(team.issuer, team.resource, team.introspection_client, self.jwks_s)
        return self._provider

    def peek(self, token: str) -> Member | None:
        """The member a token already checked speaks for, without blocking (the per-request fast path);
        None when it must be checked (`check`, in a thread: it may read the provider's keys)."""
        kept = self._members.get(_digest(token))
        if kept is None or kept[0] <= time.time():
            return None
        self._hold(kept[1], token)
        return kept[1]

    def check(self, token: str) -> Member:
        """The member `token` speaks for; raises Refused (every bad token is one: never another error)."""
        key = _digest(token)
        now = time.time()
        refused = self._refused.get(key)
        if refused is not None and refused[0] > now:
            raise Refused(refused[1].status, refused[1].error, refused[1].description)
        kept = self._members.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        try:
            member = self._member(self.provider.claims(token))
        except Refused as exc:
            with self._lock:
                _keep(self._refused, key, now + min(REFUSED_S, self.jwks_s), exc, MAX_REFUSED)
            raise
        until = now + min(CACHE_S, self.jwks_s)  # never past the next read of the keys: a dropped key's
        until = min(until, member.expires) if member.expires else until  # tokens go with it
        with self._lock:
            _keep(self._members, key, until, member, MAX_KEPT)
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

    def _member(self, claims: dict[str, Any]) -> Member:
        granted = _scopes(claims)
        missing = [s for s in self.team.scopes if s not in granted]
        if missing:
            raise Refused(403, "insufficient_scope", f"the token lacks the scope {' '.join(missing)}")
        who = identity(claims)
        exp = claims.get("exp", 0)
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise Refused(401, "invalid_token", "the token's exp is not a number")
        groups = claims.get("groups") or []
        client = claims.get("client_id") or claims.get("azp")
        held = {
            ("sub", who),  # the identity: the subject, or the client id of a token without one
            ("email", str(claims.get("email", ""))),
            ("client", client if isinstance(client, str) else ""),
            *(("group", str(g)) for g in (groups if isinstance(groups, list) else [groups])),
        }
        at = next((i for i, m in enumerate(self.team.members) if m in held), None)
        if at is None:
            raise Refused(403, "access_denied", f"'{who}' is not a member of this team gateway ([team] members)")
        kind, value = self.team.members[at]
        bound = self.team.profiles[at] if at < len(self.team.profiles) else None
        return Member(who, f"{kind}:{value}", granted, float(exp), bound)

    def provider_metadata(self) -> dict[str, Any]:
        """The provider's OpenID (or OAuth) metadata, read once: its endpoints and keys' address."""
        return self.provider.metadata()


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
