"""`coffer add NAME` from a registry installs real servers that then answer through `coffer serve`: an npm
one (npx, pinned) and a PyPI one (uvx, pinned), from recorded real entries served on 127.0.0.1. A
version that cannot start (npm has no server-memory 0.6.3) is one line and leaves the vault as it was; one
written for the MCP SDK 1.x (mcp-server-time 0.6.2 imports what mcp 2 no longer has) is mended and runs.

The PyPI server's newer release is published to the test registry as the registry would list it: the
recorded entry with its version moved to the one on PyPI (2026.10.19)."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from coffer.discovery.mending import mend
from coffer.vault import registry
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import serve, text
from tests.fixtures.registry_server import RecordedRegistry, recorded

pytestmark = pytest.mark.anyio


@pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed")
async def test_an_npm_server_installed_by_name_answers_through_serve(coffer_home: Path) -> None:
    await anyio.to_thread.run_sync(install_sequential_thinking)
    async with serve(coffer_home, timeout=90) as s:
        thought = {"thought": "one step", "nextThoughtNeeded": False, "thoughtNumber": 1, "totalThoughts": 1}
        answer = await s.call("sequential-thinking__sequentialthinking", thought)
        assert not answer.is_error and '"thoughtNumber": 1' in text(answer)


def install_sequential_thinking() -> None:
    cli = CliRunner()
    with RecordedRegistry() as reg:
        run_cli(cli, "add", "io.github.modelcontextprotocol/server-sequential-thinking", "--registry", reg.url)
        cfg = registry.load().get("sequential-thinking")
        assert cfg.args == ["-y", "@modelcontextprotocol/server-sequential-thinking@0.6.2"]
        # a version npm does not have: one line, nothing written
        before = registry.load().path.read_text()
        err = run_cli(cli, "add", "memory", "--registry", reg.url, code=8).stderr  # type: ignore[attr-defined]
        assert "@modelcontextprotocol/server-memory@0.6.3" in err and "nothing was added" in err
        assert len([line for line in err.splitlines() if line.startswith("coffer: error:")]) == 1
        assert registry.load().path.read_text() == before and registry.load().servers.keys() == {"sequential-thinking"}


@pytest.mark.skipif(shutil.which("uvx") is None, reason="uvx is not installed (`pip install uv`; .ci/run does)")
async def test_a_pypi_server_installed_by_name_answers_through_serve(coffer_home: Path) -> None:
    """mcp-server-time 0.6.2 was written for the MCP SDK 1.x and does not pin it: uvx resolves mcp 2 and
    it dies importing what 2.x no longer has. `coffer add` recognises that, mends the launch line
    (`--with 'mcp<2'`), says so in the entry and its output, and the server answers."""
    said = await anyio.to_thread.run_sync(install_time)
    cfg = registry.load().get("time")
    assert [cfg.command, *cfg.args] == ["uvx", "--with", "mcp<2", "mcp-server-time==0.6.2"]
    assert cfg.source is not None and "MCP SDK 1.x" in cfg.source["mended"] and cfg.source["version"] == "0.6.2"
    assert "mended the registry's launch line" in said
    async with serve(coffer_home, timeout=120) as s:
        now = await s.call("time__get_current_time", {"timezone": "Asia/Tokyo"})
        assert not now.is_error and "Asia/Tokyo" in text(now)
    await anyio.to_thread.run_sync(install_newer_time)
    cfg = registry.load().get("time")
    assert [cfg.command, *cfg.args] == ["uvx", "mcp-server-time==2026.10.19"]  # written for 2.x: nothing to mend
    assert cfg.source is not None and "mended" not in cfg.source


def install_time() -> str:
    cli = CliRunner()
    with RecordedRegistry() as reg:
        done = run_cli(cli, "add", "time", "--registry", reg.url, "--timeout", "90")
        return str(done.stdout) + str(done.stderr)  # type: ignore[attr-defined]


def install_newer_time() -> None:
    cli = CliRunner()
    run_cli(cli, "remove", "time")
    with RecordedRegistry() as reg:
        newer = copy.deepcopy(next(s for s in recorded() if s["name"].endswith("/server-time")))
        newer["version"] = newer["packages"][0]["version"] = "2026.10.19"
        reg.publish(newer)
        run_cli(cli, "find", "time", "--registry", reg.url, "--refresh")
        run_cli(cli, "add", "time", "--registry", reg.url, "--timeout", "90")


@pytest.mark.skipif(shutil.which("uvx") is None, reason="uvx is not installed (`pip install uv`; .ci/run does)")
def test_a_package_whose_command_has_another_name_runs_by_uvs_own_advice() -> None:
    """`uvx PKG==VER` runs a command named as the package; where the package's is another, uv says which
    (`Use uvx --from PKG BIN instead`): the mended line runs it."""
    import subprocess

    line = ["uvx", "python-lsp-server==1.12.0"]
    failed = subprocess.run([*line, "--help"], capture_output=True, text=True, timeout=180)
    assert failed.returncode != 0
    fix = mend(line, failed.stderr)
    assert fix is not None and fix.command == ["uvx", "--from", "python-lsp-server==1.12.0", "pylsp"]
    assert subprocess.run([*fix.command, "--help"], capture_output=True, timeout=180).returncode == 0
    assert mend(fix.command, failed.stderr) is None  # mended once: never twice the same way
