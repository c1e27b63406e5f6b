"""Secrets (`coffer secret`, `${secret:NAME}`), value-based redaction, and 0600/0700 under umask 000."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend
from typer.testing import CliRunner, Result

from coffer.cli import render
from coffer.errors import SecretError, UsageError
from coffer.trust import expand, redact, secrets
from coffer.vault import catalogue, paths, registry


def run_cli(runner: CliRunner, *args: str, input: str | None = None, code: int | None = 0) -> Result:
    from coffer.cli import app

    result = runner.invoke(app, list(args), input=input, catch_exceptions=False)
    if code is not None:
        assert result.exit_code == code, f"exit {result.exit_code}\nstdout:{result.stdout}\nstderr:{result.stderr}"
    return result


CANARY = "cnry-7f3a9d2e41b6"


@pytest.fixture(autouse=True)
def _file_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Never touch a developer's real keyring; the keyring path gets its own in-memory backend below."""
    monkeypatch.setenv(secrets.ENV_BACKEND, "file")
    yield
    redact.reset()


class MemoryKeyring(KeyringBackend):
    """A real keyring backend that keeps its entries in a dict (CI has no Secret Service)."""

    priority = 5  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        del self.entries[(service, username)]


@pytest.fixture
def memory_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    import keyring

    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    monkeypatch.setenv(secrets.ENV_BACKEND, "auto")
    yield backend
    keyring.set_keyring(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ---------------------------------------------------------------- the CLI and the file store


def test_set_list_resolve_rm(cli: CliRunner, coffer_home: Path) -> None:
    result = run_cli(cli, "secret", "set", "GH_TOKEN", input=f"{CANARY}\n")
    assert "vault file" in result.stderr
    assert CANARY not in result.stdout + result.stderr

    listed = json.loads(run_cli(cli, "secret", "list", "--json").stdout)
    assert listed == {"version": 1, "secrets": [{"name": "GH_TOKEN", "store": "file"}]}
    human = run_cli(cli, "secret", "list").stdout
    assert "GH_TOKEN" in human and CANARY not in human

    assert secrets.resolve("GH_TOKEN") == CANARY  # the trailing newline of stdin is not part of it
    assert expand.expand("Bearer ${secret:GH_TOKEN}") == f"Bearer {CANARY}"
    assert mode(secrets.secrets_path()) == 0o600

    run_cli(cli, "secret", "set", "GH_TOKEN", input="second-value\n")
    assert secrets.resolve("GH_TOKEN") == "second-value"

    run_cli(cli, "secret", "rm", "GH_TOKEN")
    assert json.loads(run_cli(cli, "secret", "list", "--json").stdout)["secrets"] == []
    assert CANARY not in secrets.secrets_path().read_text()
    with pytest.raises(SecretError, match="not set"):
        secrets.resolve("GH_TOKEN")


def test_value_never_from_argv(cli: CliRunner, coffer_home: Path) -> None:
    result = run_cli(cli, "secret", "set", "TOK", "value-on-argv", input="", code=2)
    assert "unexpected extra argument" in result.stderr.lower()
    assert not secrets.secrets_path().exists()


@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        (["secret", "set", "TOK"], "", 2, "empty secret value"),
        (["secret", "set", "bad name"], "x", 2, "invalid secret name"),
        (["secret", "set", "9lives"], "x", 2, "invalid secret name"),
        (["secret", "rm", "NOPE"], "", 3, "no secret named 'NOPE'"),
    ],
)
def test_bad_input_is_one_clear_line(
    cli: CliRunner, coffer_home: Path, args: list[str], stdin: str, code: int, message: str
) -> None:
    result = run_cli(cli, *args, input=stdin, code=code)
    assert message in result.stderr
    assert result.stderr.count("coffer: error:") == 1


