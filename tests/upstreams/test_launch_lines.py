"""Launch lines as users write them, started confined under bubblewrap and under Landlock alone: a script
run through a symlink that lives outside what the server sees (`python ~/bin/server.py`, linked into a
project), a path with `..` through a folder that is not granted, `sh -c "cd /proj && python server.py"`,
and the official quickstarts' shapes (`uv --directory /proj run x.py`'s `--directory`, `node
/proj/build/index.js`'s script by path). Each starts and lists its tools; nothing beside its project is
granted."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.upstreams import sandbox
from coffer.upstreams.policy import policy_for
from coffer.vault import registry
from tests.conftest import run_cli

REQUIRED = os.environ.get("COFFER_REQUIRE_SANDBOX") == "1"
pytestmark = pytest.mark.skipif(
    not sandbox.support().available and not REQUIRED, reason=f"no confinement here: {sandbox.support().problem}"
)
DEMO = Path(__file__).resolve().parents[2] / "coffer" / "examples" / "demo_server.py"


def test_launch_lines_as_users_write_them_start_confined(
    cli: CliRunner, coffer_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    linked, dotted, shelled = tmp_path / "linked", tmp_path / "a" / "server", tmp_path / "shelled"
    for project in (linked, dotted, shelled):
        project.mkdir(parents=True)
        shutil.copy(DEMO, project / "server.py")
    (tmp_path / "a" / "tools").mkdir()
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "server.py").symlink_to(linked / "server.py")
    python = sys.executable
    lines = {
        "linked": [python, str(home / "bin" / "server.py")],
        "dotted": [python, str(tmp_path / "a" / "tools" / ".." / "server" / "server.py")],
        "shelled": ["sh", "-c", f"cd {shlex.quote(str(shelled))} && exec {shlex.quote(python)} server.py"],
    }
    for name, argv in lines.items():
        run_cli(cli, "add", name, "--no-probe", "--", *argv)
    report = json.loads(run_cli(cli, "doctor", "--json", code=None).stdout)  # type: ignore[attr-defined]
    rows = {row["name"]: row for row in report["servers"]}
    for name in lines:
        assert rows[name]["status"] == "ok" and rows[name]["sandbox"] == "confined", (mechanism, rows[name])
    shelled_policy = policy_for(registry.load().get("shelled"))
    assert str(shelled) in shelled_policy.named, "the folder its script cds into is named, so read-write"
    assert not any(str(tmp_path / "a" / "tools") == p for p in (*policy_for(registry.load().get("dotted")).code,))


def test_the_quickstarts_shapes_name_their_project() -> None:
    """`uv --directory /proj run server.py` and `node /proj/build/index.js` (the official quickstarts) name
    their project, and a shell line names its programs' runtimes and its paths."""
    proj = Path(__file__).resolve().parents[2]
    uv = policy_for(registry.ServerConfig(name="w", command="uv", args=["--directory", str(proj), "run", "x.py"]))
    assert str(proj) in uv.named
    node = policy_for(registry.ServerConfig(name="n", command="node", args=[str(DEMO)]))
    assert node.code == (str(proj),), "its project: the folder with pyproject.toml"
    shell = registry.ServerConfig(name="s", command="bash", args=["-lc", f"cd {proj} && {sys.executable} {DEMO}"])
    policy = policy_for(shell)
    assert str(proj) in policy.code and str(proj) in policy.named
    assert any(sys.executable.startswith(p) or os.path.realpath(sys.executable).startswith(p) for p in policy.code)
