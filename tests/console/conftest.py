"""`coffer ui` as a real subprocess on a loopback port, with a private HOME and COFFER_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.gateway_harness import stop_process

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Console:
    url: str  # with the token, as printed
    base: str  # http://127.0.0.1:PORT
    token: str
    port: int
    proc: subprocess.Popen[str]


def console_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["COFFER_HOME"] = str(home)
    env["HOME"] = str(home.parent)  # the clients' files the profiles page reads; the vault is ~/vault
    env["PYTHONPATH"] = str(ROOT)
    return env


def start_console(home: Path, *args: str, browser: bool = False, env: dict[str, str] | None = None) -> Console:
    """`coffer ui --port 0` (and `--no-browser` unless `browser`), its URL read from its first line."""
    argv = [sys.executable, "-m", "coffer", "ui", "--port", "0", *([] if browser else ["--no-browser"]), *args]
    proc = subprocess.Popen(
        argv,
        env=console_env(home) | (env or {}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("coffer console: "):
        proc.kill()
        raise AssertionError(f"coffer ui printed {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}")
    url = line.split(": ", 1)[1].strip()
    base, _, token = url.partition("/?token=")
    return Console(url, base, token, int(base.rsplit(":", 1)[1]), proc)


def stop_console(console: Console) -> None:
    stop_process(console.proc)


@pytest.fixture
def console_home(coffer_home: Path) -> Path:
    """The 16 real servers' vault (tests/console/vault.py) under this test's COFFER_HOME."""
    from tests.console.vault import build

    build()
    # Claude Code, Codex and goose run `coffer serve --profile coding`, plain `coffer serve` and `--profile
    # lean`: the profiles page names them (their files written by `coffer install`, in this test's HOME;
    # goose's config says `cmd` and `envs`)
    env = console_env(coffer_home)
    installs = (
        ["install", "claude-code", "--profile", "coding", "--force"],
        ["install", "codex", "--force"],
        ["install", "goose", "--profile", "lean", "--force"],
    )
    for argv in installs:
        done = subprocess.run([sys.executable, "-m", "coffer", *argv], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    return coffer_home


@pytest.fixture
def console(console_home: Path) -> Iterator[Console]:
    running = start_console(console_home)
    yield running
    stop_console(running)
