"""Confinement, end to end: a hostile upstream beside an honest one that holds a token, through `coffer serve`
(the engine and in-process). Every attempt of the hostile one fails; the honest one works; `network =
"none"` stops a connection to a loopback service that the default policy allows."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer.manage import servers
from coffer.trust import secrets
from coffer.upstreams import sandbox
from coffer.vault import registry
from tests.fixtures.gateway_harness import serve, text

REQUIRED = os.environ.get("COFFER_REQUIRE_SANDBOX") == "1"  # CI: these tests fail, not skip, without bwrap
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.serve_modes,
    pytest.mark.skipif(
        not sandbox.support().available and not REQUIRED, reason=f"no confinement here: {sandbox.support().problem}"
    ),
]
HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_server.py"
TOKEN = "tok-" + "s3cr3t" * 4


def test_confinement_is_available_here() -> None:
    assert sandbox.support().available, sandbox.support().problem


@pytest.fixture
def listener() -> Iterator[int]:
    """A service on 127.0.0.1 (a database, a dev server) that a server may or may not reach."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join(2)
    sock.close()


@pytest.fixture
def home_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home with an SSH key and a shell profile, as the hostile server would find it; secrets in
    the 0600 file where no keyring exists."""
    monkeypatch.setenv("COFFER_SECRETS_BACKEND", "file")
    home = tmp_path / "user"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    (home / ".bashrc").write_text("# the user's profile\n")
    monkeypatch.setenv("HOME", str(home))
    return home


def _vault(
    coffer_home: Path, home: Path, port: int, hostile_sandbox: object = None, proxied: tuple[str, ...] = ()
) -> None:
    secrets.set_secret("honest-token", TOKEN)
    honest = registry.ServerConfig(
        name="honest",
        command=sys.executable,
        args=[str(HOSTILE), "--honest", f"--token={TOKEN}"],
        env={"HONEST_TOKEN": "${secret:honest-token}"},
    )
    reads = [home / ".ssh" / "id_ed25519", coffer_home / "coffer.toml", coffer_home / "coffer.db"]
    reads += [coffer_home / "secrets.json"]
    plan = {
        "read": [str(p) for p in reads],
        "write": [str(home / ".bashrc")],
        "connect": [port],
        "signal": [os.getpid()],
        "proxied": list(proxied),  # the test: outside its namespace, as the engine and the user's shell are
    }
    hostile = registry.ServerConfig(
        name="hostile", command=sys.executable, args=[str(HOSTILE)], env={"HOSTILE_PLAN": json.dumps(plan)}
    )
    if hostile_sandbox is not None:
        hostile.sandbox = hostile_sandbox
    servers.add_server(honest, path=coffer_home / "coffer.toml")
    servers.add_server(hostile, path=coffer_home / "coffer.toml")


async def _report(coffer_home: Path) -> dict[str, dict[str, str]]:
    async with serve(coffer_home) as served:
        honest = await served.call("honest__echo", {"text": "still works"})
        assert text(honest) == "still works" and not honest.is_error
        result = await served.call("hostile__attempt")
        assert not result.is_error, text(result)
        report: dict[str, dict[str, str]] = json.loads(text(result))
        return report


async def test_a_hostile_server_gets_nothing_and_its_honest_sibling_works(
    coffer_home: Path, home_dir: Path, listener: int
) -> None:
    _vault(coffer_home, home_dir, listener)
    assert (coffer_home / "secrets.json").exists() and (coffer_home / "coffer.db").exists()
    report = await _report(coffer_home)
    got = {
        f"{kind} {what}": outcome
        for kind, attempts in report.items()
        for what, outcome in attempts.items()
        if outcome.startswith("GOT") and kind != "connect"
    }
    assert not got, f"the hostile server got: {got}"
    assert report["processes"] == {} or all(v.startswith("denied") for v in report["processes"].values())
    assert set(report["read"]) >= {str(home_dir / ".ssh" / "id_ed25519"), str(coffer_home / "coffer.toml")}
    assert "appended" not in (home_dir / ".bashrc").read_text() and "evil" not in (home_dir / ".bashrc").read_text()
    assert report["connect"][str(listener)] == "GOT connected"  # the default policy keeps the network


async def test_network_none_cuts_off_even_loopback(coffer_home: Path, home_dir: Path, listener: int) -> None:
    _vault(coffer_home, home_dir, listener, hostile_sandbox={"network": "none"})
    report = await _report(coffer_home)
    assert report["connect"][str(listener)].startswith("denied"), report["connect"]


async def test_off_runs_with_the_users_authority(coffer_home: Path, home_dir: Path, listener: int) -> None:
    """The control: the same server, unconfined, gets what the confined one could not (so the tests above
    do not pass for a reason that has nothing to do with confinement)."""
    _vault(coffer_home, home_dir, listener, hostile_sandbox="off")
    report = await _report(coffer_home)
    assert report["read"][str(home_dir / ".ssh" / "id_ed25519")].startswith("GOT")
    assert report["write"][str(home_dir / ".bashrc")] == "GOT appended"
    assert any(TOKEN in v for v in report["processes"].values()), report["processes"]


async def test_a_host_list_allows_those_hosts_through_the_proxy_and_nothing_around_it(
    coffer_home: Path, home_dir: Path, listener: int
) -> None:
    """`network = [hosts]`: the proxy its environment names carries a connection to a listed host and
    refuses another; a connection that ignores the proxy finds no route at all."""
    allowed, other = f"localhost:{listener}", f"127.0.0.1:{listener}"
    _vault(coffer_home, home_dir, listener, hostile_sandbox={"network": [allowed]}, proxied=(allowed, other))
    report = await _report(coffer_home)
    assert report["proxied"][allowed].startswith("GOT HTTP/1.1 200"), report["proxied"]
    assert report["proxied"][other].startswith("denied HTTP/1.1 403"), report["proxied"]
    assert report["connect"][str(listener)].startswith("denied"), report["connect"]
