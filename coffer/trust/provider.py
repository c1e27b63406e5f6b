"""The team's identity provider as the team gateway reads it (coffer.trust.team): its metadata, its signing
keys (JWKS) and its introspection (RFC 7662), and the claims of one access token checked by them.

The keys follow the provider: the JWKS is read again every `JWKS_S` (COFFER_TEAM_JWKS_S shortens it in
tests), so a key the provider drops is refused from the next read on; a token naming a key id not seen
reads it again at once (at most every KEY_REFETCH_S: a rotation). A JWKS that cannot be read is no key at
all (fail closed). Every way a token can be wrong is a `Refused` 401, never an exception of the JOSE
library's: a header that is not a JSON object, a `kid` that is not a string, an `alg` its key cannot
verify (another key type under a known `kid`), a `crit` that is not understood, a signature that does
not hold. PyJWT (a dependency of the MCP SDK) does the JOSE.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

JWKS_S = 300.0  # the provider's keys are read again this often: a key it drops is trusted no longer
KEY_REFETCH_S = 3.0  # a token naming an unknown key reads the keys again, at most this often
LEEWAY_S = 5  # clock skew allowed on exp / nbf / iat
# asymmetric only: a JWKS is public, so an HMAC "key" in it would let anyone sign
ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})
_SAID = 300  # a refusal's description is cut here: it may quote what a token holds


class Refused(Exception):
    """A token this gateway does not take: `status` 401 (invalid, expired, wrong audience) or 403
    (valid, but lacking a scope or not a member); `error` is RFC 6750's error code. The description
    may quote the token, so it is made printable and short (it goes out in a header)."""

    def __init__(self, status: int, error: str, description: str) -> None:
        said = "".join(c if c.isprintable() else "?" for c in description[:_SAID])
        super().__init__(said)
        self.status, self.error, self.description = status, error, said


def invalid(description: str) -> Refused:
    return Refused(401, "invalid_token", description)


def jwks_interval() -> float:
    """How often the keys are read again: JWKS_S, or COFFER_TEAM_JWKS_S seconds where it is set (tests)."""
    try:
        seconds = float(os.environ.get("COFFER_TEAM_JWKS_S", JWKS_S))
    except ValueError:
        return JWKS_S
    return seconds if 0 < seconds <= JWKS_S else JWKS_S


class Provider:
    """One issuer's metadata, keys and introspection for one resource; thread-safe."""

    def __init__(
        self, issuer: str, resource: str, introspection_client: tuple[str, str] | None, every: float = JWKS_S
    ) -> None:
        self.issuer, self.resource, self.client, self.every = issuer, resource, introspection_client, every
        self._metadata: dict[str, Any] | None = None
        self._jwks: dict[str, dict[str, Any]] | None = None  # kid -> the JWK as published
        self._parsed: dict[tuple[str, str], Any] = {}  # (kid, alg) -> PyJWK, for the keys read last
        self._read_at: float | None = None  # when the keys were last read (monotonic), whether it worked or not
        self._lock = threading.Lock()
        self._client: Any = None

    def _http(self) -> Any:
        """One HTTP client for every request to the provider: a client made per request costs a TLS
        context (tens of ms) each time, which introspection would pay per token."""
        if self._client is None:
            import httpx2

            self._client = httpx2.Client(timeout=10)
        return self._client

    def metadata(self) -> dict[str, Any]:
        """The provider's OpenID (or OAuth) metadata, read once: its endpoints and keys' address."""
        if self._metadata is None:
            self._metadata = self._read_metadata()
        return self._metadata

    def _read_metadata(self) -> dict[str, Any]:
        import httpx2

        for suffix in ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"):
            try:
                answer = self._http().get(self.issuer + suffix)
                data = answer.json() if answer.status_code == 200 else None
            except (httpx2.HTTPError, ValueError) as exc:
                raise invalid(f"the identity provider {self.issuer} is unreachable: {exc}") from None
            if isinstance(data, dict):
                return data
        raise invalid(f"{self.issuer} publishes no OpenID or OAuth metadata")

    def claims(self, token: str) -> dict[str, Any]:
        """What a token says, once its signature, issuer, audience and lifetime hold (a JWT), or the
        provider says it is active for this resource (introspection); raises Refused."""
        return self._jwt(token) if token.count(".") == 2 else self._introspect(token)

    def _jwt(self, token: str) -> dict[str, Any]:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise invalid(f"the token is not a readable JWT: {exc}") from None
        kid, alg = header.get("kid"), header.get("alg")
        if not isinstance(kid, str) or not kid:
            raise invalid("the token names no signing key (kid)")
        if not isinstance(alg, str) or alg not in ALGORITHMS:
            raise invalid(f"the token's alg {str(alg)[:20]!r} is not one this gateway takes")
        key = self._key(kid, alg)
        try:
            return dict(
                jwt.decode(
                    token,
                    key,
                    algorithms=[alg],
                    audience=self.resource,
                    issuer=self.issuer,
                    leeway=LEEWAY_S,
                    options={"require": ["exp", "iss", "aud"]},
                )
            )
        except jwt.ExpiredSignatureError:
            raise invalid("the token has expired") from None
        except jwt.InvalidAudienceError:
            raise invalid(f"the token is not for this resource ({self.resource})") from None
        except jwt.InvalidIssuerError:
            raise invalid(f"the token was not issued by {self.issuer}") from None
        except jwt.ImmatureSignatureError:
            raise invalid("the token is not valid yet") from None
        except jwt.PyJWTError as exc:
            raise invalid(f"the token is invalid: {exc}") from None

    def _key(self, kid: str, alg: str) -> Any:
        """The issuer's key `kid` as a key for `alg` (PyJWK); refused when the JWKS, as read at most
        `every` ago, has no such key, or the key is not one `alg` verifies with."""
        import jwt

        with self._lock:
            now = time.monotonic()
            since = None if self._read_at is None else now - self._read_at
            # a key not seen reads them again (the provider rotated), but not more often than KEY_REFETCH_S
            if since is None or since >= self.every or (kid not in (self._jwks or {}) and since >= KEY_REFETCH_S):
                self._read_keys(now)
            published = (self._jwks or {}).get(kid)
            if published is None:
                said = "the issuer's keys could not be read" if self._jwks is None else "not one the issuer publishes"
                raise invalid(f"the token's signing key {kid[:40]!r} is {said}")
            named = published.get("alg")
            if named is not None and named != alg:
                raise invalid(f"the token is signed with {alg}, but its key is for {str(named)[:20]}")
            parsed = self._parsed.get((kid, alg))
            if parsed is None:
                try:
                    parsed = jwt.PyJWK(published, alg)  # raises when the key is not of alg's type
                except (jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:
                    raise invalid(f"the token's alg {alg} does not fit its key: {exc}") from None
                self._parsed[(kid, alg)] = parsed
            return parsed

    def _read_keys(self, now: float) -> None:
        """Read the JWKS (under the lock): what it holds replaces what was held; nothing when it cannot
        be read (fail closed: a dropped key is never kept for want of a read)."""
        import httpx2

        self._read_at, self._jwks, self._parsed = now, None, {}
        uri = self.metadata().get("jwks_uri")
        if not isinstance(uri, str):
            raise invalid(f"{self.issuer} publishes no jwks_uri")
        try:
            keys = self._http().get(uri).raise_for_status().json().get("keys")
        except (httpx2.HTTPError, ValueError, AttributeError) as exc:
            raise invalid(f"the issuer's keys could not be read: {exc}") from None
        published = [k for k in keys if isinstance(k, dict)] if isinstance(keys, list) else []
        self._jwks = {k["kid"]: k for k in published if isinstance(k.get("kid"), str) and k.get("use", "sig") == "sig"}

    def _introspect(self, token: str) -> dict[str, Any]:
        """RFC 7662 for a token that is not a JWT."""
        import httpx2

        endpoint = self.metadata().get("introspection_endpoint")
        if not isinstance(endpoint, str) or self.client is None:
            raise invalid("the token is not a JWT, and [team] names no introspection_client")
        try:
            answer = self._http().post(endpoint, data={"token": token}, auth=self.client)
            data = answer.json()
        except (httpx2.HTTPError, ValueError) as exc:
            raise invalid(f"introspection failed: {exc}") from None
        if not isinstance(data, dict) or data.get("active") is not True:
            raise invalid("the provider says the token is not active")
        aud = data.get("aud")
        if self.resource not in (aud if isinstance(aud, list) else [aud]):
            raise invalid(f"the token is not for this resource ({self.resource})")
        iss = data.get("iss", self.issuer)
        if not isinstance(iss, str) or iss.rstrip("/") != self.issuer:
            raise invalid(f"the token was not issued by {self.issuer}")
        return data
