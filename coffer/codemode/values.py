"""MCP results as the values a script works with, and a finished script as the payload its caller gets.

A tool's structured content is the value when it has one (a dict); otherwise its text, joined; other
content (images, resources) comes as the content list. A tool's error result becomes an exception the
script can catch. The script's return value and printed output go back as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ERROR_PRINTED_CHARS = 4000  # of a failed script's output, what comes back


class ToolFailed(Exception):
    """An inner call that did not succeed; `kind` is the exception the script sees."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # a Python exception name pydantic-monty knows (RuntimeError, PermissionError, ...)


# the invocation log's outcome of a failed call -> the exception a script sees
FAILED_AS = {"refused": "PermissionError", "timeout": "TimeoutError"}


def script_value(result: Mapping[str, Any], outcome: str | None = "ok") -> Any:
    """What `call_tool` returns to the script for one tools/call result (`outcome`: the log's)."""
    content = result.get("content") or []
    texts = [c.get("text", "") for c in content if isinstance(c, Mapping) and c.get("type") == "text"]
    if result.get("isError"):
        message = "\n".join(texts).strip() or "the tool reported an error"
        raise ToolFailed(FAILED_AS.get(outcome or "", "RuntimeError"), message)
    structured = result.get("structuredContent")
    if isinstance(structured, Mapping):
        return dict(structured)
    if len(texts) == len(content):
        return "\n".join(texts)
    return [dict(c) for c in content if isinstance(c, Mapping)]


@dataclass
class Outcome:
    """How a script ended: its value or its error, what it printed, the tool calls it made."""

    value: Any = None
    error: str | None = None
    printed: str = ""
    calls: int = 0
    notes: list[str] = field(default_factory=list)
    timed_out: bool = False  # it ran past its wall time (the log's outcome is `timeout`)

    def payload(self) -> dict[str, Any]:
        notes = list(self.notes)
        if self.error is None:
            out: dict[str, Any] = {"result": _jsonable(self.value), "printed": self.printed, "calls": self.calls}
        else:  # what it printed last is what explains a failure
            printed = self.printed[-ERROR_PRINTED_CHARS:]
            if len(printed) < len(self.printed):
                notes.append(f"printed: its last {ERROR_PRINTED_CHARS:,} characters.")
            out = {"error": self.error, "printed": printed, "calls": self.calls}
        if notes:
            out["note"] = " ".join(notes)
        return out


def _jsonable(value: Any) -> Any:
    """The value as JSON would carry it (tuples as lists, anything else by its str)."""
    return json.loads(json.dumps(value, default=str))
