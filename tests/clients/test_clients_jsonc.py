"""The JSONC reader and the text edits behind `coffer install` for JSON clients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coffer.clients import jsonc
from coffer.clients.common import ClientFileError, hashed_name, is_coffer_serve, normalise_name
from coffer.clients.mcpjson import McpServersJson
from coffer.vault.registry import NAME_RE

REAL = Path(__file__).parents[1] / "data" / "real-servers.json"
ENTRY = {"command": "/bin/coffer", "args": ["serve"]}


def test_parse_matches_json_on_a_real_file() -> None:
    text = REAL.read_text(encoding="utf-8")
    assert jsonc.parse(text).value == json.loads(text)


def test_parse_accepts_comments_and_trailing_commas() -> None:
    text = '// top\n{\n  /* block */ "a": [1, 2,], // end\n  "b": {"c": "x // not a comment",},\n}\n'
    assert jsonc.parse(text).value == {"a": [1, 2], "b": {"c": "x // not a comment"}}


@pytest.mark.parametrize(
    ("text", "line", "col", "reason"),
    [
        ('{\n  "a": 1\n  "b": 2\n}', 3, 3, "expected ',' or '}'"),
        ('{\n  "a": tru\n}', 2, 8, "unexpected character"),
        ("{\n  a: 1\n}", 2, 3, "expected a quoted key"),
        ('{"a": 1} x', 1, 10, "unexpected text after"),
        ('{"a": "unterminated\n}', 1, 20, "Invalid control character"),
        ('{"a": "unterminated', 1, 7, "Unterminated string"),
        ("/* never closed", 1, 1, "unterminated comment"),
        ("", 1, 1, "unexpected end of file"),
    ],
)
def test_parse_errors_name_line_and_column(text: str, line: int, col: int, reason: str) -> None:
    with pytest.raises(jsonc.JsoncError) as info:
        jsonc.parse(text)
    assert (info.value.line, info.value.col) == (line, col)
    assert reason in info.value.reason


def test_add_member_compact_file_stays_compact() -> None:
    fmt = McpServersJson()
    text = '{"mcpServers":{"a":{"command":"x"}},"theme":"dark"}'
    new = fmt.add(text, Path("f"), "coffer", ENTRY, replace=False)
    assert (
        new == '{"mcpServers":{"a":{"command":"x"},"coffer":{"command":"/bin/coffer","args":["serve"]}},"theme":"dark"}'
    )
    assert json.loads(new)["mcpServers"]["coffer"] == ENTRY


def test_add_member_into_empty_object_keeps_its_comments() -> None:
    fmt = McpServersJson()
    text = '{\n  "mcpServers": { // none yet\n  },\n  "x": 1\n}\n'
    new = fmt.add(text, Path("f"), "coffer", ENTRY, replace=False)
    assert "// none yet" in new
    assert jsonc.parse(new).value == {"mcpServers": {"coffer": ENTRY}, "x": 1}


def test_add_creates_the_container_at_the_end() -> None:
    fmt = McpServersJson(typed=True)
    text = '{\n  "numStartups": 3,\n  "userID": "é"\n}\n'
    entry = fmt.launcher("/bin/coffer", ["serve"], {})
    new = fmt.add(text, Path("f"), "coffer", entry, replace=False)
    assert new.startswith('{\n  "numStartups": 3,\n  "userID": "é",\n  "mcpServers": {\n    "coffer": {\n')
    assert list(json.loads(new)) == ["numStartups", "userID", "mcpServers"]
    assert json.loads(new)["mcpServers"]["coffer"]["type"] == "stdio"


def test_replace_value_keeps_the_place() -> None:
    fmt = McpServersJson()
    text = '{\n  "mcpServers": {\n    "coffer": {"command": "old"},\n    "z": {"command": "z"}\n  }\n}\n'
    new = fmt.add(text, Path("f"), "coffer", ENTRY, replace=True)
    assert list(json.loads(new)["mcpServers"]) == ["coffer", "z"]
    assert json.loads(new)["mcpServers"]["coffer"] == ENTRY
    assert new.endswith('    "z": {"command": "z"}\n  }\n}\n')


def test_container_of_the_wrong_type_is_reported_with_its_line() -> None:
    with pytest.raises(ClientFileError, match=r"^f:3: 'mcpServers' must be an object$"):
        McpServersJson().add('{\n  "a": 1,\n  "mcpServers": "nope"\n}', Path("f"), "coffer", ENTRY, replace=False)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("github", "github"),
        ("My_Server", "my-server"),
        ("brave.search v2", "brave-search-v2"),
        ("--x--", "x"),
    ],
)
def test_normalise_name(raw: str, expected: str) -> None:
    assert normalise_name(raw) == expected


@pytest.mark.parametrize("raw", ["a" * 40, "日本語", "x" * 20 + "_y", "Ünïcode-Sérver-Name-Long"])
def test_normalised_names_are_always_valid_and_stable(raw: str) -> None:
    assert NAME_RE.match(normalise_name(raw)) and normalise_name(raw) == normalise_name(raw)
    assert NAME_RE.match(hashed_name(raw)) and hashed_name(raw) == hashed_name(raw)
    assert hashed_name("my_server") != normalise_name("my_server")


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        ("coffer", ["serve"], True),
        ("/home/me/.local/bin/coffer", ["serve", "--http", "8000"], True),
        ("C:\\Tools\\coffer.exe", ["serve"], True),
        ("/usr/bin/python3", ["-m", "coffer", "serve"], True),
        ("uvx", ["coffer", "serve"], True),
        ("coffer", ["list"], False),
        ("npx", ["-y", "coffer-like-server", "serve"], False),
        ("python", ["-m", "server", "serve"], False),
    ],
)
def test_is_coffer_serve(command: str, args: list[str], expected: bool) -> None:
    assert is_coffer_serve(command, args) is expected
