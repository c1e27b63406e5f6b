"""The team gateway's tokens against the real OpenID provider (tests/fixtures/oidc_idp.mjs): a member is
one identity, never empty (clients whose opaque tokens have no `sub` are members of their own); a key the
provider drops stops being trusted at the next read of its JWKS; a forged token is a 401, never a 500,
and leaves no traceback in the log."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from tests.fixtures.gateway_harness import text, wait_for
from tests.gateway.test_team_gateway import Gateway, member, post, pytestmark, served
from tests.gateway.test_team_members import hello

__all__ = ["pytestmark"]


def secrets_of(url: str, token: str, method: str = "GET", name: str = "", value: str = "") -> httpx2.Response:
    target = url.replace("/mcp", "/member/secrets") + (f"/{name}" if name else "")
    headers = {"Authorization": f"Bearer {token}"}
    return httpx2.request(method, target, content=value.encode(), headers=headers, timeout=10)


@pytest.fixture
def opaque(coffer_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    """A provider of opaque tokens; alice is a member by her group, bob by his client id."""
    monkeypatch.setenv("COFFER_TEST_INTROSPECTION", "yawetag-reffoc")
    client = 'introspection_client = { id = "coffer-gateway", secret = "${COFFER_TEST_INTROSPECTION}" }'
    members = 'members = ["group:eng", "client:agent-bob"]'
    with served(coffer_home, fmt="opaque", extra=client, members=members) as gateway:
        yield gateway


@pytest.fixture
def rereading(coffer_home: Path) -> Iterator[Gateway]:
    """A gateway that reads the provider's keys again every second (COFFER_TEAM_JWKS_S)."""
    with served(coffer_home, env={"COFFER_TEAM_JWKS_S": "1"}) as gateway:
        yield gateway


async def test_clients_without_a_subject_are_each_a_member_of_their_own(opaque: Gateway) -> None:
    """oidc-provider's introspection of a client-credentials token has no `sub` (RFC 7662 makes it
    optional): each client is the member its `client_id` names, with its own session, secrets and log rows."""
    g = opaque
    alice, bob = g.idp.token("agent-alice", g.url), g.idp.token("agent-bob", g.url)
    assert alice.count(".") == bob.count(".") == 0  # opaque: introspected
    opened = hello(g.url, alice)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    assert hello(g.url, bob, session, "tools/list").status_code == 404  # alice's session is not bob's
    assert hello(g.url, alice, session, "tools/list").status_code == 200

    assert secrets_of(g.url, alice, "PUT", "TOKEN", "alices-value").status_code == 204
    assert secrets_of(g.url, bob).json() == {"names": []}
    assert secrets_of(g.url, alice).json() == {"names": ["TOKEN"]}

    async with member(g, "agent-bob") as session_of_bob:
        assert text(await session_of_bob.call_tool("alpha__echo", {"text": "bob"})) == "bob"
    from typer.testing import CliRunner

    from tests.conftest import run_cli

    def logged(who: str) -> list[dict[str, Any]]:
        done = run_cli(CliRunner(), "log", "--member", who, "--json")
        return list(json.loads(done.stdout)["calls"])  # type: ignore[attr-defined]

    await wait_for(lambda: bool(logged("agent-bob")), what="bob's call in the log")
    assert [row["member"] for row in logged("agent-bob")] == ["agent-bob"]
    assert logged("agent-alice") == []


