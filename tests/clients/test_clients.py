"""`coffer import` and `coffer install` through the real CLI, on real-shaped client files in a temporary HOME."""

from __future__ import annotations

import difflib
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit
from typer.testing import CliRunner

from coffer.clients import installer, jsonc
from coffer.errors import ConflictError
from tests.clients.conftest import put
from tests.conftest import run_cli, subprocess_env

CLAUDE_DESKTOP = """{
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
        },
        "brave_search": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-brave-search"],
            "env": {"BRAVE_API_KEY": "BSA-literal-token-123"}
        }
    },
    "globalShortcut": "Ctrl+Space"
}
"""

CLAUDE_CODE = """{
  "numStartups": 42,
  "projects": {
    "/home/me/app": {"allowedTools": [], "mcpServers": {}, "hasTrustDialogAccepted": true}
  },
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
    },
    "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp", "headers": {"Authorization": "Bearer ${SENTRY}"}},
    "legacy": {"type": "sse", "url": "https://example.com/sse"},
    "gateway": {"type": "stdio", "command": "/opt/bin/coffer", "args": ["serve"]}
  },
  "tipsHistory": {"new-user-warmup": 1}
}
"""

CURSOR = """{
  "mcpServers": {
    "Linear": {"url": "https://mcp.linear.app/mcp"},
    "postgres": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-postgres", "postgresql://localhost/db"]}
  }
}
"""

VSCODE = """// VS Code MCP servers (JSONC: comments and trailing commas are allowed)
{
\t"inputs": [
\t\t{"type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true},
\t],
\t"servers": {
\t\t/* the one I use most */
\t\t"Perplexity": {
\t\t\t"type": "stdio",
\t\t\t"command": "npx",
\t\t\t"args": ["-y", "server-perplexity-ask"],
\t\t\t"env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"},
\t\t},
\t\t"fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"], "env": {"TOKEN": "${env:FETCH_TOKEN}"}},
\t\t"docs": {"type": "http", "url": "https://docs.example.com/mcp", "headers": {"X-Key": "${env:DOCS_KEY}"}},
\t},
}
"""

CODEX = """# Codex configuration
model = "o3"  # keep this model

[mcp_servers.docs]
# the docs server
command = "docs-server"
args = ["--port", "4000"]
env = { "API_KEY" = "literal-codex-key" }

[mcp_servers.search_web]
command = "npx"
args = ["-y", "search-mcp"]
env_vars = ["SEARCH_TOKEN"]
disabled_tools = ["dangerous"]

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "FIGMA_OAUTH_TOKEN"

[profiles.fast]
model = "gpt-5-mini"  # trailing comment
"""

# client -> (file relative to HOME, content, {vault name: (launch, env or headers as `list --json` shows)})
CASES = {
    "claude-desktop": (
        ".config/Claude/claude_desktop_config.json",
        CLAUDE_DESKTOP,
        {
            "filesystem": ("npx", {}),
            "brave-search": ("npx", {"BRAVE_API_KEY": "****"}),
        },
    ),
    "claude-code": (
        ".claude.json",
        CLAUDE_CODE,
        {
            "github": ("npx", {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}),
            "sentry": ("https://mcp.sentry.dev/mcp", {"Authorization": "****"}),
        },
    ),
    "cursor": (
        ".cursor/mcp.json",
        CURSOR,
        {"linear": ("https://mcp.linear.app/mcp", {}), "postgres": ("npx", {})},
    ),
    "vscode": (
        ".config/Code/User/mcp.json",
        VSCODE,
        {
            "perplexity": ("npx", {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}),
            "fetch": ("uvx", {"TOKEN": "${FETCH_TOKEN}"}),
            "docs": ("https://docs.example.com/mcp", {"X-Key": "${DOCS_KEY}"}),
        },
    ),
    "codex": (
        ".codex/config.toml",
        CODEX,
        {
            "docs": ("docs-server", {"API_KEY": "****"}),
            "search-web": ("npx", {"SEARCH_TOKEN": "${SEARCH_TOKEN}"}),
            "figma": ("https://mcp.figma.com/mcp", {"Authorization": "****"}),
        },
    ),
}


def fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def err(result: object) -> str:
    """stderr without rich's soft wrapping, so long paths can be matched."""
    return str(result.stderr).replace("\n", "")  # type: ignore[attr-defined]


def listed(cli: CliRunner) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads(run_cli(cli, "list", "--json").stdout)["servers"]}


def single_insertion(old: str, new: str) -> bool:
    """True when `new` is `old` with one contiguous span inserted: every other byte kept in place."""

    def common(a: str, b: str) -> int:
        return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))

    prefix = common(old, new)
    suffix = common(old[prefix:][::-1], new[prefix:][::-1])
    return prefix + suffix == len(old)


def only_insertions(old: str, new: str) -> bool:
    ops = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False).get_opcodes()
    return all(tag in ("equal", "insert") for tag, *_ in ops)


# ---------------------------------------------------------------- import


@pytest.mark.parametrize("client", list(CASES))
def test_import_each_client(cli: CliRunner, home: Path, client: str) -> None:
    rel, text, expected = CASES[client]
    source = put(home, rel, text)
    before = fingerprint(source)
    out = json.loads(run_cli(cli, "import", client, "--no-probe", "--json").stdout)
    assert out["path"] == str(source) and out["dry_run"] is False
    added = {s["name"] for s in out["servers"] if s["action"] == "added"}
    assert added == set(expected)
    assert fingerprint(source) == before  # import never writes the client's file

    servers = listed(cli)
    assert set(servers) == set(expected)
    for name, (launch, values) in expected.items():
        server = servers[name]
        if server["transport"] == "http":
            assert server["url"] == launch and server["headers"] == values
        else:
            assert server["command"] == launch and server["env"] == values
    vault_text = (home.parent / "vault" / "coffer.toml").read_text()
    dumped = json.dumps(servers)
    for secret in ("BSA-literal-token-123", "literal-codex-key"):
        assert secret not in dumped  # masked on output ...
        if secret in text:
            assert secret in vault_text  # ... but stored as written, in the 0600 registry
    assert stat.S_IMODE((home.parent / "vault" / "coffer.toml").stat().st_mode) == 0o600


def test_import_notes_renames_and_skips(cli: CliRunner, home: Path) -> None:
    put(home, ".claude.json", CLAUDE_CODE)
    out = json.loads(run_cli(cli, "import", "claude-code", "--no-probe", "--json").stdout)
    by_source = {s["source_name"]: s for s in out["servers"]}
    assert by_source["legacy"]["action"] == "skip" and "SSE" in by_source["legacy"]["reason"]
    assert by_source["gateway"]["action"] == "skip" and "coffer serve" in by_source["gateway"]["reason"]

    put(home, ".claude-desktop.json", CLAUDE_DESKTOP)
    out = json.loads(
        run_cli(
            cli, "import", "claude-desktop", "--no-probe", "--path", str(home / ".claude-desktop.json"), "--json"
        ).stdout
    )
    brave = next(s for s in out["servers"] if s["source_name"] == "brave_search")
    assert brave["name"] == "brave-search" and "renamed from 'brave_search'" in brave["notes"]


def test_import_vscode_inputs_disabled_and_env_translated(cli: CliRunner, home: Path) -> None:
    put(home, ".config/Code/User/mcp.json", VSCODE)
    out = json.loads(run_cli(cli, "import", "vscode", "--no-probe", "--json").stdout)
    by_name = {s["name"]: s for s in out["servers"]}
    assert by_name["perplexity"]["server"]["enabled"] is False
    assert any("${input:perplexity-key}" in n for n in by_name["perplexity"]["notes"])
    assert by_name["fetch"]["server"]["enabled"] is True
    assert any("${env:VAR}" in n for n in by_name["fetch"]["notes"])
    assert listed(cli)["perplexity"]["enabled"] is False


def test_import_codex_maps_env_vars_and_disabled_tools(cli: CliRunner, home: Path, coffer_home: Path) -> None:
    put(home, ".codex/config.toml", CODEX)
    run_cli(cli, "import", "codex", "--no-probe")
    registry = tomlkit.parse((coffer_home / "coffer.toml").read_text()).unwrap()["servers"]
    assert registry["search-web"]["env"] == {"SEARCH_TOKEN": "${SEARCH_TOKEN}"}
    assert registry["search-web"]["disabled_tools"] == ["dangerous"]
    assert registry["figma"]["headers"] == {"Authorization": "Bearer ${FIGMA_OAUTH_TOKEN}"}
    assert registry["docs"]["args"] == ["--port", "4000"]


