"""What a newcomer meets at the command line: `coffer doctor NAME` as an add failure suggests, `-h`,
and a word on stderr when a person runs `coffer serve` in a terminal."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import run_cli


def test_doctor_takes_the_server_names_an_add_failure_suggests(cli: CliRunner, coffer_home: Path) -> None:
    """`coffer add` that fails says `coffer doctor NAME`: that command exists and checks only NAME."""
    demo = str(Path(__file__).resolve().parents[2] / "coffer" / "examples" / "demo_server.py")
    run_cli(cli, "add", "one", "--no-probe", "--", sys.executable, demo)
    run_cli(cli, "add", "two", "--no-probe", "--", "no-such-program-3f1a")
    report = json.loads(run_cli(cli, "doctor", "one", "--json").stdout)  # type: ignore[attr-defined]
    assert [s["name"] for s in report["servers"]] == ["one"] and report["failed"] == []
    failed = run_cli(cli, "doctor", "two", "--json", code=1)
    assert json.loads(failed.stdout)["failed"] == ["two"]  # type: ignore[attr-defined]
    unknown = run_cli(cli, "doctor", "three", code=3)
    assert "unknown server 'three'" in unknown.stderr  # type: ignore[attr-defined]
    cached = report["registry_cache"]  # how old the cache search abstains from is, and whether it is kept fresh
    assert cached["refresh"] == "off" and cached["registries"][0]["age"] == "never"  # the tests turn it off
    done = run_cli(cli, "doctor", "one")
    said = done.stdout + done.stderr  # type: ignore[attr-defined]
    assert "registry cache: https://registry.modelcontextprotocol.io: never read (background refresh off)" in said


def test_short_help_and_a_word_for_a_person_at_a_terminal(coffer_home: Path) -> None:
    import os
    import pty
    import threading

    assert "Usage:" in run_cli(CliRunner(), "-h").stdout  # type: ignore[attr-defined]
    primary, secondary = pty.openpty()
    env = dict(os.environ, COFFER_HOME=str(coffer_home), COFFER_STANDALONE="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "coffer", "serve"],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stderr is not None
    guard = threading.Timer(120, proc.kill)  # a serve that never says it ends the read, not the suite
    guard.start()
    try:
        first = proc.stderr.readline()  # waits for the line itself, however busy the machine
        proc.send_signal(signal.SIGINT)  # Ctrl-C: it was stuck behind a thread blocked reading the terminal
        proc.communicate(timeout=60)
    finally:
        guard.cancel()
        proc.kill()
        proc.communicate(timeout=30)
        os.close(primary)
        os.close(secondary)
    assert b"waiting for an MCP client on stdin" in first
    assert proc.returncode == 130  # as a shell reports a command stopped by Ctrl-C


@pytest.mark.parametrize("standalone", ["1", "0"], ids=["in-process", "engine"])
def test_ctrl_c_stops_serve_http_with_130(coffer_home: Path, standalone: str) -> None:
    import os
    import threading

    env = dict(os.environ, COFFER_HOME=str(coffer_home), COFFER_STANDALONE=standalone)
    from tests.gateway.test_gateway_http import free_port

    argv = [sys.executable, "-m", "coffer", "serve", "--http", str(free_port()), "--no-auth"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    guard = threading.Timer(120, proc.kill)
    guard.start()
    try:
        first = proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        guard.cancel()
        proc.kill()
        proc.communicate(timeout=30)
    assert b"serving MCP on http://127.0.0.1:" in first
    assert proc.returncode == 130


def test_disable_and_enable_take_several_targets_all_or_none(cli: CliRunner, coffer_home: Path) -> None:
    for name in ("one", "two", "three"):
        run_cli(cli, "add", name, "--no-probe", "--", "x")
    run_cli(cli, "disable", "one", "two")
    assert [s["enabled"] for s in _servers(cli)] == [False, False, True]
    before = (coffer_home / "coffer.toml").read_bytes()
    missing = run_cli(cli, "disable", "three", "nope", code=3)
    assert "unknown server 'nope'" in missing.stderr  # type: ignore[attr-defined]
    assert (coffer_home / "coffer.toml").read_bytes() == before  # 'three' was not disabled either
    shown = json.loads(run_cli(cli, "enable", "one", "two", "--json").stdout)  # type: ignore[attr-defined]
    assert shown["results"] == [{"target": "one", "changed": True}, {"target": "two", "changed": True}]
    single = json.loads(run_cli(cli, "enable", "one", "--json").stdout)  # type: ignore[attr-defined]
    assert single["target"] == "one" and single["changed"] is False  # one target: the shape it always had


def _servers(cli: CliRunner) -> list[dict[str, object]]:
    listed = json.loads(run_cli(cli, "list", "--json").stdout)  # type: ignore[attr-defined]
    return list(listed["servers"])


def test_help_names_values_not_python_types(cli: CliRunner) -> None:
    """Every command's help: `NAME`, `--env ENV`, never Typer's `{name}`, `<list[str]>` or `<float>`."""
    import typer

    from coffer.cli.commands import app

    def paths(command: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        subs = getattr(command, "commands", {})
        return [prefix] + [p for name, sub in subs.items() for p in paths(sub, (*prefix, name))]

    every = paths(typer.main.get_command(app))
    assert len(every) > 40
    for path in every:
        shown = run_cli(cli, *path, "--help").stdout  # type: ignore[attr-defined]
        assert not re.search(r"<(str|int|float|bool|path|list\[\w+\])>|[^$]\{[a-z_]+\}", shown), (path, shown)


def test_errors_under_json_are_json(cli: CliRunner) -> None:
    failed = run_cli(cli, "show", "nope", "--json", code=3)
    error = json.loads(failed.stdout)["error"]  # type: ignore[attr-defined]
    assert error == {"message": "unknown server 'nope' (see `coffer list`)", "kind": "NotFoundError", "exit_code": 3}
    assert "coffer: error: unknown server 'nope'" in failed.stderr  # type: ignore[attr-defined]
    plain = run_cli(cli, "show", "nope", code=3)
    assert plain.stdout == ""  # type: ignore[attr-defined]


def test_add_waits_as_long_as_its_own_timeout_says(
    cli: CliRunner, coffer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first start is capped (one hanging server must not hold `add`), but not below a timeout the user
    gave: a cold `npx`/`uvx` download can take longer than the cap, and `--timeout 90` says so."""
    from coffer.manage import probe
    from tests.fixtures.gateway_harness import FIXTURE

    monkeypatch.setattr(probe, "PROBE_TIMEOUT_S", 0.5)
    slow = ["--", sys.executable, str(FIXTURE), "--mode", "slow_start=1.5", "--name", "slow"]
    capped = run_cli(cli, "add", "capped", *slow, code=None)
    assert capped.exit_code != 0 and "no answer within 0.5s" in capped.stderr  # type: ignore[attr-defined]
    run_cli(cli, "remove", "capped")
    done = run_cli(cli, "add", "patient", "--timeout", "20", *slow)
    assert "serves" in done.stdout + done.stderr  # type: ignore[attr-defined]
