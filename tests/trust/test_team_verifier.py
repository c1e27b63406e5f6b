"""The team gateway's token check (coffer.trust.team.Verifier, coffer.trust.provider) against a provider
served over real HTTP on 127.0.0.1 whose private keys the test holds, so that forged tokens can be signed
by the very key their `kid` names: every bad token is a `Refused`, never another exception (fuzzed with
Hypothesis); a member is one non-empty identity; refusals are kept in a bounded table."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jwt.algorithms import get_default_algorithms

from coffer.trust import provider
from coffer.trust.team import CACHE_S, MAX_REFUSED, Member, Refused, Team, Verifier

RESOURCE = "https://coffer.test/mcp"
RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC = ec.generate_private_key(ec.SECP256R1())
ED = ed25519.Ed25519PrivateKey.generate()
PRIVATE = {"k-rsa": RSA, "k-rsa-any": RSA, "k-ec": EC, "k-ed": ED}  # kid -> the private key that signs for it


def _public(kid: str, key: Any, alg: str | None) -> dict[str, Any]:
    algorithm = get_default_algorithms()["RS256" if kid.startswith("k-rsa") else "ES256" if kid == "k-ec" else "EdDSA"]
    jwk = dict(algorithm.to_jwk(key.public_key(), as_dict=True))
    return {**jwk, "kid": kid, "use": "sig", **({"alg": alg} if alg else {})}


JWKS = [
    _public("k-rsa", RSA, "RS256"),
    _public("k-rsa-any", RSA, None),  # an RSA key that names no alg: RS* and PS* fit it
    _public("k-ec", EC, None),
    _public("k-ed", ED, None),
    {"kty": "oct", "kid": "k-oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQ", "use": "sig"},  # never usable: public
]


@dataclass
class Issuer:
    """The provider's metadata, JWKS and introspection (RFC 7662) over HTTP; `active` maps an opaque
    token to what introspecting it answers."""

    url: str = ""
    active: dict[str, dict[str, Any]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    served = Issuer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def answer(self, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            meta = {
                "issuer": served.url,
                "jwks_uri": f"{served.url}/jwks",
                "introspection_endpoint": f"{served.url}/in",
            }
            self.answer({"/.well-known/openid-configuration": meta, "/jwks": {"keys": JWKS}}.get(self.path))

        def do_POST(self) -> None:
            from urllib.parse import parse_qs

            body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
            token = parse_qs(body).get("token", [""])[0]
            self.answer(served.active.get(token, {"active": False}))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield served
    server.shutdown()


def verifier(issuer: Issuer, jwks_s: float = provider.JWKS_S) -> Verifier:
    members = (("group", "eng"), ("client", "ci"))
    team = Team(issuer.url, RESOURCE, ("mcp:tools",), members, (None, None), introspection_client=("gw", "s"))
    return Verifier(team, jwks_s=jwks_s)


def claims(issuer: Issuer, **changed: Any) -> dict[str, Any]:
    base = {"iss": issuer.url, "aud": RESOURCE, "exp": int(time.time()) + 300, "scope": "mcp:tools", "groups": ["eng"]}
    return {k: v for k, v in {**base, **changed}.items() if v is not None}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_member_is_its_subject_or_else_its_client_and_never_no_one(issuer: Issuer) -> None:
    v = verifier(issuer)
    signed = lambda **c: jwt.encode(claims(issuer, **c), RSA, "RS256", {"kid": "k-rsa"})  # noqa: E731
    assert v.check(signed(sub="ana", client_id="cli")).sub == "ana"
    assert v.check(signed(client_id="ci")).sub == "ci"  # a client's own token: RFC 9068 / 7662
    assert v.check(signed(sub="", azp="ci")).sub == "ci"
    for nobody in (signed(), signed(sub="", client_id="")):
        with pytest.raises(Refused) as refused:
            v.check(nobody)
        assert refused.value.status == 401 and "no subject" in refused.value.description
    with pytest.raises(Refused):
        v.check(signed(sub=["ana"], client_id="ci"))  # an identity is a string or nothing
    # introspection (RFC 7662): `sub` is optional there
    issuer.active["opaque-a"] = {"active": True, **claims(issuer, client_id="ci")}
    issuer.active["opaque-b"] = {"active": True, **claims(issuer, client_id="other")}
    issuer.active["opaque-none"] = {"active": True, **claims(issuer)}
    assert v.check("opaque-a").sub == "ci" and v.check("opaque-b").sub == "other"
    with pytest.raises(Refused) as refused:
        v.check("opaque-none")
    assert refused.value.status == 401


def test_no_answer_is_kept_past_the_next_read_of_the_keys(issuer: Issuer, monkeypatch: pytest.MonkeyPatch) -> None:
    assert CACHE_S <= provider.JWKS_S <= 300  # minutes, not an hour
    v = verifier(issuer, jwks_s=1.0)
    token = jwt.encode(claims(issuer, sub="ana"), RSA, "RS256", {"kid": "k-rsa"})
    v.check(token)
    ((until, _),) = v._members.values()
    assert until <= time.time() + 1.0
    for said, seconds in (("2", 2.0), ("junk", provider.JWKS_S), ("0", provider.JWKS_S), ("9999", provider.JWKS_S)):
        monkeypatch.setenv("COFFER_TEAM_JWKS_S", said)
        assert provider.jwks_interval() == seconds


def test_a_flood_of_bad_tokens_is_cheap_and_bounded(issuer: Issuer) -> None:
    v = verifier(issuer)
    body = b64(json.dumps(claims(issuer, sub="ana")).encode())
    flood = [
        f"{b64(json.dumps({'alg': 'ES256', 'kid': 'k-rsa', 'n': i}).encode())}.{body}.AAAA"
        for i in range(MAX_REFUSED + 1000)
    ]
    started = time.perf_counter()
    for token in flood:
        with pytest.raises(Refused):
            v.check(token)
    each = (time.perf_counter() - started) / len(flood)
    print(f"a bad token refused in {each * 1e6:.0f} µs; {len(v._refused)} refusals kept")
    assert len(v._refused) <= MAX_REFUSED
    assert each < 0.001  # microseconds each here: a guard against a table that is scanned per token
    with pytest.raises(Refused):
        v.check(flood[-1])  # kept: answered from the table


# ----------------------------------------------------------------------------- fuzzing the token path

ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=40),
    st.lists(st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
)
ALGS = ["RS256", "RS384", "RS512", "PS256", "PS512", "ES256", "ES384", "ES512", "EdDSA", "HS256", "none", "NONE", ""]
KIDS = [*PRIVATE, "k-oct", "k-gone"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


def chance(draw: st.DrawFn, percent: int) -> bool:
    return draw(st.integers(0, 99)) < percent


@st.composite
def headers(draw: st.DrawFn) -> Any:
    """Mostly a header a provider might write, each field now and then odd: the path past the header's
    parsing (the key, the alg against it, the signature, the claims) is reached as often as not."""
    if chance(draw, 5):
        return draw(JSON)  # not an object at all
    header: dict[str, Any] = {}
    for name, percent, usual, odd in (
        ("alg", 95, st.sampled_from(ALGS), ODD),
        ("kid", 90, st.sampled_from(KIDS), ODD | st.text(min_size=1000, max_size=3000)),
        ("typ", 30, st.sampled_from(["JWT", "at+jwt", "application/at+jwt"]), ODD),
        ("crit", 8, st.sampled_from([["b64"], ["exp"], [], "b64"]), ODD),
        ("b64", 5, st.booleans(), ODD),
        ("jwk", 8, st.sampled_from(JWKS), ODD),
        ("x5c", 5, st.lists(st.text(max_size=20), max_size=2), ODD),
    ):
        if chance(draw, percent):
            header[name] = draw(usual if chance(draw, 85) else odd)
    return header


@st.composite
def tokens(draw: st.DrawFn, issuer: Issuer) -> tuple[str, bool]:
    """A token and whether it is well made (what it sends signed by its kid's key, with an alg that
    key takes): only such a token may ever be taken."""
    header = draw(headers())
    usual = (("sub", "ana"), ("client_id", "ci"), ("exp", int(time.time()) + 300), ("aud", RESOURCE))
    changed = {name: draw(ODD) for name, _ in usual if chance(draw, 15)}
    if chance(draw, 20):
        changed |= {
            name: draw(ODD) for name in draw(st.lists(st.sampled_from(["iss", "nbf", "scope", "scp", "groups"])))
        }
    body = claims(issuer, sub="ana") | changed
    raw_header = json.dumps(header).encode() if chance(draw, 95) else draw(st.binary(max_size=30))
    signing_input = f"{b64(raw_header)}.{b64(json.dumps(body, default=str).encode())}".encode()
    alg, kid = (header.get("alg"), header.get("kid")) if isinstance(header, dict) else (None, None)
    signature, made = draw(st.binary(max_size=80)), False
    if chance(draw, 80) and isinstance(alg, str) and alg in get_default_algorithms() and alg != "none":
        own = PRIVATE.get(kid) if isinstance(kid, str) else None
        signer = own if own is not None and chance(draw, 80) else draw(st.sampled_from([RSA, EC, ED]))
        try:
            signature = get_default_algorithms()[alg].sign(signing_input, signer)
            made = signer is own and raw_header == json.dumps(header).encode()
        except (TypeError, ValueError, AttributeError, jwt.PyJWTError):  # the key does not sign with that alg
            pass
    token = plain = f"{signing_input.decode()}.{b64(signature)}"
    encode = draw(st.sampled_from(["padded", "standard", "mangled"])) if chance(draw, 20) else "plain"
    if encode == "padded":
        token = ".".join(p + "=" * (-len(p) % 4) for p in token.split("."))
    elif encode == "standard":
        token = token.replace("-", "+").replace("_", "/")
    elif encode == "mangled":
        at = draw(st.integers(0, len(token) - 1))
        token = token[:at] + draw(st.sampled_from([".", "", "%", "\x00", "é", ".."])) + token[at + 1 :]
    # the signature's own encoding may vary (padding, the standard alphabet: PyJWT decodes them alike),
    # but a token is well made only if what was signed is what is sent
    return token, made and token.rpartition(".")[0] == plain.rpartition(".")[0]


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_bad_token_is_refused_and_nothing_else(issuer: Issuer, data: st.DataObject) -> None:
    """Headers with odd alg, kid, typ, crit, key types, encodings, sizes and nesting, claims of every
    type, signed by the kid's own key, another key or no key: each is a Member only when well made,
    else a Refused 401 or 403, never another exception."""
    token, made = data.draw(tokens(issuer))
    try:
        member = VERIFIER.setdefault("v", verifier(issuer)).check(token)
    except Refused as exc:
        assert exc.status in (401, 403) and exc.description.isprintable() and len(exc.description) <= 300
        return
    assert made, token
    assert isinstance(member, Member) and member.sub


VERIFIER: dict[str, Verifier] = {}  # one for all examples: its kept answers are exercised too
