"""Confinement, end to end, as an attacker would try it: a hostile upstream beside an honest one that holds a
token, through `coffer serve` (the engine and in-process), under bubblewrap and under Landlock alone
(bubblewrap hidden from Coffer). For each class of attack the attempt fails, and a `sandbox = "off"` control
with the same plan succeeds, so the matrix cannot pass for a reason that has nothing to do with confinement.

The classes: read what is not on any list (every file of the user's home, found by walking it: agents'
MCP configs, shell history, another tool's token, a project's .env), read Coffer's own vault, poison the
code a sibling runs (its package cache, and the user's shared one), reach the host's loopback services
and abstract sockets, read other processes' environments, signal processes outside its own tree."""

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
from coffer.vault import paths, registry
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
MARKER = "SECRET-" + "7f3a9c"  # in every credential file of the user's home


def test_confinement_is_available_here() -> None:
    assert sandbox.support().available, sandbox.support().problem
    assert sandbox.support().landlock_abi, "CI's kernel has Landlock"


@pytest.fixture
def listener() -> Iterator[int]:
    """A service on 127.0.0.1 (a database, a dev server) that a server may or may not reach."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield from _serving(sock, sock.getsockname()[1])


@pytest.fixture
def abstract() -> Iterator[str]:
    """An abstract unix socket on the host (as D-Bus, X11 and debuggers listen)."""
    name = f"coffer-test-{os.getpid()}-{id(object())}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind("\0" + name)
    sock.listen(8)
    yield from _serving(sock, name)


def _serving(sock: socket.socket, value: object) -> Iterator[object]:  # type: ignore[misc]
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
    yield value
    stop.set()
    thread.join(2)
    sock.close()


@pytest.fixture
def home_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home as a hostile package would find it: keys, every agent's MCP config with tokens, shell
    history, a token of a tool no list knows, a project with a .env, the shared package caches."""
    monkeypatch.setenv("COFFER_SECRETS_BACKEND", "file")
    home = tmp_path / "user"
    files = {
        ".ssh/id_ed25519": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{MARKER}\n",
        ".claude.json": json.dumps({"mcpServers": {"gh": {"env": {"GITHUB_TOKEN": MARKER}}}}),
        ".cursor/mcp.json": json.dumps({"mcpServers": {"x": {"env": {"KEY": MARKER}}}}),
        ".codex/config.toml": f'[mcp_servers.x]\nenv = {{ KEY = "{MARKER}" }}\n',
        ".gemini/settings.json": json.dumps({"mcpServers": {"x": {"headers": {"Authorization": MARKER}}}}),
        ".bash_history": f"export OPENAI_API_KEY={MARKER}\n",
        ".config/some-new-tool/token": MARKER,
        "code/app/.env": f"DATABASE_URL=postgres://u:{MARKER}@db/x\n",
        ".bashrc": "# the user's profile\n",
        ".npm/_npx/shared/node_modules/pkg/index.js": "// shared code\n",
        ".cache/uv/archive-v0/pkg/__init__.py": "# shared code\n",
    }
    for rel, content in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(content)
    monkeypatch.setenv("HOME", str(home))
    return home


def _vault(coffer_home: Path, home: Path, plan: dict[str, object], hostile_sandbox: object = None) -> None:
    secrets.set_secret("honest-token", TOKEN)
    honest = registry.ServerConfig(
        name="honest",
        command=sys.executable,
        args=[str(HOSTILE), "--honest", f"--token={TOKEN}"],
        env={"HONEST_TOKEN": "${secret:honest-token}"},
    )
    hostile = registry.ServerConfig(
        name="hostile", command=sys.executable, args=[str(HOSTILE)], env={"HOSTILE_PLAN": json.dumps(plan)}
    )
    if hostile_sandbox is not None:
        hostile.sandbox = hostile_sandbox
    servers.add_server(honest, path=coffer_home / "coffer.toml")
    servers.add_server(hostile, path=coffer_home / "coffer.toml")


def _sibling_code() -> Path:
    """The code npx cached for the honest server, in its own home."""
    return paths.data_dir() / "sandbox" / "honest" / "home" / ".npm" / "_npx" / "pkg" / "index.js"


def _plan(coffer_home: Path, home: Path, port: int, abstract: str, proxied: tuple[str, ...] = ()) -> dict[str, object]:
    reads = [home / ".ssh" / "id_ed25519", home / ".claude.json", home / "code" / "app" / ".env"]
    reads += [coffer_home / "coffer.toml", coffer_home / "coffer.db", coffer_home / "secrets.json"]
    writes = [home / ".bashrc", home / ".npm/_npx/shared/node_modules/pkg/index.js", _sibling_code()]
    writes += [home / ".cache/uv/archive-v0/pkg/__init__.py"]
    return {
        "read": [str(p) for p in reads],
        "write": [str(p) for p in writes],
        "sweep": [[str(home), MARKER], ["/home", MARKER]],
        "connect": [port],
        "abstract": [abstract],
        "signal": [os.getpid()],
        "proxied": list(proxied),  # the test: outside its namespace, as the engine and the user's shell are
    }


