"""Gemini CLI, Windsurf, Cline, Amazon Q, Kiro, Zed, opencode, goose and Continue: each in its own format
and place, through the real CLI in a temporary HOME: import (with each format's quirks), install (the
rest of the file kept, a byte-identical backup), and `--move`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.clients import jsonc
from tests.clients.conftest import put
from tests.conftest import run_cli

GEMINI = """{
  "theme": "GitHub",
  "mcpServers": {
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "$GITHUB_TOKEN"}, "timeout": 30000, "trust": false},
    "docs": {"httpUrl": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS}"}},
    "old": {"url": "https://example.com/sse"}
  }
}
"""
WINDSURF = """{
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/repo"]},
    "linear": {"serverUrl": "https://mcp.linear.app/mcp"}
  }
}
"""
CLINE = """{
  "mcpServers": {
    "fetch": {"command": "uvx", "args": ["mcp-server-fetch"], "disabled": false, "autoApprove": []},
    "remote": {"type": "streamableHttp", "url": "https://mcp.example.com/mcp"},
    "events": {"type": "sse", "url": "https://example.com/sse"}
  }
}
"""
AMAZON_Q = """{
  "mcpServers": {
    "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {}, "timeout": 60000}
  }
}
"""
KIRO = """{
  "mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time"], "disabled": true, "autoApprove": ["get_current_time"]}
  }
}
"""
ZED = """// Zed settings
{
  "theme": "One Dark",
  "context_servers": {
    "hexdocs": {"source": "custom", "command": "npx", "args": ["-y", "hexdocs-mcp@0.5.0"], "env": {}},
    "legacy": {"command": {"path": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}}},
    "github-ext": {"source": "extension", "settings": {"github_personal_access_token": "x"}},
  },
  "vim_mode": true,
}
"""
OPENCODE = """{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "everything": {"type": "local", "command": ["npx", "-y", "@modelcontextprotocol/server-everything"],
                   "environment": {"DEBUG": "1"}, "enabled": true},
    "context7": {"type": "remote", "url": "https://mcp.context7.com/mcp", "enabled": false}
  }
}
"""

GOOSE = """# goose config
GOOSE_PROVIDER: anthropic
extensions:
  developer:
    bundled: true
    enabled: true
    name: developer
    timeout: 300
    type: builtin
  github:
    name: GitHub
    cmd: npx
    args: [-y, "@modelcontextprotocol/server-github"]
    envs: {}
    env_keys: [GITHUB_PERSONAL_ACCESS_TOKEN]
    enabled: true
    timeout: 300
    type: stdio
  remote:
    name: remote
    type: streamable_http
    uri: https://mcp.example.com/mcp
    enabled: false
"""
CONTINUE = """name: My Config
version: 0.0.1
schema: v1
# models go here
mcpServers:
  - name: SQLite MCP
    command: npx
    args: ["-y", "mcp-sqlite", "/home/me/db.sqlite"]
  - name: Docs
    type: streamable-http
    url: https://mcp.example.com/mcp
