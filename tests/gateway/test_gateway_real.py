"""Real servers from PyPI behind `coffer serve`: mcp-server-time and mcp-server-git, each run by uvx in
its own environment (never installed into Coffer's venv). Both are mcp 2.x SDK servers, reached with
the legacy handshake."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from coffer.manage import servers
from coffer.vault import catalogue, registry
from tests.fixtures.gateway_harness import serve, text

pytestmark = pytest.mark.anyio
UVX = shutil.which("uvx")


@pytest.mark.skipif(UVX is None, reason="uvx is not installed (`pip install uv`; .ci/run does)")
@pytest.mark.skipif(shutil.which("git") is None, reason="mcp-server-git needs the git program")
async def test_time_and_git_from_pypi(coffer_home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "hello.txt").write_text("hello\n")
    subprocess.run([*git, "add", "hello.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    (repo / "hello.txt").write_text("hello, world\n")
    assert UVX is not None
    for name, args in (
        ("time", ["mcp-server-time", "--local-timezone", "UTC"]),
        ("git", ["mcp-server-git", "--repository", str(repo)]),
    ):
        servers.add_server(registry.ServerConfig(name=name, command=UVX, args=args, timeout=90.0))

    async with serve(coffer_home, timeout=120) as s:
        now = await s.call("time__get_current_time", {"timezone": "UTC"})
        assert not now.is_error and "UTC" in text(now)
        status = await s.call("git__git_status", {"repo_path": str(repo)})
        assert not status.is_error and "hello.txt" in text(status)
        log = await s.call("git__git_log", {"repo_path": str(repo), "max_count": 1})
        assert not log.is_error and "first" in text(log)
        names = await s.tool_names()
        assert {"time__convert_time", "git__git_diff_unstaged"} <= set(names)
        found = await s.call("coffer__search_tools", {"query": "convert a time between timezones", "top_k": 3})
        assert found.structured_content and found.structured_content["tools"][0]["name"] == "time__convert_time"

    snap = catalogue.load_snapshot()
    assert snap is not None and {"time", "git"} <= set(snap.servers)