def test_import_normalises_names_deterministically(cli: CliRunner, home: Path) -> None:
    text = json.dumps(
        {
            "mcpServers": {
                "My Server": {"command": "a"},
                "my_server": {"command": "b"},
                "A.Very.Long.Server.Name.Indeed": {"command": "c"},
                "@@@": {"command": "d"},
            }
        }
    )
    source = put(home, ".cursor/mcp.json", text)
    first = json.loads(run_cli(cli, "import", "cursor", "--no-probe", "--dry-run", "--json").stdout)["servers"]
    again = json.loads(
        run_cli(cli, "import", "cursor", "--no-probe", "--path", str(source), "--dry-run", "--json").stdout
    )["servers"]
    names = [s["name"] for s in first]
    assert names == [s["name"] for s in again]
    assert names[0] == "my-server"
    assert names[1] != "my-server" and names[1].startswith("my-server-")  # clash within the file: hashed form
    assert len(names[2]) <= 20 and names[2].startswith("a-very-long")
    assert names[3].startswith("server-")
    run_cli(cli, "import", "cursor", "--no-probe")
    assert set(listed(cli)) == set(names)


def test_duplicates_skipped_with_a_note(cli: CliRunner, home: Path) -> None:
    put(home, ".cursor/mcp.json", CURSOR)
    run_cli(cli, "add", "postgres", "--no-probe", "--", "my-own-postgres")
    result = run_cli(cli, "import", "cursor", "--no-probe")
    assert "already in the vault" in result.stdout
    assert "imported 1 server, skipped 1" in result.stderr
    assert listed(cli)["postgres"]["command"] == "my-own-postgres"  # the vault's own entry is kept
    again = json.loads(run_cli(cli, "import", "cursor", "--no-probe", "--json").stdout)["servers"]
    assert all(s["action"] == "skip" and "already in the vault" in s["reason"] for s in again)


def test_import_dry_run_writes_nothing(cli: CliRunner, home: Path, coffer_home: Path) -> None:
    put(home, ".cursor/mcp.json", CURSOR)
    result = run_cli(cli, "import", "cursor", "--no-probe", "--dry-run")
    assert "would add" in result.stdout and "nothing written" in result.stderr
    assert not (coffer_home / "coffer.toml").exists()
    run_cli(cli, "add", "keep", "--no-probe", "--", "echo")
    before = fingerprint(coffer_home / "coffer.toml")
    run_cli(cli, "import", "cursor", "--no-probe", "--dry-run")
    assert fingerprint(coffer_home / "coffer.toml") == before


@pytest.mark.parametrize(
    ("client", "rel", "text", "code", "message"),
    [
        ("cursor", ".cursor/mcp.json", '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  ', 5, "invalid JSON"),
        (
            "cursor",
            ".cursor/mcp.json",
            '{\n  "mcpServers": {\n    "a" {"command": "x"}\n  }\n}',
            5,
            ":3:9: invalid JSON",
        ),
        ("claude-desktop", ".config/Claude/claude_desktop_config.json", "[1, 2]", 5, "top level"),
        ("claude-code", ".claude.json", '{"mcpServers": [1]}', 5, "'mcpServers' must be an object"),
        ("codex", ".codex/config.toml", 'model = "o3"\n[mcp_servers.x\ncommand = "y"\n', 5, ":2:"),
        ("vscode", ".config/Code/User/mcp.json", "", 5, "empty"),
        ("vscode", ".config/Code/User/mcp.json", None, 3, "no such file"),
        ("notepad", ".notepad", "{}", 2, "unknown client 'notepad'"),
    ],
)
def test_import_bad_files_one_line_error(
    cli: CliRunner, home: Path, client: str, rel: str, text: str | None, code: int, message: str
) -> None:
    if text is not None:
        put(home, rel, text)
    result = run_cli(cli, "import", client, "--no-probe", code=code)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("coffer: error: ") and message in lines[0], result.stderr
    if code == 5:
        assert str(home / rel) in lines[0]


