"""The registry through the real CLI, against a temporary COFFER_HOME."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.memory import knowledge as memory
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, registry
from tests.conftest import run_cli, subprocess_env

RESOURCES = Path(__file__).parents[1] / "fixtures" / "resource_server.py"


def toml(home: Path) -> str:
    return (home / "coffer.toml").read_text()


def test_add_list_show_roundtrip(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(
        cli,
        "add",
        "time",
        "--no-probe",
        "--env",
        "TZ=${TZ}",
        "--env",
        "TOKEN=s3cr3t-value",
        "--",
        "uvx",
        "mcp-server-time",
        "-v",
    )
    text = toml(coffer_home)
    assert 'command = "uvx"' in text
    assert 'args = ["mcp-server-time", "-v"]' in text
    assert "${TZ}" in text  # references are stored as written, never expanded

    listed = json.loads(run_cli(cli, "list", "--json").stdout)
    (server,) = listed["servers"]
    assert server["name"] == "time"
    assert server["env"] == {"TZ": "${TZ}", "TOKEN": "****"}
    assert server["tools"] is None

    human = run_cli(cli, "list").stdout
    assert "time" in human and "s3cr3t-value" not in human

    shown = json.loads(run_cli(cli, "show", "time", "--json").stdout)["server"]
    assert shown["command"] == "uvx" and shown["args"] == ["mcp-server-time", "-v"]
    assert "s3cr3t-value" not in json.dumps(shown)


def test_registry_file_is_private(cli: CliRunner, coffer_home: Path) -> None:
    old = os.umask(0)
    try:
        run_cli(cli, "add", "a", "--no-probe", "--env", "K=v", "--", "echo")
    finally:
        os.umask(old)
    mode = stat.S_IMODE((coffer_home / "coffer.toml").stat().st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(coffer_home.stat().st_mode) == 0o700


def test_url_server(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "remote", "--no-probe", "--url", "http://127.0.0.1:9/mcp", "-H", "Authorization=Bearer ${TOK}")
    shown = json.loads(run_cli(cli, "show", "remote", "--json").stdout)["server"]
    assert shown["transport"] == "http"
    assert shown["headers"] == {"Authorization": "****"}  # not a pure reference: masked
    assert 'url = "http://127.0.0.1:9/mcp"' in toml(coffer_home)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["add", "Bad_Name", "--no-probe", "--", "echo"], 2, "invalid server name"),
        (["add", "x" * 21, "--", "echo"], 2, "invalid server name"),
        (["add", "coffer", "--no-probe", "--", "echo"], 2, "reserved"),
        (["add", "ok", "--registry", "http://127.0.0.1:9"], 8, "`coffer add ok -- CMD ARGS...` or `--url URL`"),
        (["add", "ok", "--url", "ftp://x"], 2, "invalid url"),
        (["add", "ok", "--no-probe", "--url", "http://x", "--", "echo"], 2, "not both"),
        (["add", "ok", "--no-probe", "--env", "NOEQUALS", "--", "echo"], 2, "expected KEY=VALUE"),
        (["add", "ok", "--no-probe", "--env", "1BAD=x", "--", "echo"], 2, "invalid environment variable name"),
        (["add", "ok", "--no-probe", "--timeout", "0", "--", "echo"], 2, "--timeout"),
        (["remove", "ghost"], 3, "unknown server 'ghost'"),
        (["show", "ghost"], 3, "unknown server 'ghost'"),
        (["enable", "ghost"], 3, "unknown server 'ghost'"),
        (["disable", "ghost__tool"], 3, "unknown server 'ghost'"),
        (["disable", "ghost__"], 2, "invalid target"),
        (["completions", "powershell"], 2, "unsupported shell"),
    ],
)
def test_bad_input_is_one_line_error(
    cli: CliRunner, coffer_home: Path, args: list[str], code: int, message: str
) -> None:
    result = run_cli(cli, *args, code=code)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("coffer: error: ") and message in lines[0], result.stderr
    assert not (coffer_home / "coffer.toml").exists()


def test_duplicate_name_refused_and_file_untouched(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "a", "--no-probe", "--", "echo", "one")
    before = toml(coffer_home)
    result = run_cli(cli, "add", "a", "--no-probe", "--", "echo", "two", code=4)
    assert "already exists" in result.stderr
    assert toml(coffer_home) == before


def test_comments_and_order_survive_edits(cli: CliRunner, coffer_home: Path) -> None:
    coffer_home.mkdir(parents=True)
    original = (
        "# my vault, hand written\n"
        "[settings]\n"
        "log_retention_days = 30  # keep a month\n\n"
        "# the time server\n"
        "[servers.zeta]\n"
        'command = "echo"  # inline comment\n'
        'args = ["z"]\n\n'
        "[servers.alpha]\n"
        'command = "echo"\n'
    )
    (coffer_home / "coffer.toml").write_text(original)
    run_cli(cli, "add", "beta", "--no-probe", "--", "echo", "b")
    run_cli(cli, "disable", "zeta")
    run_cli(cli, "remove", "alpha")
    text = toml(coffer_home)
    for kept in ("# my vault, hand written", "# keep a month", "# the time server", "# inline comment"):
        assert kept in text
    assert text.index("[servers.zeta]") < text.index("[servers.beta]")
    assert "[servers.alpha]" not in text
    reg = registry.load(coffer_home / "coffer.toml")
    assert list(reg.servers) == ["zeta", "beta"] and reg.servers["zeta"].enabled is False
    assert reg.settings["log_retention_days"] == 30


def test_corrupted_toml_is_reported_and_never_overwritten(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "a", "--no-probe", "--", "echo")
    path = coffer_home / "coffer.toml"
    broken = toml(coffer_home) + "\n[servers.b\ncommand = 1\n"
    path.write_text(broken)
    bad_line = broken.splitlines().index("[servers.b") + 1
    for args in (["list"], ["add", "c", "--no-probe", "--", "echo"], ["disable", "a"], ["remove", "a"], ["show", "a"]):
        result = run_cli(cli, *args, code=5)
        line = result.stderr.strip()
        assert line.count("\n") == 0 and f"{path}:{bad_line}:" in line and "invalid TOML" in line, line
    assert path.read_text() == broken


def test_invalid_server_table_names_file_and_line(cli: CliRunner, coffer_home: Path) -> None:
    coffer_home.mkdir(parents=True)
    path = coffer_home / "coffer.toml"
    path.write_text('[servers.good]\ncommand = "echo"\n\n[servers.bad]\nargs = "not a list"\ncommand = "x"\n')
    result = run_cli(cli, "list", code=5)
    assert f"{path}:4: servers.bad.args" in result.stderr


def test_enable_disable_tools_against_catalogue(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "gh", "--no-probe", "--", "echo")
    result = run_cli(cli, "disable", "gh__delete_repository", code=3)
    assert "'gh' never listed its tools" in result.stderr and "`coffer refresh gh` lists it" in result.stderr
    catalogue.save_server(
        "gh",
        tools=[
            {"name": "delete_repository", "description": "Delete a repo", "inputSchema": {"type": "object"}},
            {"name": "create_issue", "description": "Open an issue", "inputSchema": {"type": "object"}},
        ],
    )
    run_cli(cli, "disable", "gh__delete_repository")
    assert "already disabled" in run_cli(cli, "disable", "gh__delete_repository").stderr
    assert "unknown tool 'nope'" in run_cli(cli, "disable", "gh__nope", code=3).stderr
    reg = registry.load()
    assert reg.servers["gh"].disabled_tools == ["delete_repository"]
    with Pins.open(new_tools="allow") as pins:
        visible = [t.name for t in curation.visible_tools(reg, catalogue.load_snapshot(), pins)]
    assert visible == ["gh__create_issue"]
    shown = json.loads(run_cli(cli, "show", "gh", "--json").stdout)["server"]
    assert {t["tool"]: t["enabled"] for t in shown["tools"]} == {"create_issue": True, "delete_repository": False}
    assert json.loads(run_cli(cli, "list", "--json").stdout)["servers"][0]["tools"] == {"enabled": 1, "total": 2}
    run_cli(cli, "enable", "gh__delete_repository")
    assert "disabled_tools" not in toml(coffer_home)
    run_cli(cli, "disable", "gh__unlisted", "--force")
    assert registry.load().servers["gh"].disabled_tools == ["unlisted"]


def test_remove_forgets_everything_about_the_server(cli: CliRunner, coffer_home: Path) -> None:
    """Catalogue entry, indexed resources, tool pins and the launch approval all go with the server."""
    launch = ["--", sys.executable, str(RESOURCES)]
    run_cli(cli, "add", "res", *launch)  # probed: snapshot, pinned baseline, resources indexed
    assert "res" in catalogue.load_snapshot().servers  # type: ignore[union-attr]
    assert memory.search("roll back a bad deploy", 5)["passages"][0]["source"]["server"] == "res"
    cfg = registry.load().get("res")
    with Pins.open(new_tools="allow") as pins:
        assert pins.server_state(cfg) == "approved"
        assert pins.db.execute("SELECT COUNT(*) FROM trust_tools WHERE server = 'res'").fetchone()[0] == 1

    assert "removed 'res'" in run_cli(cli, "remove", "res").stderr
    assert "res" not in catalogue.load_snapshot().servers  # type: ignore[union-attr]
    assert memory.search("roll back a bad deploy", 5)["total_searched"] == 0
    with Pins.open(new_tools="allow") as pins:
        assert pins.server_state(cfg) == "new" and pins.held("res") == []
        assert pins.db.execute("SELECT COUNT(*) FROM trust_tools WHERE server = 'res'").fetchone()[0] == 0
        assert pins.events("res", limit=1)[0]["event"] == "removed"

    # the same launch line written back by hand (or by an agent) finds no approval to reuse
    with (coffer_home / "coffer.toml").open("a") as fh:
        fh.write(f'\n[servers.res]\ncommand = "{sys.executable}"\nargs = ["{RESOURCES}"]\n')
    assert json.loads(run_cli(cli, "diff", "res", "--json").stdout)["config"]["state"] == "new"
    out = json.loads(run_cli(cli, "refresh", "res", "--json", code=1).stdout)["servers"]
    assert out[0]["status"] == "unapproved"
    run_cli(cli, "remove", "res")
    run_cli(cli, "add", "res", *launch)  # `coffer add` again starts fresh: a new baseline
    events = [e["event"] for e in json.loads(run_cli(cli, "diff", "res", "--json").stdout)["events"]]
    assert events[:2] == ["baseline", "config_added"]


def test_concurrent_add_processes_both_land(coffer_home: Path) -> None:
    env = subprocess_env(coffer_home)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "coffer", "add", f"srv{i}", "--no-probe", "--", "echo", str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(6)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    reg = registry.load(coffer_home / "coffer.toml")
    assert sorted(reg.servers) == [f"srv{i}" for i in range(6)]
    assert not list(coffer_home.glob(".coffer.toml.*.tmp"))


def test_paths_follow_coffer_home(cli: CliRunner, coffer_home: Path) -> None:
    data = json.loads(run_cli(cli, "paths", "--json").stdout)["paths"]
    assert data["registry"] == str(coffer_home / "coffer.toml")
    assert data["database"] == str(coffer_home / "coffer.db")


def test_every_command_has_help(cli: CliRunner) -> None:
    import typer.main

    from coffer.cli import app

    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        assert command.help and command.help.strip(), f"`coffer {name}` has no help text"
        run_cli(cli, name, "--help")


def test_shipped_completion_scripts_are_current(cli: CliRunner) -> None:
    root = Path(__file__).parents[2] / "completions"
    for shell, filename in (("bash", "coffer.bash"), ("zsh", "_coffer"), ("fish", "coffer.fish")):
        generated = run_cli(cli, "completions", shell).stdout.strip()
        assert generated == (root / filename).read_text().strip(), f"regenerate completions/{filename}"
        assert "_COFFER_COMPLETE" in generated


def test_install_completion_works(tmp_path: Path, coffer_home: Path) -> None:
    env = subprocess_env(coffer_home) | {"HOME": str(tmp_path), "SHELL": "/bin/bash"}
    exe = Path(sys.executable).parent / "coffer"
    proc = subprocess.run([str(exe), "--install-completion", "bash"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / ".bash_completions" / "coffer.sh"
    assert "_COFFER_COMPLETE" in script.read_text()
    assert str(script) in (tmp_path / ".bashrc").read_text()


def test_unknown_keys_are_warned_with_a_guess(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "a", "--no-probe", "--", "echo")
    path = coffer_home / "coffer.toml"
    path.write_text(path.read_text() + "enbled = false\n")
    result = run_cli(cli, "list")
    assert "unknown key 'enbled' is ignored (did you mean 'enabled'?)" in result.stderr  # type: ignore[attr-defined]


def test_edit_changes_the_launch_and_keeps_the_rest(cli: CliRunner, coffer_home: Path) -> None:
    from tests.fixtures.gateway_harness import FIXTURE

    launch = [sys.executable, str(FIXTURE), "--name", "alpha", "--mode"]
    run_cli(cli, "add", "alpha", "--prefix", "a", "--env", "KEEP=1", "--", *launch, "normal")
    run_cli(cli, "disable", "alpha__crash")
    (coffer_home / "coffer.toml").write_text(toml(coffer_home).replace("[servers.alpha]", "# mine\n[servers.alpha]"))

    out = run_cli(cli, "edit", "alpha", "--env", "MORE=2", "--json", "--", *launch, "normal,describe=Echo two")
    shown = json.loads(out.stdout)  # type: ignore[attr-defined]
    assert shown["approved"] == ["launch config", "alpha__echo"]  # one edit, no second approve
    cfg = registry.load().get("alpha")
    assert cfg.args[-1] == "normal,describe=Echo two" and cfg.env == {"KEEP": "1", "MORE": "2"}
    assert cfg.prefix == "a" and cfg.disabled_tools == ["crash"] and "# mine" in toml(coffer_home)
    with Pins.open() as pins:
        assert pins.server_state(cfg) == "approved" and not pins.held("alpha")
    snap = catalogue.load_snapshot()
    assert snap is not None and "Echo two" in [t["description"] for t in snap.servers["alpha"].tools]

    run_cli(cli, "edit", "alpha", "--unset-env", "MORE", "--timeout", "9", "--no-probe")
    cfg = registry.load().get("alpha")
    assert cfg.env == {"KEEP": "1"} and cfg.timeout == 9

    before = toml(coffer_home)
    assert "nothing to change" in run_cli(cli, "edit", "alpha", code=2).stderr  # type: ignore[attr-defined]
    assert "unknown server 'nope'" in run_cli(cli, "edit", "nope", "--env", "A=1", code=3).stderr  # type: ignore[attr-defined]
    assert "no env NOPE" in run_cli(cli, "edit", "alpha", "--unset-env", "NOPE", code=3).stderr  # type: ignore[attr-defined]
    run_cli(cli, "edit", "alpha", "--env", "bad", code=2)
    run_cli(cli, "edit", "alpha", "--url", "http://127.0.0.1:1/mcp", "--", "x", code=2)
    assert toml(coffer_home) == before  # nothing written by a refused edit
