"""Redaction by value: every secret or env value Coffer resolves is scrubbed from the text it writes.

Pattern-based redaction misses tokens that do not look like tokens, so Coffer remembers the exact values
it resolved in this process (secrets, `${VAR}` expansions, literal env and header values) and replaces
them wherever text leaves the process: error lines, stderr tails, doctor output, log handlers.
Common re-encodings of a value (JSON-escaped, URL-quoted, base64) are scrubbed too.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

if TYPE_CHECKING:
    import logging

MASK = "****"
# Shorter values ("1", "true", "dev") are configuration, not credentials; scrubbing them would mangle text.
MIN_LEN = 6

_lock = threading.Lock()
_values: set[str] = set()
_pattern: re.Pattern[str] | None = None


def _variants(value: str) -> set[str]:
    out = {value, json.dumps(value)[1:-1], quote(value, safe=""), quote_plus(value)}
    raw = value.encode("utf-8")
    for encoded in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        out |= {encoded, encoded.rstrip("=")}  # padded first (longest match wins), then bare
    return {v for v in out if len(v) >= MIN_LEN}


def register(*values: str | None) -> None:
    """Remember values that must never appear in anything Coffer writes."""
    global _pattern
    fresh: set[str] = set()
    for value in values:
        if isinstance(value, str) and len(value) >= MIN_LEN:
            fresh |= _variants(value)
    if not fresh:
        return
    with _lock:
        if fresh <= _values:
            return
        _values.update(fresh)
        # Longest first, so a value that contains another is masked whole.
        ordered = sorted(_values, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(v) for v in ordered))


def registered(values: Mapping[str, str]) -> dict[str, str]:
    """Register a resolved mapping's values and hand it back (for env/header resolution)."""
    register(*values.values())
    return dict(values)


def scrub(text: str) -> str:
    """`text` with every registered value replaced by `****`."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(MASK, text)


def scrub_obj(data: Any) -> Any:
    """Scrub every string inside JSON-like data (dict keys included)."""
    if _pattern is None:
        return data
    if isinstance(data, str):
        return scrub(data)
    if isinstance(data, Mapping):
        return {scrub(str(k)): scrub_obj(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [scrub_obj(v) for v in data]
    return data


class RedactingFilter:
    """A logging filter that renders each record and scrubs it, for handlers Coffer installs.

    Not a `logging.Filter` subclass (logging takes any object with `filter`), so importing this module,
    which every printed line passes through, does not import logging."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _pattern is not None:
            record.msg = scrub(record.getMessage())
            record.args = None
        return True


def reset() -> None:
    """Forget every registered value (tests only)."""
    global _pattern
    with _lock:
        _values.clear()
        _pattern = None