def test_install_bad_file_never_written(cli: CliRunner, home: Path) -> None:
    path = put(home, ".codex/config.toml", "[mcp_servers\n")
    before = fingerprint(path)
    result = run_cli(cli, "install", "codex", code=5)
    assert "invalid TOML" in result.stderr and f"{path}:1:" in result.stderr
    assert fingerprint(path) == before
    assert list(path.parent.iterdir()) == [path]  # no backup, no temp file


# ---------------------------------------------------------------- install


def installed_entry(client: str, text: str, name: str = "coffer") -> dict:
    if client == "codex":
        return tomlkit.parse(text).unwrap()["mcp_servers"][name]
    key = "servers" if client == "vscode" else "mcpServers"
    return jsonc.parse(text).value[key][name]


@pytest.mark.parametrize("client", list(CASES))
def test_install_round_trip_keeps_the_file(cli: CliRunner, home: Path, coffer_home: Path, client: str) -> None:
    rel, text, _ = CASES[client]
    path = put(home, rel, text, mode=0o640)
    result = run_cli(cli, "install", client)
    assert f"installed 'coffer' in {path}" in err(result)
    new = path.read_text()
    if client == "codex":
        assert only_insertions(text, new)  # tomlkit: every original line, comments included, in order
        assert "# the docs server" in new and "# trailing comment" in new
    else:
        assert single_insertion(text, new)  # JSON: one span inserted, every other byte in place
    entry = installed_entry(client, new)
    assert entry["args"][-1] == "serve" and Path(entry["command"]).is_absolute()
    assert entry["env"] == {"COFFER_HOME": str(coffer_home)}
    if client in ("claude-code", "vscode"):
        assert entry["type"] == "stdio"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the client's own mode, not Coffer's 0600

    backups = sorted(path.parent.glob(path.name + ".coffer-backup-*"))
    assert len(backups) == 1 and backups[0].read_text() == text
    assert stat.S_IMODE(backups[0].stat().st_mode) == 0o640

    before = fingerprint(path)
    again = run_cli(cli, "install", client)
    assert "already installed" in again.stderr
    assert fingerprint(path) == before
    assert len(list(path.parent.glob(path.name + ".coffer-backup-*"))) == 1


def test_install_keeps_indentation_style(cli: CliRunner, home: Path) -> None:
    rel, text, _ = CASES["claude-desktop"]
    path = put(home, rel, text)
    run_cli(cli, "install", "claude-desktop")
    assert '\n        "coffer": {\n            "command": ' in path.read_text()  # the file's 4-space step
    rel, text, _ = CASES["vscode"]
    path = put(home, rel, text)
    run_cli(cli, "install", "vscode")
    assert '\n\t\t"coffer": {\n\t\t\t"type": "stdio",' in path.read_text()  # tabs stay tabs
    assert '"id": "perplexity-key"' in path.read_text()  # `inputs` untouched


