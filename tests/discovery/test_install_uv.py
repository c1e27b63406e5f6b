"""`coffer add NAME` from a registry with real uv, offline: the packages are wheels made here
(tests/fixtures/wheels.py) and served from a find-links page on 127.0.0.1, named in each entry's own
environment, so uvx runs confined as it would from PyPI and reaches nothing else.

- A package whose commands are not named as it is: uv lists them ("The following executables are
  available: ...") and Coffer runs the one named for the server, or, where none is, names each with the
  `coffer add` line that runs it.
- A heavy package: its first download outlasts the start's limit, so the install fetches it first
  (into the server's own cache, confined as its start is) and times only the start.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.manage import probe
from coffer.vault import registry
from tests.conftest import run_cli
from tests.fixtures.registry_server import RecordedRegistry
from tests.fixtures.wheels import Links, pypi_entry, wheel

REQUIRED = bool(os.environ.get("CI") or os.environ.get("COFFER_REQUIRE_SANDBOX"))  # .ci/run installs uv
pytestmark = pytest.mark.skipif(
    shutil.which("uvx") is None and not REQUIRED, reason="uvx is not installed (`pip install uv`; .ci/run does)"
)


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel(folder, "coffer-multi", "1.0", {"multi-server": "serve", "multi-cli": "idle"})
    wheel(folder, "coffer-tools", "1.0", {"tools-a": "serve", "tools-b": "idle"})
    wheel(folder, "coffer-heavy", "1.0", {"coffer-heavy": "serve"})
    return folder


@pytest.fixture
def links(wheels: Path) -> Iterator[Links]:
    with Links(wheels) as served:
        yield served


def added(cli: CliRunner, reg: RecordedRegistry, name: str, code: int = 0) -> str:
    done = run_cli(cli, "add", name, "--registry", reg.url, code=code)
    return str(done.stdout) + str(done.stderr)  # type: ignore[attr-defined]


def test_uvs_list_of_commands_is_read_and_the_one_named_for_the_server_runs(
    cli: CliRunner, links: Links, coffer_home: Path
) -> None:
    entry = pypi_entry("io.github.example/multi-mcp", "coffer-multi", "1.0", links.url)
    with RecordedRegistry([entry]) as reg:
        said = added(cli, reg, "multi")
    cfg = registry.load().get("multi")
    assert [cfg.command, *cfg.args] == ["uvx", "--from", "coffer-multi==1.0", "multi-server"]
    assert cfg.source is not None and "`multi-server`" in cfg.source["mended"]
    assert "mended the registry's launch line" in said and "'multi' serves 1 tool" in said
    assert "hello from coffer-multi" in run_cli(cli, "call", "multi__hello", "{}").stdout  # type: ignore[attr-defined]


def test_where_no_command_is_named_for_it_each_is_shown_with_its_add_line(
    cli: CliRunner, links: Links, coffer_home: Path
) -> None:
    entry = pypi_entry("io.github.example/toolbox", "coffer-tools", "1.0", links.url)
    with RecordedRegistry([entry]) as reg:
        err = added(cli, reg, "toolbox", code=8)
    assert "<EXECUTABLE-NAME>" not in err and "nothing was added" in err
    assert "coffer-tools==1.0 has 2 commands and none is named for it (tools-a, tools-b)" in err
    lines = [part.split("`")[0] for part in err.split("`coffer add ")[1:]]
    assert len(lines) == 2 and all(line.startswith("toolbox --env UV_FIND_LINKS=VALUE") for line in lines)
    assert not registry.load().servers
    # each line runs with the entry's values: the one whose command serves MCP lists its tool
    line = next(line for line in lines if line.endswith("tools-a"))
    for name, value in (("UV_FIND_LINKS", links.url), ("UV_NO_INDEX", "1"), ("UV_PYTHON_DOWNLOADS", "never")):
        line = line.replace(f"{name}=VALUE", f"{name}={value}")
    run_cli(cli, "add", *shlex.split(line))
    assert "hello from coffer-tools" in run_cli(cli, "call", "toolbox__hello", "{}").stdout  # type: ignore[attr-defined]


@pytest.mark.parametrize("way", ["by name", "by launch line"])
def test_a_heavy_package_is_fetched_before_its_start_is_timed(
    cli: CliRunner, wheels: Path, coffer_home: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """Its download (two fetches of 3 s: uv reads the wheel, then installs it) outlasts a start limit of
    5 s, which the start itself is well within once the package is in the server's cache; so for an add
    from a registry and for `coffer add NAME -- uvx PKG` alike."""
    monkeypatch.setattr(probe, "PROBE_TIMEOUT_S", 5.0)
    with Links(wheels, delay=3.0) as slow:
        entry = pypi_entry("io.github.example/heavy", "coffer-heavy", "1.0", slow.url)
        if way == "by name":
            with RecordedRegistry([entry]) as reg:
                said = added(cli, reg, "heavy")
        else:
            env = [f"--env={e['name']}={e['value']}" for e in entry["packages"][0]["environmentVariables"]]
            done = run_cli(cli, "add", "heavy", *env, "--", "uvx", "coffer-heavy==1.0")
            said = str(done.stdout) + str(done.stderr)  # type: ignore[attr-defined]
        assert slow.fetched >= 1
    assert (
        "fetched in" in said
        and "into the server's own cache; starting 'heavy' once" in said
        and "'heavy' serves 1 tool" in said
    )
    fetched = float(said.split("fetched in ")[1].split("s,")[0])
    assert fetched >= 3.0  # the download was in the fetch, not in the timed start
    cfg = registry.load().get("heavy")
    assert [cfg.command, *cfg.args] == ["uvx", "coffer-heavy==1.0"]
