"""Shared fixtures: every test gets its own COFFER_HOME, so nothing touches the real vault."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

FIXTURES = Path(__file__).parent / "fixtures"
PYTHON = sys.executable
# A developer venv may have the optional MiniLM model and CI has not: rank as CI does, in this process
# (module-scoped fixtures included) and in the subprocesses it starts. MiniLM tests ask for it by name.
os.environ["COFFER_EMBEDDINGS"] = "wordllama"
# `coffer serve` goes through the vault's engine: one a test (or a module's gateway) started exits a few
# seconds after its last session instead of ten minutes, so engines never pile up over the suite.
os.environ["COFFER_ENGINE_IDLE"] = "3"
# Tables and wrapped lines render at one width whatever runs the suite (a terminal, CI's pipe, a
# pytest-xdist worker), so an assertion on a command's text never depends on where it ran.
os.environ["COLUMNS"] = "160"


SERVE_MODES = ("engine", "in-process")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked `serve_modes` runs every test twice: through the vault's engine (the default) and
    with `coffer serve --standalone` (COFFER_STANDALONE=1), the in-process gateway. Module-scoped, so a
    module's shared fixtures (a vault, a gateway) are made once per mode."""
    if metafunc.definition.get_closest_marker("serve_modes") is not None:
        only = metafunc.definition.get_closest_marker("one_mode")  # a test whose subject is one of them
        modes = only.args if only is not None else SERVE_MODES
        metafunc.parametrize("serve_mode", modes, indirect=True, scope="module")


@pytest.fixture(scope="module")
def serve_mode(request: pytest.FixtureRequest) -> str:
    """How `coffer serve` runs: the engine unless the module is parametrized (`serve_modes`)."""
    return str(getattr(request, "param", "engine"))


@pytest.fixture(autouse=True)
def _serve_env(serve_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`coffer serve` processes a test starts see its mode (a developer's COFFER_STANDALONE never leaks in)."""
    from coffer.engine.hosting import IN_PROCESS_ENV as STANDALONE_ENV

    if serve_mode == "in-process":
        monkeypatch.setenv(STANDALONE_ENV, "1")
    else:
        monkeypatch.delenv(STANDALONE_ENV, raising=False)


@pytest.fixture(autouse=True)
def coffer_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Autouse: even a test that forgets to ask for it never reads or writes the user's real vault."""
    home = tmp_path / "vault"
    monkeypatch.setenv("COFFER_HOME", str(home))
    monkeypatch.setenv("COFFER_REGISTRY_REFRESH", "off")  # no gateway reaches the real registry from a test
    yield home
    _stop_engine(home)


def _stop_engine(home: Path) -> None:
    """A test's `coffer serve` started its vault's engine: it ends with the test, upstreams and all (that
    vault's: a test may point COFFER_HOME at a module's vault, whose engine outlives it)."""
    from coffer.engine import control

    control.stop(home / "coffer.toml")


@pytest.fixture
def anyio_backend() -> str:
    """The gateway runs on asyncio; async tests (pytest.mark.anyio) run there too."""
    return "asyncio"


@pytest.fixture
def cli(coffer_home: Path) -> CliRunner:
    return CliRunner()


def run_cli(runner: CliRunner, *args: str, code: int | None = 0) -> object:
    """Invoke the real Typer app; assert the exit code when one is given."""
    from coffer.cli import app

    result = runner.invoke(app, list(args), catch_exceptions=False)
    if code is not None:
        assert result.exit_code == code, f"exit {result.exit_code}\nstdout:{result.stdout}\nstderr:{result.stderr}"
    return result


def subprocess_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["COFFER_HOME"] = str(home)
    return env
