"""The `coffer search` lines of the README and docs/search.md, run as written (the command line a shell
hands `coffer`, through `coffer.cli.quick`), rank the tool they are there to show: over the 16 real
servers, and over the one server that holds it (the README's first five minutes add only `time`)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from coffer.cli import quick
from coffer.manage import servers
from coffer.vault import catalogue, registry

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data" / "real-servers.json"
# What each example is there to show: the tool, and the place it must reach at least
EXPECTED = {
    "what time is it in Tokyo": ("time__get_current_time", 1),
    "open a PR for my branch": ("github__create_pull_request", 1),
    "what changed in the last commit": ("git__git_log", 3),  # git_show's "contents of a commit" say no change
    "take a screenshot": ("playwright__browser_take_screenshot", 1),
}


def examples() -> list[list[str]]:
    """The argv of every `coffer search` line in the README's and docs/search.md's bash blocks."""
    found = []
    for page in (ROOT / "README.md", ROOT / "docs" / "search.md"):
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            for line in block.splitlines():
                line = line.split(" # ")[0].split("  #")[0].strip()
                if line.startswith("coffer search "):
                    found.append(shlex.split(line)[1:])
    return found


def _vault(only: str | None) -> None:
    by_server: dict[str, list[dict[str, object]]] = {}
    for entry in json.loads(DATA.read_text()):
        by_server.setdefault(entry["server"], []).append({k: v for k, v in entry.items() if k != "server"})
    for server, tools in by_server.items():
        if only is None or server == only:
            servers.add_server(registry.ServerConfig(name=server, command="true"))
            catalogue.save_server(server, tools=tools)


def _ranked(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    args = argv if "--json" in argv else [*argv, "--json"]
    assert quick.run(args) == 0, args  # a line `coffer search` accepts as written
    return [tool["name"] for tool in json.loads(capsys.readouterr().out)["tools"]]


def test_the_pages_show_search_examples() -> None:
    shown = {argv[1] for argv in examples()}
    assert "what time is it in Tokyo" in shown
    assert shown <= set(EXPECTED), f"say what these examples are there to show: {shown - set(EXPECTED)}"


def test_every_example_ranks_what_it_shows_over_the_16_servers(
    coffer_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _vault(None)
    for argv in examples():
        tool, place = EXPECTED[argv[1]]
        ranked = _ranked(argv, capsys)
        assert tool in ranked[:place], (argv, ranked[:5])


def test_every_example_ranks_what_it_shows_over_its_server_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for n, argv in enumerate(examples()):
        tool, place = EXPECTED[argv[1]]
        monkeypatch.setenv("COFFER_HOME", str(tmp_path / f"vault-{n}"))
        _vault(tool.split("__")[0])
        ranked = _ranked(argv, capsys)
        assert tool in ranked[:place], (argv, ranked[:5])
