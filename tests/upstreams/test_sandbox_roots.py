"""Confinement that works with the agent: the roots a host declares reach the sandbox of a server that
works on roots (the real server-filesystem, from .ci/node), and a path outside both is refused with a
denial that names it and the grant."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from coffer.manage import servers
from coffer.upstreams import sandbox
from coffer.vault import registry
from tests.fixtures.gateway_harness import serve, text

FILESYSTEM = Path(__file__).resolve().parents[2] / ".ci/node/node_modules/@modelcontextprotocol/server-filesystem"
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.serve_modes,
    pytest.mark.skipif(
        not (FILESYSTEM / "dist" / "index.js").exists() or shutil.which("node") is None,
        reason="run .ci/run for server-filesystem",
    ),
    pytest.mark.skipif(not sandbox.support().available, reason="no confinement here"),
]


async def test_declared_roots_are_granted_and_a_path_outside_is_named(coffer_home: Path, tmp_path: Path) -> None:
    start, project, elsewhere = tmp_path / "start", tmp_path / "project", tmp_path / "elsewhere"
    for folder in (start, project, elsewhere):
        folder.mkdir()
    (elsewhere / "secret.txt").write_text("not yours\n")
    node = shutil.which("node") or "node"
    fs = registry.ServerConfig(name="fs", command=node, args=[str(FILESYSTEM / "dist" / "index.js"), str(start)])
    servers.add_server(fs, path=coffer_home / "coffer.toml")

    async def roots(_ctx: object) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=f"file://{project}", name="project")])

    async with serve(coffer_home, list_roots_callback=roots) as served:
        target = str(project / "notes.txt")
        result = None
        with anyio.fail_after(60):
            while True:  # the first answer may come from the process that has not got the roots yet
                result = await served.call("fs__write_file", {"path": target, "content": "written\n"})
                if not result.is_error:
                    break
                await anyio.sleep(0.5)
        assert (project / "notes.txt").read_text() == "written\n"
        outside = await served.call("fs__read_text_file", {"path": str(elsewhere / "secret.txt")})
    assert outside.is_error
    assert "not yours" not in text(outside)
    said = text(outside)  # the denial names the path and the one command that grants it
    assert f"coffer: the sandbox keeps {elsewhere / 'secret.txt'} from 'fs'" in said, said
    assert f"coffer edit fs --allow-read {elsewhere / 'secret.txt'}" in said
