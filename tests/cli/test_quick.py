"""`coffer search` answered without Typer (coffer.cli.quick): the same answers and errors as the Typer
command, judged by running the real `coffer` entry point in a subprocess beside CliRunner."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.cli.quick import parse_search
from tests.cli.test_search_cli import real_vault  # noqa: F401  (fixture)
from tests.conftest import run_cli, subprocess_env


def _coffer(home: Path, *args: str, code: int | None = 0) -> subprocess.CompletedProcess[str]:
    """The installed entry point's code path (`coffer.cli.main`), as a user's shell runs it."""
    proc = subprocess.run(
        [sys.executable, "-c", "from coffer.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env={**subprocess_env(home), "COLUMNS": "200"},
        timeout=120,
    )
    if code is not None:
        assert proc.returncode == code, proc.stderr
    return proc


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["search", "open a PR"], ("open a PR", 5, False, "hybrid")),
        (["search", "-k", "3", "open a PR", "--json"], ("open a PR", 3, True, "hybrid")),
        (["search", "open a PR", "-k3", "--ranker=bm25"], ("open a PR", 3, False, "bm25")),
        (["search", "--top-k=007", "--ranker", "semantic", "q"], ("q", 7, False, "semantic")),
        (["search", "--json", "--", "-rf the cache"], ("-rf the cache", 5, True, "hybrid")),
        (["search", "x", "-k", "0"], ("x", 0, False, "hybrid")),  # a value the command itself refuses
    ],
)
def test_command_lines_search_accepts_are_parsed(argv: list[str], parsed: tuple) -> None:
    assert parse_search(argv) == parsed


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["list"],
        ["--version"],
        ["search"],
        ["search", "--help"],
        ["search", "a", "b"],
        ["search", "a", "-k"],
        ["search", "a", "-k", "x"],
        ["search", "a", "-k", "-1"],
        ["search", "a", "-k", "٣"],  # a digit Python reads and click may not: Typer decides
        ["search", "a", "--ranker", "fuzzy"],
        ["search", "a", "--json", "--json"],
        ["search", "a", "-k", "2", "--top-k", "3"],
        ["search", "a", "--json=yes"],
        ["search", "a", "--top"],
        ["search", "-"],
        ["search", "--", "a", "b"],
        ["search", "a", "--", "b"],
    ],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert parse_search(argv) is None


def test_the_fast_path_answers_as_the_typer_command_does(cli: CliRunner, real_vault: Path) -> None:  # noqa: F811
    for args in (
        ["search", "open a PR", "--json"],
        ["search", "-k", "2", "take a screenshot of the page", "--json", "--ranker", "bm25"],
        ["search", "xyzzy", "--ranker", "bm25", "--json"],
    ):
        fast = _coffer(real_vault, *args)
        typer_run = run_cli(cli, *args)
        assert json.loads(fast.stdout) == json.loads(typer_run.stdout)
        assert fast.stderr == typer_run.stderr
    first = json.loads(_coffer(real_vault, "search", "open a PR", "--json").stdout)["tools"][0]
    assert first["name"] == "github__create_pull_request"
    table = _coffer(real_vault, "search", "open a PR", "-k", "2")
    assert "github__create_pull_request" in table.stdout and "222 tools searched" in table.stdout


def test_errors_match_and_typer_keeps_the_usage_messages(cli: CliRunner, real_vault: Path) -> None:  # noqa: F811
    for args, code in ((["search", "   "], 2), (["search", "x", "-k", "0"], 2)):
        fast = _coffer(real_vault, *args, code=code)
        assert fast.stderr == run_cli(cli, *args, code=code).stderr
        assert fast.stderr.startswith("coffer: error: ") and fast.stdout == ""
    bad = _coffer(real_vault, "search", "x", "--ranker", "fuzzy", code=2)  # Typer's own message
    assert "fuzzy" in bad.stderr and "Usage: " in bad.stderr and "search [OPTIONS]" in bad.stderr
    helped = _coffer(real_vault, "search", "--help")
    assert "--top-k" in helped.stdout


def test_no_snapshot_is_the_same_clear_error(coffer_home: Path) -> None:
    proc = _coffer(coffer_home, "search", "open a PR", code=3)
    assert "no catalogue snapshot yet" in proc.stderr and proc.stdout == ""


def test_the_fast_path_imports_neither_typer_nor_pydantic_nor_the_tokenizer(real_vault: Path) -> None:  # noqa: F811
    _coffer(real_vault, "search", "open a PR")  # builds the index snapshot
    proc = _quick_run(real_vault, "['search', 'open a PR']", ("typer", "pydantic", "tokenizers", "click", "mcp"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0 []"


def _quick_run(home: Path, argv: str, modules: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """`quick.run(argv)` in a fresh interpreter: prints its exit code and which of `modules` it imported."""
    code = (
        "import sys, io, contextlib\n"
        "from coffer.cli import quick\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = quick.run({argv})\n"
        f"print(code, sorted(m for m in {modules!r} if m in sys.modules))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(home), timeout=120
    )


def test_a_closed_pipe_ends_quietly(real_vault: Path) -> None:  # noqa: F811
    """The reader is gone before the first byte is written (`| true`): no traceback, exit 1 as click."""
    script = f"{sys.executable} -c 'from coffer.cli import main; main()' search 'open a PR' -k 50 | true"
    proc = subprocess.run(
        ["bash", "-c", script + "; echo ${PIPESTATUS[0]}"],
        capture_output=True,
        text=True,
        env=subprocess_env(real_vault),
        timeout=120,
    )
    assert proc.stdout.strip() == "1", proc.stderr
    assert proc.stderr == ""


def test_a_new_word_costs_the_tokenizer_once_per_vault(real_vault: Path) -> None:  # noqa: F811
    """The first search with a word the index does not know loads the tokenizer and keeps the word's
    pieces (words only: no digits or other runs of a query); the next one needs no tokenizer, and no
    pure-Python stemmer (PyStemmer stems a query at once; without it, the stems are kept too)."""
    _coffer(real_vault, "search", "open a PR")  # the index snapshot
    code = (
        "import sys, io, contextlib\n"
        "from coffer.cli import quick\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert quick.run(['search', 'open a PR for the zorblax branch 31337 x-Qz9']) == 0\n"
        "print('tokenizers' in sys.modules, 'snowballstemmer' in sys.modules)\n"
    )

    def run() -> str:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(real_vault), timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert run().startswith("True ")  # taught by the tokenizer
    from coffer.ranking.derived import SUFFIX, load_derived
    from coffer.ranking.embed import MODEL_ID

    saved = load_derived(real_vault / "cache" / "pieces" / f"{MODEL_ID}{SUFFIX}")  # beside it: the vocabulary's
    assert saved is not None
    words = saved["piece_text"].tobytes().decode().split("\x00")
    assert "\u2581zorblax" in words
    assert words and all(re.fullmatch("\u2581?[A-Za-z]{1,24}", w) for w in words)  # no "3" or "-"
    assert run() == "False False"  # the same words again: neither


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["serve"], (None,)),
        (["serve", "--profile", "work"], ("work",)),
        (["serve", "--profile=work"], ("work",)),
    ],
)
def test_serve_through_the_engine_is_a_front_without_typer(argv: list[str], parsed: tuple) -> None:
    from coffer.cli.quick import parse_serve

    assert parse_serve(argv) == parsed


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--standalone"],
        ["serve", "--http", "8765"],
        ["serve", "--help"],
        ["serve", "--profile"],
        ["serve", "--profile", "--standalone"],
        ["serve", "--profile", "a", "--profile", "b"],
        ["serve", "--print-token"],
        ["servex"],
    ],
)
def test_every_other_serve_goes_to_typer(argv: list[str]) -> None:
    from coffer.cli.quick import parse_serve

    assert parse_serve(argv) is None


def test_standalone_by_environment_goes_to_typer(monkeypatch: pytest.MonkeyPatch) -> None:
    from coffer.cli.quick import parse_serve

    monkeypatch.setenv("COFFER_STANDALONE", "1")
    assert parse_serve(["serve"]) is None


def test_the_serve_front_imports_neither_typer_nor_pydantic(coffer_home: Path) -> None:
    """A session's front (what each agent spawns) copies bytes to the engine; an unknown profile is the
    Typer command's own error line and exit code."""
    proc = _quick_run(
        coffer_home, "['serve', '--profile', 'nope']", ("typer", "pydantic", "rich", "click", "mcp", "anyio")
    )
    assert proc.stdout.strip() == "3 []", proc.stderr
    assert proc.stderr == "coffer: error: unknown profile 'nope' (profiles: none yet: `coffer profile add NAME`)\n"
    typer_path = _coffer(coffer_home, "serve", "--profile", "nope", "--standalone", code=3)
    assert typer_path.stderr == proc.stderr