async def _report(coffer_home: Path) -> dict[str, dict[str, str]]:
    async with serve(coffer_home) as served:
        honest = await served.call("honest__echo", {"text": "still works"})
        assert text(honest) == "still works" and not honest.is_error
        result = await served.call("hostile__attempt")
        assert not result.is_error, text(result)
        report: dict[str, dict[str, str]] = json.loads(text(result))
        return report


def _untouched(home: Path) -> list[str]:
    """The files the hostile server tried to change, as they are on disk (outside any sandbox)."""
    files = [home / ".bashrc", home / ".npm/_npx/shared/node_modules/pkg/index.js", _sibling_code()]
    files += [home / ".cache/uv/archive-v0/pkg/__init__.py"]
    return [str(f) for f in files if "evil" in f.read_text()]


async def test_a_hostile_server_gets_nothing_and_its_honest_sibling_works(
    coffer_home: Path, home_dir: Path, listener: int, abstract: str, mechanism: str
) -> None:
    _vault(coffer_home, home_dir, _plan(coffer_home, home_dir, listener, abstract))
    assert (coffer_home / "secrets.json").exists()
    report = await _report(coffer_home)
    assert _sibling_code().exists(), "the honest server's own home holds what it cached"
    got = {
        f"{kind} {what}": outcome
        for kind, attempts in report.items()
        if kind != "write"  # a write may land in its own home, mounted where the user's is: checked on disk
        for what, outcome in attempts.items()
        if outcome.startswith("GOT")
    }
    assert not got, f"the hostile server got ({mechanism}): {got}"
    assert not _untouched(home_dir), f"the hostile server changed ({mechanism}): {_untouched(home_dir)}"
    assert report["connect"][str(listener)].startswith("denied")
    assert report["abstract"][abstract].startswith("denied")


async def test_off_runs_with_the_users_authority(
    coffer_home: Path, home_dir: Path, listener: int, abstract: str, mechanism: str
) -> None:
    """The control: the same plan, unconfined, gets every class the confined one could not."""
    _vault(coffer_home, home_dir, _plan(coffer_home, home_dir, listener, abstract), hostile_sandbox="off")
    report = await _report(coffer_home)
    swept = report["sweep"][str(home_dir)]
    assert swept.startswith("GOT") and ".claude.json" in swept and ".bash_history" in swept, swept
    assert ".config/some-new-tool/token" in swept and "code/app/.env" in swept
    assert report["read"][str(coffer_home / "coffer.toml")].startswith("GOT")
    assert len(_untouched(home_dir)) == 4, "every write landed, the sibling's cached code included"
    assert report["connect"][str(listener)] == "GOT connected"
    assert report["abstract"][abstract] == "GOT connected"
    assert report["signal"][str(os.getpid())] == "GOT signalled"
    assert any(TOKEN in v for v in report["processes"].values()), report["processes"]


async def test_a_port_grant_reaches_that_local_service_only(
    coffer_home: Path, home_dir: Path, listener: int, abstract: str, mechanism: str
) -> None:
    plan = _plan(coffer_home, home_dir, listener, abstract)
    plan["connect"] = [listener, 22]
    _vault(coffer_home, home_dir, plan, hostile_sandbox={"ports": [listener]})
    report = await _report(coffer_home)
    assert report["connect"][str(listener)] == "GOT connected"
    assert report["connect"]["22"].startswith("denied")


async def test_network_none_cuts_off_even_loopback(
    coffer_home: Path, home_dir: Path, listener: int, abstract: str, mechanism: str
) -> None:
    _vault(coffer_home, home_dir, _plan(coffer_home, home_dir, listener, abstract), {"network": "none"})
    report = await _report(coffer_home)
    assert report["connect"][str(listener)].startswith("denied"), report["connect"]


async def test_a_host_list_allows_those_hosts_through_the_proxy_and_nothing_around_it(
    coffer_home: Path, home_dir: Path, listener: int, abstract: str
) -> None:
    """`network = [hosts]` under bubblewrap: the proxy its environment names carries a connection to a listed
    host and refuses another; a connection that ignores the proxy finds no route at all."""
    allowed, other = f"localhost:{listener}", f"127.0.0.1:{listener}"
    plan = _plan(coffer_home, home_dir, listener, abstract, proxied=(allowed, other))
    _vault(coffer_home, home_dir, plan, hostile_sandbox={"network": [allowed]})
    report = await _report(coffer_home)
    assert report["proxied"][allowed].startswith("GOT HTTP/1.1 200"), report["proxied"]
    assert report["proxied"][other].startswith("denied HTTP/1.1 403"), report["proxied"]
    assert report["connect"][str(listener)].startswith("denied"), report["connect"]


@pytest.mark.one_mode("engine")
async def test_a_refused_local_port_named_only_in_the_arguments_gets_its_hint(
    coffer_home: Path, home_dir: Path, listener: int, mechanism: str
) -> None:
    """A real client's failure says nothing of the port ("ConnectError('All connection attempts failed')"):
    the hint comes from the call's arguments, held against what the sandbox lets it reach."""
    _vault(coffer_home, home_dir, {})
    async with serve(coffer_home) as served:
        result = await served.call("hostile__fetch", {"url": f"http://localhost:{listener}/status"})
    said = text(result)
    assert result.is_error and f"coffer edit hostile --allow-host localhost:{listener}" in said, said