def test_unset_references_are_errors_never_literals(coffer_home: Path) -> None:
    cfg = registry.ServerConfig(name="gh", command="x", env={"A": "${secret:MISSING}", "B": "${NOT_SET_ANYWHERE_42}"})
    with pytest.raises(SecretError, match="secret 'MISSING' is not set"):
        expand.resolved_env(cfg, environ={})
    cfg.env = {"B": "${NOT_SET_ANYWHERE_42}"}
    with pytest.raises(SecretError, match="not set in the environment"):
        expand.resolved_env(cfg, environ={})
    with pytest.raises(SecretError, match="invalid secret reference"):
        secrets.resolve("no spaces")


def test_damaged_secrets_file_is_an_error_not_empty(coffer_home: Path) -> None:
    secrets.set_secret("KEEP", "keep-this-value")
    secrets.secrets_path().write_text("{not json")
    with pytest.raises(SecretError, match="unreadable secrets file"):
        secrets.resolve("KEEP")
    with pytest.raises(SecretError):
        secrets.set_secret("OTHER", "other-value")  # never overwrite a file we could not read
    assert secrets.secrets_path().read_text() == "{not json"


# ---------------------------------------------------------------- the keyring path


def test_keyring_backend_holds_values_index_holds_names(
    cli: CliRunner, coffer_home: Path, memory_keyring: MemoryKeyring
) -> None:
    result = run_cli(cli, "secret", "set", "API_KEY", input=CANARY)
    assert "OS keyring" in result.stderr
    assert memory_keyring.entries == {(secrets.service_name(), "API_KEY"): CANARY}
    assert secrets.service_name() == f"coffer:{coffer_home.resolve()}"  # one vault never reads another's
    index = secrets.secrets_path().read_text()
    assert "API_KEY" in index and CANARY not in index
    assert json.loads(run_cli(cli, "secret", "list", "--json").stdout)["secrets"] == [
        {"name": "API_KEY", "store": "keyring"}
    ]
    assert secrets.resolve("API_KEY") == CANARY

    memory_keyring.entries.clear()  # the keyring lost it (another tool deleted it)
    with pytest.raises(SecretError, match="missing from the OS keyring"):
        secrets.resolve("API_KEY")

    run_cli(cli, "secret", "set", "API_KEY", input=CANARY)
    run_cli(cli, "secret", "rm", "API_KEY")
    assert memory_keyring.entries == {}