async def test_a_key_the_provider_drops_is_refused_at_the_next_read_of_its_keys(rereading: Gateway) -> None:
    """A real rotation at the provider: k2 signs beside k1, then k1 is dropped from the JWKS. A token k1
    signed, taken (and its answer kept) before, is refused once the gateway reads the keys again
    (COFFER_TEAM_JWKS_S: 1 s here, 300 s by default); k2's tokens go on."""
    g = rereading
    old = g.idp.token("agent-alice", g.url)
    assert post(g.url, old).status_code == 200
    g.idp.keys("k2", "k1")
    new = g.idp.token("agent-alice", g.url)
    assert jwt.get_unverified_header(new)["kid"] == "k2"
    await wait_for(lambda: post(g.url, new).status_code == 200, timeout=15, what="the new key to be taken")
    assert post(g.url, old).status_code == 200  # k1 is still published
    g.idp.keys("k2")
    dropped = time.monotonic()
    # within the read interval (1 s here) and a loaded machine's slack: a kept answer (CACHE_S, 60 s) or
    # a key kept for the process's life would not be refused in time
    await wait_for(lambda: post(g.url, old).status_code == 401, timeout=15, what="the dropped key to be refused")
    print(f"a dropped key refused {time.monotonic() - dropped:.2f} s after the provider dropped it")
    refused = post(g.url, old)
    assert refused.status_code == 401 and "signing key" in refused.text, refused.text
    assert post(g.url, new).status_code == 200
    assert "Traceback" not in g.log.read_text()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(header: Any, claims: dict[str, Any], signature: bytes = b"\x00" * 64) -> str:
    """A token with any header at all, as an attacker writes it (PyJWT would refuse to make most)."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return f"{b64(raw)}.{b64(json.dumps(claims).encode())}.{b64(signature)}"


def test_forged_tokens_are_refused_with_401_and_no_traceback(coffer_home: Path) -> None:
    """Another key type under the provider's own `kid`, a `kid` that is a list or an object, and the
    like: each is a 401 (RFC 6750 invalid_token), never a 500; a flood of them writes no traceback."""
    with served(coffer_home) as g:
        good = g.idp.token("agent-alice", g.url)
        claims = jwt.decode(good, options={"verify_signature": False})
        kid = jwt.get_unverified_header(good)["kid"]
        public = httpx2.get(f"{g.idp.url}/jwks", timeout=10).json()["keys"][0]
        rsa_other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        cases = {
            "ES256 under the RSA kid": jwt.encode(
                claims, ec.generate_private_key(ec.SECP256R1()), "ES256", {"kid": kid}
            ),
            "EdDSA under the RSA kid": jwt.encode(claims, ed25519.Ed25519PrivateKey.generate(), "EdDSA", {"kid": kid}),
            "PS256 by another RSA key": jwt.encode(claims, rsa_other, "PS256", {"kid": kid}),
            "HS256 keyed by the public key": forged({"alg": "HS256", "kid": kid}, claims),
            "kid a list": forged({"alg": "RS256", "kid": [kid]}, claims),
            "kid an object": forged({"alg": "RS256", "kid": {"kid": kid}}, claims),
            "kid a number": forged({"alg": "RS256", "kid": 1}, claims),
            "no kid": forged({"alg": "RS256"}, claims),
            "alg none": forged({"alg": "none", "kid": kid}, claims, b""),
            "alg a list": forged({"alg": ["RS256"], "kid": kid}, claims),
            "crit unknown": forged({"alg": "RS256", "kid": kid, "crit": ["exp"]}, claims),
            "crit an object": forged({"alg": "RS256", "kid": kid, "crit": {"b64": False}}, claims),
            "jwk embedded": forged({"alg": "RS256", "kid": kid, "jwk": public}, claims),
            "header a list": forged([{"alg": "RS256", "kid": kid}], claims),
            "header not JSON": forged(b"\xff\xfe{", claims),
            "a huge kid": forged({"alg": "RS256", "kid": "k" * 20_000}, claims),
        }
        for what, token in cases.items():
            answer = post(g.url, token)
            assert answer.status_code == 401, (what, answer.status_code, answer.text)
            assert "invalid_token" in answer.headers["www-authenticate"], what
        started = time.perf_counter()
        flood = [forged({"alg": "ES256", "kid": kid, "n": i}, claims) for i in range(300)]
        with httpx2.Client(timeout=10) as http:
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
            for token in flood:
                answer = http.post(g.url, json={}, headers={**headers, "Authorization": f"Bearer {token}"})
                assert answer.status_code == 401
        print(f"300 forged tokens refused in {time.perf_counter() - started:.2f} s")
        assert post(g.url, good).status_code == 200
    logged = g.log.read_text()
    assert "Traceback" not in logged and "Exception in ASGI" not in logged, logged[-2000:]
