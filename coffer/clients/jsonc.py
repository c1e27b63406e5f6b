"""A small JSON-with-comments parser that remembers where every object member sits, and text edits on top.

Client configs are hand-edited files (VS Code's are JSONC: comments and trailing commas). Re-serialising
them with `json.dumps` would reflow arrays, drop comments and churn a 2,000-line `~/.claude.json`, so
Coffer inserts its entry as text at the right place and leaves every other byte alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JsoncError(ValueError):
    """A parse failure at a 1-based line and column."""

    def __init__(self, message: str, text: str, pos: int) -> None:
        self.line = text.count("\n", 0, pos) + 1
        self.col = pos - text.rfind("\n", 0, pos)
        self.reason = message
        super().__init__(f"{message} at line {self.line}, column {self.col}")


@dataclass
class Node:
    """A parsed value and its span `[start, end)` in the text; objects also keep their members."""

    value: Any
    start: int
    end: int
    members: list[Member] = field(default_factory=list)

    def member(self, key: str) -> Member | None:
        found = None
        for item in self.members:
            if item.key == key:
                found = item  # the last duplicate wins, as in json.loads
        return found


@dataclass
class Member:
    key: str
    key_start: int
    node: Node


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str, pos: int | None = None) -> JsoncError:
        return JsoncError(message, self.text, self.pos if pos is None else pos)

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated comment")
                self.pos = end + 2
            else:
                return

    def value(self) -> Node:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of file")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array()
        start = self.pos
        if ch == '"':
            return Node(self.string(), start, self.pos)
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return Node(json.loads(match.group()), start, self.pos)
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return Node(literal, start, self.pos)
        raise self.fail(f"unexpected character {ch!r}")

    def string(self) -> str:
        try:
            value, self.pos = json.decoder.scanstring(self.text, self.pos + 1)  # type: ignore[attr-defined]
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg, exc.pos) from None
        return str(value)

    def obj(self) -> Node:
        node = Node({}, self.pos, self.pos)
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith("}", self.pos):
                break
            if not self.text.startswith('"', self.pos):
                raise self.fail("expected a quoted key or '}'")
            key_start = self.pos
            key = self.string()
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':' after key")
            self.pos += 1
            child = self.value()
            node.members.append(Member(key, key_start, child))
            node.value[key] = child.value
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith("}", self.pos):
                raise self.fail("expected ',' or '}'")
        self.pos += 1
        node.end = self.pos
        return node

    def array(self) -> Node:
        node = Node([], self.pos, self.pos)
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith("]", self.pos):
                break
            node.value.append(self.value().value)
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith("]", self.pos):
                raise self.fail("expected ',' or ']'")
        self.pos += 1
        node.end = self.pos
        return node


def parse(text: str) -> Node:
    """Parse a whole JSON/JSONC document; raises `JsoncError` with line and column."""
    parser = _Parser(text)
    root = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("unexpected text after the JSON value")
    return root


# ---------------------------------------------------------------- text edits


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line_indent(text: str, pos: int) -> str:
    """The whitespace that starts the line holding `pos`."""
    line_start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[line_start:pos])
    return match.group() if match else ""


def indent_unit(text: str, root: Node) -> str:
    """The file's own indentation step, read off the first member of the top-level object."""
    if root.members and "\n" in text[root.start : root.members[0].key_start]:
        unit = _line_indent(text, root.members[0].key_start)
        if unit:
            return unit
    return "  "


def _render(value: Any, indent: str, unit: str, nl: str) -> str:
    body = json.dumps(value, indent=unit, ensure_ascii=False)
    return body.replace("\n", nl + indent)


def add_member(text: str, obj: Node, key: str, value: Any, unit: str) -> str:
    """Return `text` with `"key": value` appended to the object `obj`; every other byte is kept."""
    nl = _newline(text)
    inner = text[obj.start + 1 : obj.end - 1]
    multiline = "\n" in text[obj.start : obj.end] or not obj.members
    if obj.members:
        last = obj.members[-1]
        prefix = text[text.rfind("\n", 0, last.key_start) + 1 : last.key_start]
        indent = prefix if not prefix.strip() else _line_indent(text, obj.start) + unit
        at = last.node.end
        if multiline:
            insert = "," + nl + indent + json.dumps(key) + ": " + _render(value, indent, unit, nl)
        else:
            colon = ": " if ": " in text[obj.start : obj.end] else ":"
            comma = ", " if ", " in text[obj.start : obj.end] else ","
            rendered = json.dumps(value, ensure_ascii=False, separators=(comma, colon))
            insert = comma + json.dumps(key) + colon + rendered
        return text[:at] + insert + text[at:]
    outer = _line_indent(text, obj.start)
    indent = outer + unit
    member = json.dumps(key) + ": " + _render(value, indent, unit, nl)
    kept = inner.rstrip() if inner.strip() else ""  # comments inside an empty object stay
    body = "{" + kept + nl + indent + member + nl + outer + "}"
    return text[: obj.start] + body + text[obj.end :]


def replace_value(text: str, member: Member, value: Any, unit: str) -> str:
    """Return `text` with one member's value replaced, keeping the member's place and indentation."""
    nl = _newline(text)
    indent = _line_indent(text, member.key_start)
    node = member.node
    return text[: node.start] + _render(value, indent, unit, nl) + text[node.end :]


def remove_member(text: str, obj: Node, key: str) -> str:
    """Return `text` without the member `key` of `obj` (its line too, when it had one to itself), keeping
    every other byte; the comma it shared with a neighbour goes with it."""
    index = next((i for i, m in enumerate(obj.members) if m.key == key), None)
    if index is None:
        return text
    member = obj.members[index]
    line_start = text.rfind("\n", 0, member.key_start) + 1
    own_line = not text[line_start : member.key_start].strip()
    start = line_start if own_line else member.key_start
    end = member.node.end
    after = end
    while after < obj.end - 1 and text[after] in " \t":
        after += 1
    if index + 1 < len(obj.members):  # not the last: take the comma after it (and the rest of its line)
        if text[after] == ",":
            end = after + 1
        if own_line:
            nl = text.find("\n", end)
            end = nl + 1 if nl != -1 and not text[end:nl].strip() else end
        else:
            while end < len(text) and text[end] in " \t":
                end += 1
        return text[:start] + text[end:]
    if index > 0:  # the last of several: drop the comma after the previous member instead
        prev_end = obj.members[index - 1].node.end
        comma = text.find(",", prev_end, member.key_start)
        if own_line:
            start = text.rfind("\n", 0, member.key_start)  # keep the previous line's end
            start = start if start >= prev_end else line_start
        return text[:comma] + text[comma + 1 : start] + text[end:] if comma != -1 else text[:start] + text[end:]
    # the only member: its own line goes, comments around it stay
    if own_line:
        nl = text.find("\n", end)
        end = nl + 1 if nl != -1 and not text[end:nl].strip() else end
    return text[:start] + text[end:]
