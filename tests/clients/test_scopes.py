"""Moving in from Claude Code: every scope, one copy of each launch, `--move`, and a complete first list."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from coffer.vault import catalogue, registry
from tests.clients.conftest import put
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import FIXTURE, serve

FS = {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]}
GH = {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"T": "${T}"}}
DB = {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "app.db"]}


def claude_json(project: Path) -> str:
    """What `claude mcp add` writes: user scope at the top, local scope under the project's path."""
    return (
        json.dumps(
            {
                "numStartups": 7,
                "mcpServers": {"filesystem": FS},
                "projects": {
                    str(project): {"allowedTools": [], "mcpServers": {"github": GH, "fs2": FS}},
                    "/elsewhere": {"mcpServers": {}},
                },
                "tipsHistory": {"x": 1},
            },
            indent=2,
        )
        + "\n"
    )


@pytest.fixture
def project(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    proj = home / "work" / "app"
    proj.mkdir(parents=True)
    put(home, ".claude.json", claude_json(proj))
    put(proj, ".mcp.json", json.dumps({"mcpServers": {"db": DB}}, indent=2) + "\n")
    monkeypatch.chdir(proj)
    return proj


def imported(cli: CliRunner, *args: str) -> list[dict[str, object]]:
    return json.loads(run_cli(cli, "import", "claude-code", *args, "--json").stdout)["servers"]  # type: ignore[attr-defined]


def test_every_scope_is_read_and_said(cli: CliRunner, project: Path) -> None:
    items = {i["source_name"]: i for i in imported(cli, "--dry-run")}
    assert set(items) == {"filesystem", "github", "fs2", "db"}
    assert items["filesystem"]["scope"] == "user" and items["filesystem"]["action"] == "add"
    assert items["github"]["scope"] == "local" and str(project) in str(items["github"]["from"])
    assert items["db"]["scope"] == "project" and items["db"]["action"] == "add"
    assert items["fs2"]["action"] == "skip" and "same launch as 'filesystem'" in str(items["fs2"]["reason"])
    only_local = {i["source_name"] for i in imported(cli, "--dry-run", "--scope", "local")}
    assert only_local == {"github", "fs2"}
    bad = run_cli(cli, "import", "claude-code", "--scope", "team", code=2)
    assert "unknown scope 'team'" in bad.stderr  # type: ignore[attr-defined]


def test_same_launch_from_another_client_is_not_imported_twice(cli: CliRunner, project: Path, home: Path) -> None:
    imported(cli, "--no-probe")
    put(home, ".cursor/mcp.json", json.dumps({"mcpServers": {"files": {k: v for k, v in FS.items() if k != "type"}}}))
    again = json.loads(run_cli(cli, "import", "cursor", "--no-probe", "--json").stdout)["servers"]  # type: ignore[attr-defined]
    assert again[0]["action"] == "skip" and "same launch as 'filesystem'" in again[0]["reason"]
    assert sorted(registry.load().servers) == ["db", "filesystem", "github"]


def test_move_takes_the_entries_out_and_installs_coffer(cli: CliRunner, project: Path, home: Path) -> None:
    user, proj_file = home / ".claude.json", project / ".mcp.json"
    before_user, before_proj = user.read_bytes(), proj_file.read_bytes()
    dry = run_cli(cli, "import", "claude-code", "--move", "--dry-run", "--no-probe")
    assert '-  "mcpServers": {' not in dry.stdout and '"filesystem"' in dry.stdout  # type: ignore[attr-defined]
    assert user.read_bytes() == before_user and proj_file.read_bytes() == before_proj  # nothing written
    assert not registry.load().servers

    run_cli(cli, "import", "claude-code", "--move", "--no-probe")
    data = json.loads(user.read_text())
    assert set(data["mcpServers"]) == {"coffer"} and data["mcpServers"]["coffer"]["args"][-1] == "serve"
    assert data["projects"][str(project)]["mcpServers"] == {}  # github and its duplicate fs2 both moved
    assert data["numStartups"] == 7 and data["tipsHistory"] == {"x": 1} and "/elsewhere" in data["projects"]
    assert json.loads(proj_file.read_text())["mcpServers"] == {}
    backups = sorted(user.parent.glob(".claude.json.coffer-backup-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == before_user  # one backup: the file as it was
    assert next(project.glob(".mcp.json.coffer-backup-*")).read_bytes() == before_proj
    assert sorted(registry.load().servers) == ["db", "filesystem", "github"]


def test_import_probes_so_the_first_list_is_complete(cli: CliRunner, home: Path) -> None:
    entries = {
        f"fx{i}": {"command": sys.executable, "args": [str(FIXTURE), "--name", f"fx{i}", "--mode", "slow_start=1"]}
        for i in range(3)
    }
    put(home, ".claude.json", json.dumps({"mcpServers": entries}))
    result = run_cli(cli, "import", "claude-code", "--scope", "user")
    assert "3 of 3 listed their tools" in result.stderr  # type: ignore[attr-defined]
    snap = catalogue.load_snapshot()
    assert snap is not None and all(len(snap.servers[f"fx{i}"].tools) == 10 for i in range(3))

    async def first_list() -> list[str]:
        async with serve(Path(str(registry.load().path.parent))) as s:
            return await s.tool_names()

    names = anyio.run(first_list)
    assert all(f"fx{i}__echo" in names for i in range(3)) and len(names) == 3 + 30


def test_secret_arguments_are_masked_everywhere_they_are_printed(cli: CliRunner, coffer_home: Path) -> None:
    token = "ghp_" + "A1b2C3d4" * 5
    run_cli(cli, "add", "gh", "--no-probe", "--", "npx", "srv", "--api-key", "s3cr3t-k3y-value", f"--token={token}")
    out = [
        run_cli(cli, "list").stderr + run_cli(cli, "list").stdout,  # type: ignore[attr-defined]
        run_cli(cli, "list", "--json").stdout,  # type: ignore[attr-defined]
        run_cli(cli, "show", "gh").stdout,  # type: ignore[attr-defined]
        run_cli(cli, "show", "gh", "--json").stdout,  # type: ignore[attr-defined]
    ]
    for text in out:
        assert "s3cr3t-k3y-value" not in text and token not in text and "****" in text
    assert "s3cr3t-k3y-value" in (coffer_home / "coffer.toml").read_text()  # stored as given, only shown masked
