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
    said = text(outside)  # the server refused it itself: no sandbox grant is proposed, which would not help
    assert "'fs' itself serves only the folders its launch line names and a session's roots" in said, said
    assert str(start) in said and str(project) in said and "coffer edit" not in said, said


@pytest.mark.one_mode("engine")
@pytest.mark.parametrize("hide_bwrap", [False, True], ids=["bubblewrap", "landlock"])
async def test_the_real_filesystem_server_on_a_home_never_reaches_the_vault(
    coffer_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hide_bwrap: bool
) -> None:
    """The issue as a user met it: the real server-filesystem started on the folder that holds the user's home
    and the vault. It reads and writes the user's notes; the SSH key, the registry and the secrets file
    are out of reach, and what it is told says so on purpose, never with a grant an agent could pass on."""
    if hide_bwrap:
        monkeypatch.setenv(sandbox.BWRAP_ENV, "none")
    monkeypatch.setenv("COFFER_SECRETS_BACKEND", "file")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (home / "docs").mkdir()
    (home / "docs" / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("HOME", str(home))
    from coffer.trust import secrets

    secrets.set_secret("github", "ghp_" + "x" * 36)
    node = shutil.which("node") or "node"
    fs = registry.ServerConfig(name="homefs", command=node, args=[str(FILESYSTEM / "dist" / "index.js"), str(tmp_path)])
    servers.add_server(fs, path=coffer_home / "coffer.toml")
    async with serve(coffer_home) as served:
        notes = await served.call("homefs__read_text_file", {"path": str(home / "docs" / "notes.txt")})
        assert not notes.is_error and "mine" in text(notes), text(notes)
        wrote = await served.call("homefs__write_file", {"path": str(home / "docs" / "notes.txt"), "content": "ok\n"})
        assert not wrote.is_error, text(wrote)
        created = await served.call("homefs__write_file", {"path": str(home / "new.txt"), "content": "ok\n"})
        if hide_bwrap:  # Landlock cannot let it make a file beside a wall without letting it make one inside
            assert created.is_error and "under Landlock alone 'homefs' cannot create" in text(created), text(created)
        else:
            assert not created.is_error and (home / "new.txt").read_text() == "ok\n", text(created)
        said = {}
        for label, path in {
            "key": home / ".ssh" / "id_rsa",
            "registry": coffer_home / "coffer.toml",
            "secrets": coffer_home / "secrets.json",
        }.items():
            result = await served.call("homefs__read_text_file", {"path": str(path)})
            assert result.is_error and "PRIVATE KEY" not in text(result) and "ghp_" not in text(result), text(result)
            said[label] = text(result)
        listing = await served.call("homefs__list_directory", {"path": str(coffer_home)})
    assert (home / "docs" / "notes.txt").read_text() == "ok\n"
    if not hide_bwrap:  # Landlock lists a carved folder with all beneath it: names, never contents
        assert "coffer.toml" not in text(listing) and "secrets.json" not in text(listing), text(listing)
    assert "on purpose" in said["key"] and "secret place (SSH keys)" in said["key"], said["key"]
    assert "Coffer's vault" in said["registry"] and "Coffer's vault" in said["secrets"], said
    for words in said.values():
        assert "coffer edit" not in words and "--allow" not in words, words