def test_fail_backend_falls_back_to_file(coffer_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        monkeypatch.setenv(secrets.ENV_BACKEND, "auto")
        assert secrets.keyring_backend() is None
        assert secrets.set_secret("T", "fallback-value") == "file"
        monkeypatch.setenv(secrets.ENV_BACKEND, "keyring")
        with pytest.raises(SecretError, match="no OS keyring backend"):
            secrets.set_secret("T", "fallback-value")
        monkeypatch.setenv(secrets.ENV_BACKEND, "vault")
        with pytest.raises(Exception, match="must be auto, file or keyring"):
            secrets.keyring_backend()
    finally:
        keyring.set_keyring(previous)


# ---------------------------------------------------------------- redaction by value


def test_scrub_covers_values_and_their_encodings() -> None:
    redact.register("tok/en+with=chars", "short")  # 5 chars: configuration, not a credential
    import base64
    from urllib.parse import quote

    text = (
        "plain tok/en+with=chars, json "
        + json.dumps({"v": "tok/en+with=chars"})
        + f" url {quote('tok/en+with=chars', safe='')} b64 {base64.b64encode(b'tok/en+with=chars').decode()} short"
    )
    out = redact.scrub(text)
    assert "tok/en" not in out and "dG9rL2Vu" not in out
    assert out.count(redact.MASK) == 4 and out.endswith("short")
    assert redact.scrub_obj({"k": ["a tok/en+with=chars b"]}) == {"k": ["a **** b"]}


def test_resolving_registers_for_every_output(capsys: pytest.CaptureFixture[str], coffer_home: Path) -> None:
    secrets.set_secret("T", CANARY)
    redact.reset()
    secrets.resolve("T")
    render.error(f"upstream said: token {CANARY} rejected")
    render.say(CANARY)
    render.print_json({"echo": CANARY})
    render.table(["a"], [(CANARY,)])
    cfg = registry.ServerConfig(name="y", command="y", env={"PLAIN": "plain-literal-token"})
    expand.resolved_env(cfg)  # the gateway's launch path registers what it resolves
    render.text("plain-literal-token")
    out = capsys.readouterr()
    assert CANARY not in out.out + out.err and "plain-literal-token" not in out.out
    assert "token **** rejected" in out.err

    record = logging.LogRecord("coffer", logging.ERROR, __file__, 1, "failed with %s", (CANARY,), None)
    assert redact.RedactingFilter().filter(record) and record.getMessage() == "failed with ****"


# ---------------------------------------------------------------- permissions under umask 000


def test_everything_written_is_private_under_umask_000(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "deep" / "er" / "vault"  # parents Coffer creates must be 0700 too
    monkeypatch.setenv("COFFER_HOME", str(home))
    old = os.umask(0)
    try:
        run_cli(cli, "add", "a", "--no-probe", "--env", "K=${secret:S}", "--", "echo", "hi")
        run_cli(cli, "secret", "set", "S", input="private-value")
        catalogue.save_server("a", tools=[{"name": "t", "description": "d", "inputSchema": {"type": "object"}}])
        from coffer.trust.pinning import Pins

        with Pins.open() as pins:
            pins.observe("a", catalogue.server_tools(catalogue.load_snapshot(), "a"))
        from coffer.vault.database import open_db

        db = open_db()
        db["probe"].insert({"x": 1})  # WAL and SHM exist while a connection is open
        assert (home / "coffer.db-wal").exists() and (home / "coffer.db-shm").exists()
        paths.cache_dir()
        files = {p.name: mode(p) for p in home.rglob("*") if p.is_file()}
        dirs = {str(p): mode(p) for p in [home, home.parent, home.parent.parent, *home.rglob("*")] if p.is_dir()}
        db.conn.close()
    finally:
        os.umask(old)
    assert {"coffer.toml", "coffer.toml.lock", "secrets.json", "catalogue.json", "coffer.db", "coffer.db-wal"} <= set(
        files
    )
    assert {name: oct(m) for name, m in files.items() if m != 0o600} == {}
    assert {name: oct(m) for name, m in dirs.items() if m != 0o700} == {}


def test_upstream_stderr_tails_are_scrubbed_of_every_resolved_value(coffer_home: Path) -> None:
    """A tail reaches errors, `coffer doctor` and agents: another server's secret is masked there too."""
    import base64

    from coffer.upstreams.transport import StreamStats

    secrets.set_secret("T", CANARY)
    redact.reset()
    secrets.resolve("T")
    stats = StreamStats(secrets=("own-env-value",))
    encoded = base64.b64encode(CANARY.encode()).decode()
    stats.feed_stderr(f"auth failed for {CANARY} ({encoded}) with own-env-value\n".encode())
    assert stats.last_stderr_line() == "auth failed for **** (****) with ****"


def test_member_references_are_the_members_own_and_never_fall_back(coffer_home: Path) -> None:
    """`${member:NAME}`: the served member's own secret; a member without it gets an error, never the
    vault owner's; with no member (one user, `coffer add`'s first start) it is the vault's own."""
    from coffer.trust import member_secrets

    secrets.set_secret("GH", "owner-value-1")
    member_secrets.put("agent-alice", "GH", "alice-value-2")
    assert expand.expand("${member:GH}") == "owner-value-1"
    assert expand.expand("token ${member:GH}", member="agent-alice") == "token alice-value-2"
    with pytest.raises(SecretError, match=r"\$\{member:GH\} is not set for member 'agent-bob'"):
        expand.expand("${member:GH}", member="agent-bob")
    assert member_secrets.names("agent-alice") == ["GH"] and member_secrets.names("agent-bob") == []
    assert member_secrets.remove("agent-alice", "GH") and not member_secrets.remove("agent-alice", "GH")
    assert stat.S_IMODE(member_secrets.path_of("agent-alice").stat().st_mode) == 0o600
    with pytest.raises(UsageError):
        member_secrets.put("agent-alice", "GH", "")
