"""Every `coffer` command the README and docs/ show is one the CLI accepts as written: the command exists and its
options and arguments parse (nothing runs). A renamed option or a removed command fails here first."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.main import get_command

from coffer.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # the README and the reference it links


def readme_commands() -> list[str]:
    """`coffer ...` lines of the bash blocks of the README and docs/, comments and pipes cut off."""
    blocks = [b for page in PAGES for b in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S)]
    found = []
    for block in blocks:
        for line in block.splitlines():
            line = line.strip()
            if "coffer " not in line or line.startswith("#"):
                continue
            line = line.split(" # ")[0].split("  #")[0].strip()
            line = line.split("|")[-1].strip()  # `printf %s "$TOKEN" | coffer secret set NAME`
            if line.startswith(("pip install", "pipx ", "claude ", "codex ")):
                continue
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("coffer "):
                    found.append(part)
    return found


COMMANDS = readme_commands()


def test_the_readme_shows_commands() -> None:
    assert len(COMMANDS) > 30


@pytest.mark.parametrize("line", COMMANDS)
def test_readme_command_parses(line: str) -> None:
    argv = shlex.split(line)[1:]
    command = get_command(app)
    ctx = command.make_context("coffer", list(argv))
    while hasattr(command, "resolve_command") and (ctx._protected_args or ctx.args):
        name, command, rest = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        assert command is not None, f"unknown command in: {line}"
        ctx = command.make_context(name or "", rest, parent=ctx)