def test_install_creates_a_missing_file(cli: CliRunner, home: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()  # Cursor is installed: its folder is there, its MCP file not yet
    run_cli(cli, "install", "cursor")
    data = json.loads(path.read_text())
    assert list(data) == ["mcpServers"] and list(data["mcpServers"]) == ["coffer"]
    assert not list(path.parent.glob("*.coffer-backup-*"))  # nothing to back up


@pytest.mark.parametrize("client", ["zed", "goose", "continue", "claude-code"])
def test_install_into_an_app_that_is_not_there_asks_for_force(
    cli: CliRunner, home: Path, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(home))  # nor its program on PATH (coffer.clients.known.Client.binaries)
    before = sorted(str(p) for p in home.rglob("*"))
    failed = run_cli(cli, "install", client, code=3)
    assert "does not look installed here" in failed.stderr and "--force" in failed.stderr  # type: ignore[attr-defined]
    assert sorted(str(p) for p in home.rglob("*")) == before  # nothing created
    run_cli(cli, "install", client, "--force")
    assert len(list(home.rglob("*"))) > len(before)


def test_install_dry_run_writes_nothing(cli: CliRunner, home: Path) -> None:
    rel, text, _ = CASES["claude-code"]
    path = put(home, rel, text)
    before = fingerprint(path)
    result = run_cli(cli, "install", "claude-code", "--dry-run")
    assert result.stdout.startswith(f"--- {path}\n+++ {path} (with coffer)\n")
    assert '+    "coffer": {' in result.stdout and "nothing written" in result.stderr
    assert fingerprint(path) == before
    assert list(path.parent.iterdir()) == [path]
    assert not (home / ".codex").exists()
    run_cli(cli, "install", "codex", "--dry-run", "--force")
    assert not (home / ".codex").exists()  # no file, no directory created


def test_install_existing_different_entry(cli: CliRunner, home: Path) -> None:
    path = put(home, ".cursor/mcp.json", '{"mcpServers": {"coffer": {"command": "/old/coffer", "args": ["serve"]}}}')
    before = fingerprint(path)
    result = run_cli(cli, "install", "cursor", code=4)
    assert "/old/coffer serve" in result.stderr and "--force" in result.stderr
    assert fingerprint(path) == before
    run_cli(cli, "install", "cursor", "--force")
    data = json.loads(path.read_text())
    assert list(data["mcpServers"]) == ["coffer"] and data["mcpServers"]["coffer"]["command"] != "/old/coffer"
    run_cli(cli, "install", "cursor", "--name", "two")
    assert list(json.loads(path.read_text())["mcpServers"]) == ["coffer", "two"]


def test_install_hint_names_servers_already_in_vault(cli: CliRunner, home: Path) -> None:
    put(home, ".cursor/mcp.json", CURSOR)
    run_cli(cli, "import", "cursor", "--no-probe")
    result = run_cli(cli, "install", "cursor")
    assert "Linear, postgres are also in your vault" in err(result)


def test_install_through_symlink_and_crlf(cli: CliRunner, home: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    text = '{\r\n  "mcpServers": {\r\n    "a": {"command": "x"}\r\n  }\r\n}\r\n'
    real.write_bytes(text.encode())
    link = home / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(real)
    run_cli(cli, "install", "cursor")
    assert link.is_symlink()
    new = real.read_bytes().decode()
    assert single_insertion(text, new) and "\n" not in new.replace("\r\n", "")
    entry = json.loads(new)["mcpServers"]["coffer"]
    assert [entry["command"], *entry["args"]] == list(_launch())  # whether or not `coffer` is on PATH


def _launch() -> tuple[str, ...]:
    command, args = installer.serve_launch()
    return (command, *args)


def test_install_refuses_a_file_changed_meanwhile(home: Path) -> None:
    path = put(home, ".cursor/mcp.json", CURSOR)
    plan = installer.plan_install("cursor")
    path.write_text(CURSOR.replace("postgres", "pg"))
    with pytest.raises(ConflictError, match="changed while coffer was editing"):
        installer.apply_install(plan)
    assert "pg" in path.read_text() and "coffer" not in path.read_text()


def test_install_falls_back_to_python_m_coffer(
    cli: CliRunner, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(sys, "argv", ["pytest"])
    run_cli(cli, "install", "codex", "--force")
    entry = installed_entry("codex", (home / ".codex" / "config.toml").read_text())
    assert [entry["command"], *entry["args"]] == [sys.executable, "-m", "coffer", "serve"]
    env = subprocess_env(home.parent / "vault")
    done = subprocess.run([sys.executable, "-m", "coffer", "--version"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.startswith("coffer ")


@pytest.mark.parametrize("bad", ["", "has space", "x" * 21, "-lead"])
def test_install_bad_name(cli: CliRunner, home: Path, bad: str) -> None:
    result = run_cli(cli, "install", "cursor", "--name", bad, code=2)
    assert "invalid --name" in result.stderr
    assert not (home / ".cursor").exists()


def test_install_codex_tables_split_across_the_file(cli: CliRunner, home: Path) -> None:
    text = '[mcp_servers.a]\ncommand = "x"\n\n[profiles.fast]\nmodel = "m"\n\n[mcp_servers.b]\ncommand = "y"\n'
    path = put(home, ".codex/config.toml", text)
    run_cli(cli, "install", "codex")
    new = path.read_text()
    assert only_insertions(text, new)
    data = tomlkit.parse(new).unwrap()
    assert set(data["mcp_servers"]) == {"a", "b", "coffer"} and data["profiles"] == {"fast": {"model": "m"}}
