"""The command line as a new user meets it: `-h` in groups with whole one-line help, `show` in a person's
words, and a hint for each common mistake (a server's options before `--`, a duplicate `add`, a bad
choice)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import run_cli


def test_help_lists_commands_in_groups_with_whole_lines(cli: CliRunner) -> None:
    out = run_cli(cli, "-h").stdout  # type: ignore[attr-defined]
    titles = [line.rstrip(":") for line in out.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert titles[:1] == ["Options"] and titles[1:] == [
        "Everyday",
        "Vault",
        "Agents",
        "Registry",
        "Engine",
        "Diagnostics",
    ], titles
    assert "..." not in out.split("Everyday:")[1].replace("Cursor...", "")  # no line cut short
    assert out.index("  add ") < out.index("  edit ") < out.index("  install ") < out.index("  doctor ")


def test_show_prints_values_as_a_person_reads_them(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "demo", "--no-probe", "--", sys.executable, "-m", "coffer.examples.demo_server", "--x=a b")
    out = run_cli(cli, "show", "demo").stdout  # type: ignore[attr-defined]
    rows = {
        parts[0]: parts[1].strip()
        for line in out.splitlines()
        if len(parts := line.strip().split(None, 1)) == 2 and line.startswith("  ")
    }
    assert rows["enabled"] == "yes" and rows["env"] == "-" and rows["timeout"] == "60"
    assert rows["args"] == "-m coffer.examples.demo_server '--x=a b'"
    assert "True" not in out and "[]" not in out and "{}" not in out


def test_a_servers_own_options_before_the_separator_get_a_hint(cli: CliRunner, coffer_home: Path) -> None:
    result = run_cli(cli, "add", "foo", "npx", "-y", "pkg", code=2)
    assert "coffer add foo -- npx -y pkg" in result.stderr  # type: ignore[attr-defined]
    assert not (coffer_home / "coffer.toml").exists()


def test_a_duplicate_add_points_at_edit(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "demo", "--no-probe", "--", sys.executable, "-V")
    result = run_cli(cli, "add", "demo", "--no-probe", "--", sys.executable, "-V", code=4)
    assert "change it with `coffer edit demo`" in result.stderr  # type: ignore[attr-defined]


def test_a_bad_choice_lists_the_choices_in_plain_words(cli: CliRunner) -> None:
    result = run_cli(cli, "search", "x", "--ranker", "foo", code=2)
    assert "'foo' is not one of 'hybrid', 'bm25', 'semantic'" in result.stderr  # type: ignore[attr-defined]
    assert "Value error" not in result.stderr  # type: ignore[attr-defined]


def test_show_says_what_a_tool_count_depends_on(cli: CliRunner, coffer_home: Path) -> None:
    from tests.fixtures.gateway_harness import FIXTURE

    run_cli(cli, "add", "alpha", "--", sys.executable, str(FIXTURE), "--mode", "normal", "--name", "alpha")
    out = " ".join(run_cli(cli, "show", "alpha").stdout.split())  # type: ignore[attr-defined]
    assert "tools listed for a client that declared" in out and "follows the client that listed it last" in out


def test_a_tables_title_is_one_line_and_read_as_written(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A title is the table's first line whole, never wrapped to a narrow table's width, and never read as
    rich's markup: a vault under a folder named `[team]` is shown by that name (it was dropped as a tag)."""
    home = tmp_path / "[team] vaults" / "a-folder-name-long-enough-to-outgrow-the-table"
    monkeypatch.setenv("COFFER_HOME", str(home))
    run_cli(cli, "add", "d", "--no-probe", "--", "x")
    lines = run_cli(cli, "list").stdout.splitlines()  # type: ignore[attr-defined]
    assert lines[0].strip() == f"1 server in {home / 'coffer.toml'}", lines[:2]
