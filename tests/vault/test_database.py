"""coffer.db holds what the user keeps (the call log, the memory, the tools' pins): a damaged one is
named in one line and left exactly as it is, never replaced."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.vault import paths
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import add_fixture


@pytest.mark.parametrize("command", [["log"], ["list"], ["call", "fx__echo", '{"text": "hi"}']])
def test_a_damaged_coffer_db_is_one_line_and_left_as_it_is(
    coffer_home: Path, cli: CliRunner, command: list[str]
) -> None:
    """Before: a traceback ending in `sqlite3.DatabaseError: file is not a database`."""
    add_fixture(coffer_home, "fx")
    damaged = b"not a database " * 100
    paths.db_path().write_bytes(damaged)
    failed = run_cli(cli, *command, code=1)
    said = failed.stderr.strip()  # type: ignore[attr-defined]
    assert said.startswith("coffer: error:") and "\n" not in said and "Traceback" not in said
    assert "coffer.db cannot be read (file is not a database)" in said and "move it aside" in said
    assert paths.db_path().read_bytes() == damaged