"""

CASES = {
    # client: (file under HOME, text, {imported name: expected launch line}, {skipped name: reason fragment})
    "gemini": (
        ".gemini/settings.json",
        GEMINI,
        {"github": "npx -y @modelcontextprotocol/server-github", "docs": "https://mcp.example.com/mcp"},
        {"old": "SSE"},
    ),
    "windsurf": (
        ".codeium/windsurf/mcp_config.json",
        WINDSURF,
        {"fs": "npx -y @modelcontextprotocol/server-filesystem /repo", "linear": "https://mcp.linear.app/mcp"},
        {},
    ),
    "cline": (
        ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
        CLINE,
        {"fetch": "uvx mcp-server-fetch", "remote": "https://mcp.example.com/mcp"},
        {"events": "SSE"},
    ),
    "amazon-q": (".aws/amazonq/mcp.json", AMAZON_Q, {"git": "uvx mcp-server-git"}, {}),
    "kiro": (".kiro/settings/mcp.json", KIRO, {"time": "uvx mcp-server-time"}, {}),
    "zed": (
        ".config/zed/settings.json",
        ZED,
        {"hexdocs": "npx -y hexdocs-mcp@0.5.0", "legacy": "uvx mcp-server-time"},
        {"github-ext": "Zed extension"},
    ),
    "goose": (
        ".config/goose/config.yaml",
        GOOSE,
        {"github": "npx -y @modelcontextprotocol/server-github", "remote": "https://mcp.example.com/mcp"},
        {"developer": "builtin"},
    ),
    "continue": (
        ".continue/config.yaml",
        CONTINUE,
        {"SQLite MCP": "npx -y mcp-sqlite /home/me/db.sqlite", "Docs": "https://mcp.example.com/mcp"},
        {},
    ),
    "opencode": (
        ".config/opencode/opencode.json",
        OPENCODE,
        {"everything": "npx -y @modelcontextprotocol/server-everything", "context7": "https://mcp.context7.com/mcp"},
        {},
    ),
}


@pytest.mark.parametrize("client", sorted(CASES))
def test_import_reads_each_format(cli: CliRunner, home: Path, client: str) -> None:
    rel, text, wanted, skipped = CASES[client]
    put(home, rel, text)
    out = json.loads(run_cli(cli, "import", client, "--no-probe", "--json").stdout)  # type: ignore[attr-defined]
    got = {i["source_name"]: i for i in out["servers"]}
    for name, launch in wanted.items():
        server = got[name]["server"]
        assert got[name]["action"] == "added", got[name]
        assert launch == (server.get("url") or " ".join([server["command"], *server["args"]]))
    for name, why in skipped.items():
        assert got[name]["action"] == "skip" and why in got[name]["reason"]
    if client == "gemini":  # $VAR is Gemini's spelling of ${VAR}
        assert got["github"]["server"]["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
    if client == "kiro":
        assert got["time"]["server"]["enabled"] is False
    if client == "opencode":
        assert got["everything"]["server"]["env"] == {"DEBUG": "****"} and not got["context7"]["server"]["enabled"]
    if client == "zed":
        assert got["legacy"]["server"]["env"] == {"TZ": "****"}


@pytest.mark.parametrize("client", sorted(CASES))
def test_install_keeps_the_rest_of_the_file(cli: CliRunner, home: Path, client: str) -> None:
    rel, text, _, _ = CASES[client]
    path = put(home, rel, text)
    run_cli(cli, "install", client)
    new = path.read_text()
    (backup,) = path.parent.glob(f"{path.name}.coffer-backup-*")
    assert backup.read_text() == text
    before, after = parse(client, text), parse(client, new)
    key = KEYS.get(client, "mcpServers")
    entry = after[key]["coffer"]
    assert {k: v for k, v in after.items() if k != key} == {k: v for k, v in before.items() if k != key}
    assert {k: v for k, v in after[key].items() if k != "coffer"} == before[key]
    launched = entry["command"] if client == "opencode" else [entry.get("cmd") or entry["command"], *entry["args"]]
    assert launched[-1] == "serve"
    if client == "zed":
        assert entry["source"] == "custom" and new.startswith("// Zed settings\n")
    if client == "opencode":
        assert entry["type"] == "local" and entry["enabled"] is True
    if client in ("goose", "continue"):
        assert new.startswith(text.splitlines()[0]) and "# " in new  # comments kept
    run_cli(cli, "install", client)  # a second install changes nothing
    assert path.read_text() == new


KEYS = {"zed": "context_servers", "opencode": "mcp", "goose": "extensions"}


def parse(client: str, text: str) -> dict[str, object]:
    """The file's meaning; Continue's server list keyed by name, so every format compares alike."""
    if client not in ("goose", "continue"):
        return jsonc.parse(text).value
    from ruamel.yaml import YAML

    data = json.loads(json.dumps(YAML(typ="safe").load(text)))
    if client == "continue":
        data["mcpServers"] = {s["name"]: s for s in data.get("mcpServers") or []}
    return data


@pytest.mark.parametrize("client", ["gemini", "zed", "opencode", "goose", "continue"])
def test_move_out_of_each_format(cli: CliRunner, home: Path, client: str) -> None:
    rel, text, _, skipped = CASES[client]
    path = put(home, rel, text)
    run_cli(cli, "import", client, "--no-probe", "--move")
    key = KEYS.get(client, "mcpServers")
    left = parse(client, path.read_text())[key]
    assert set(left) == {"coffer", *skipped}  # imported entries gone, unimportable ones kept


def test_an_unnamed_clients_file_is_not_called_another_client(cli: CliRunner, home: Path) -> None:
    path = put(home, "tools/agent.json", '{"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}}')
    result = run_cli(cli, "import", "json", "--path", str(path), "--no-probe")
    text = result.stdout + result.stderr  # type: ignore[attr-defined]
    assert str(path) in text and "cursor" not in text and "claude" not in text.lower()
    out = json.loads(run_cli(cli, "import", "json", "--path", str(path), "--no-probe", "--json").stdout)  # type: ignore[attr-defined]
    assert out["servers"][0]["scope"] == "file"
    installed = run_cli(cli, "install", "json", "--path", str(path))
    assert "restart the program that reads it" in installed.stderr  # type: ignore[attr-defined]
    missing = run_cli(cli, "import", "json", code=2)
    assert "pass --path FILE" in missing.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: p.write_bytes(b'{"mcpServers": {}, "pad": "' + b"x" * (9 * 1024 * 1024) + b'"}'), "too big"),
        (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nested too deeply"),
    ],
)
def test_hostile_files_are_refused_and_the_vault_untouched(
    cli: CliRunner, home: Path, coffer_home: Path, make: object, why: str
) -> None:
    path = home / "hostile.json"
    make(path)  # type: ignore[operator]
    result = run_cli(cli, "import", "json", "--path", str(path), "--no-probe", code=5)
    lines = [line for line in result.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]
    assert len(lines) == 1 and why in lines[0]
    assert not (coffer_home / "coffer.toml").exists()


def test_a_device_is_not_a_client_file(cli: CliRunner, coffer_home: Path) -> None:
    result = run_cli(cli, "import", "json", "--path", "/dev/zero", "--no-probe", code=5)
    assert "not a regular file" in result.stderr  # type: ignore[attr-defined]
    assert not (coffer_home / "coffer.toml").exists()


def test_a_thousand_servers_import_in_one_write(cli: CliRunner, home: Path, coffer_home: Path) -> None:
    servers = {f"s{i}": {"command": "npx", "args": ["-y", f"@example/mcp-{i}"]} for i in range(1000)}
    path = put(home, "big.json", json.dumps({"mcpServers": servers}))
    out = json.loads(run_cli(cli, "import", "json", "--path", str(path), "--no-probe", "--json").stdout)  # type: ignore[attr-defined]
    assert sum(i["action"] == "added" for i in out["servers"]) == 1000
    from coffer.trust.pinning import Pins
    from coffer.vault import registry

    reg = registry.load()
    assert len(reg.servers) == 1000
    with Pins.open() as pins:
        assert all(pins.server_state(cfg) == "approved" for cfg in reg.servers.values())
    backups = list(coffer_home.glob("coffer.toml*"))
    assert sorted(b.name for b in backups) == ["coffer.toml", "coffer.toml.lock"]  # no temp copies left


def test_install_refuses_a_dangling_symlink(cli: CliRunner, home: Path) -> None:
    link = home / ".cursor" / "mcp.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(home / "nowhere" / "mcp.json")
    result = run_cli(cli, "install", "cursor", code=5)
    assert "does not exist" in result.stderr  # type: ignore[attr-defined]
    assert not (home / "nowhere").exists()
