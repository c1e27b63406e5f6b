"""`coffer add NAME` from a registry installs real servers that then answer through `coffer serve`: an npm
one (npx, pinned) and a PyPI one (uvx, pinned), from recorded real entries served on 127.0.0.1. A
version that cannot start (npm has no server-memory 0.6.3; mcp-server-time 0.6.2 imports what today's
mcp no longer has) is one line and leaves the vault as it was.

The PyPI server's newer release is published to the test registry as the registry would list it: the
recorded entry with its version moved to the one on PyPI (2026.10.19)."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

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
    await anyio.to_thread.run_sync(install_time)
    cfg = registry.load().get("time")
    assert [cfg.command, *cfg.args] == ["uvx", "mcp-server-time==2026.10.19"]
    assert cfg.source is not None and cfg.source["version"] == "2026.10.19"
    async with serve(coffer_home, timeout=120) as s:
        now = await s.call("time__get_current_time", {"timezone": "Asia/Tokyo"})
        assert not now.is_error and "Asia/Tokyo" in text(now)


def install_time() -> None:
    cli = CliRunner()
    with RecordedRegistry() as reg:
        err = run_cli(cli, "add", "time", "--registry", reg.url, "--timeout", "90", code=8).stderr  # type: ignore[attr-defined]
        assert "mcp-server-time==0.6.2" in err and "nothing was added" in err and not registry.load().servers
        newer = copy.deepcopy(next(s for s in recorded() if s["name"].endswith("/server-time")))
        newer["version"] = newer["packages"][0]["version"] = "2026.10.19"
        reg.publish(newer)
        run_cli(cli, "find", "time", "--registry", reg.url, "--refresh")
        run_cli(cli, "add", "time", "--registry", reg.url, "--timeout", "90")
