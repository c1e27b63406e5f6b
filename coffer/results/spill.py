"""The long strings of a big tools/call result, decoded from the upstream's line straight into a file.

Why: parsed whole, a 50 MB result is held twice at the peak (the line, and the string parsed from it),
and yet, over the cap, it is only ever written to the store and read a slice at a time after that.
So the transport hands a response line of a megabyte or more to `split`: each string of `MIN_BYTES`
or more is decoded a slice at a time into a private file beside the store, and a placeholder (a
random token, registered here) goes through the SDK in its place. `claim` turns the placeholders of a
result's content back into `Spilled` values, which the preview, the store and the index read a slice
at a time; `restore` makes real strings of them where a result must go on whole (under the cap,
keeping off, a response that is not a tools/call result). The peak is the line and one slice.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

MIN_BYTES = 256 * 1024  # a string shorter than this stays in the line
CHUNK = 1 << 20  # bytes of the line decoded at a time, and characters read back at a time
MAX_STRINGS = 20_000  # a line of many small strings is no big-string line: parsed as it is
STALE_S = 600.0  # a value nobody claimed (its call was cancelled meanwhile) is dropped after this
PREFIX = ".spill-"  # the files, in the store's folder; coffer.results.archive sweeps the leftovers
MARK = "\ue000coffer-spill:"  # a private-use character, then a random token: no upstream can forge one

# A JSON string, from its opening quote to its closing one (possessive: no backtracking state, so a
# 50 MB string is matched in one pass without growing the regex engine's stack).
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_BACKSLASH = 0x5C


@dataclass
class Spilled:
    """One long string of a result, in a file (UTF-8), read a slice at a time."""

    token: str
    path: Path
    chars: int = 0
    made: float = field(default_factory=time.monotonic)

    def slices(self, size: int = CHUNK) -> Iterator[str]:
        with self._open() as fh:
            while piece := fh.read(size):
                yield piece

    def head(self, chars: int) -> str:
        with self._open() as fh:
            return fh.read(chars)

    def whole(self) -> str:
        with self._open() as fh:
            return fh.read()

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _open(self) -> TextIO:
        return open(self.path, encoding="utf-8", errors="surrogatepass", newline="")


Text = str | Spilled

_lock = threading.Lock()
_pending: dict[str, Spilled] = {}


def size(value: Text) -> int:
    """Characters in a string or a spilled one."""
    return value.chars if isinstance(value, Spilled) else len(value)


def pieces(value: Text, chars: int = CHUNK) -> Iterable[str]:
    """A string, or a spilled one a slice at a time."""
    return value.slices(chars) if isinstance(value, Spilled) else (value,)


def head(value: Text, chars: int) -> str:
    return value.head(chars) if isinstance(value, Spilled) else value[:chars]


def split(line: bytearray, folder: Path, chunk: int = CHUNK) -> tuple[bytearray, list[str]] | None:
    """`line` with its long strings replaced by placeholders (their text in files under `folder`), and
    the placeholders made; None when it has none worth it (the line is then parsed as it is). The line
    is emptied when it is split. A string JSON cannot decode fails the split, so that the line fails
    as it would have."""
    spans: list[tuple[int, int]] = []
    for n, match in enumerate(_STRING.finditer(line)):
        if n > MAX_STRINGS:
            return None
        if match.end() - match.start() >= MIN_BYTES:
            spans.append(match.span())
    if sum(b - a for a, b in spans) * 2 < len(line):  # mostly small strings: no gain
        return None
    _drop_stale()
    out, pos, made = bytearray(), 0, []
    try:
        for start, end in spans:
            out += memoryview(line)[pos:start]
            spilled = _decode(line, start + 1, end - 1, folder, chunk)
            made.append(spilled)
            out += json.dumps(spilled.token).encode()
            pos = end
        out += memoryview(line)[pos:]
    except BaseException as exc:  # none is registered yet: their files go here
        for spilled in made:
            spilled.discard()
        if isinstance(exc, ValueError):
            return None
        raise
    with _lock:
        _pending.update((s.token, s) for s in made)
    line.clear()
    return out, [s.token for s in made]


def _decode(line: bytearray, start: int, stop: int, folder: Path, chunk: int) -> Spilled:
    """The JSON string body `line[start:stop]`, decoded a chunk at a time into a new private file."""
    spilled = Spilled(MARK + secrets.token_hex(16), folder / f"{PREFIX}{os.getpid()}-{time.monotonic_ns()}")
    fd = os.open(spilled.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    view = memoryview(line)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass", newline="") as fh:
            pos, high = start, ""
            while pos < stop:
                end = stop if stop - pos <= chunk else _cut(line, pos + chunk, pos)
                # decoded as the whole line would be: invalid UTF-8 as U+FFFD, then JSON's escapes
                text = json.loads('"' + bytes(view[pos:end]).decode("utf-8", "replace") + '"')
                if high:  # a surrogate pair's escapes fell on both sides of the cut: one character again
                    text, high = _pair(high, text), ""
                if end < stop and text and 0xD800 <= ord(text[-1]) <= 0xDBFF:
                    high, text = text[-1], text[:-1]
                fh.write(text)
                spilled.chars += len(text)
                pos = end
            fh.write(high)
            spilled.chars += len(high)
    except BaseException:
        spilled.discard()
        raise
    finally:
        view.release()
    return spilled


def _pair(high: str, text: str) -> str:
    """`high + text`, a high surrogate joined to the low one that starts `text` as JSON would join them."""
    if text and 0xDC00 <= ord(text[0]) <= 0xDFFF:
        return (high + text[0]).encode("utf-16-le", "surrogatepass").decode("utf-16-le") + text[1:]
    return high + text


def _cut(line: bytearray, end: int, floor: int) -> int:
    """A place at or before `end` where the string body can be cut: not inside a UTF-8 character, and
    not inside an escape (none starts in the 6 bytes before it, or it is itself an escape's start)."""
    for p in range(end, max(floor + 1, end - 64), -1):
        if line[p] & 0xC0 == 0x80:
            continue
        if _BACKSLASH not in line[p - 6 : p]:
            return p
        if line[p] == _BACKSLASH:
            run = 0
            while line[p - 1 - run] == _BACKSLASH:
                run += 1
            if run % 2 == 0:
                return p
    raise ValueError("no place to cut the string")  # not valid JSON: parsed (and refused) as it is


def settle(result: Any, tokens: list[str], call: bool) -> None:
    """After the line's envelope is parsed: the placeholders left where `claim` will look (a tools/call
    result's content) stay; any other is made a string again at once."""
    if not tokens:
        return
    if call and isinstance(result, dict):
        found = set(_content_values(result))
        rest = [t for t in tokens if t not in found]
    else:
        rest = tokens
    if rest:
        restore(result, set(rest))


def _content_values(result: dict[str, Any]) -> Iterator[str]:
    for item, key in _slots(result):
        value = item.get(key)
        if isinstance(value, str) and value.startswith(MARK):
            yield value


def _slots(result: MutableMapping[str, Any]) -> Iterator[tuple[MutableMapping[str, Any], str]]:
    """The (item, key) places of a result's content a long value can be: text, data, a resource's text or blob."""
    for item in result.get("content") or []:
        if not isinstance(item, dict):
            continue
        yield item, "text"
        yield item, "data"
        if isinstance(item.get("resource"), dict):
            yield item["resource"], "text"
            yield item["resource"], "blob"


def claim(result: MutableMapping[str, Any]) -> list[Spilled]:
    """The spilled values of a tools/call result's content, put in place of their placeholders."""
    out = []
    for item, key in _slots(result):
        value = item.get(key)
        if isinstance(value, str) and value.startswith(MARK):
            with _lock:
                spilled = _pending.pop(value, None)
            if spilled is not None:
                item[key] = spilled
                out.append(spilled)
    return out


def whole(result: MutableMapping[str, Any], spilled: list[Spilled]) -> MutableMapping[str, Any]:
    """`result` with its claimed values made strings again (it goes on whole); their files go."""
    if spilled:
        for item, key in _slots(result):
            value = item.get(key)
            if isinstance(value, Spilled):
                item[key] = value.whole()
                value.discard()
    return result


def restore(value: Any, tokens: set[str]) -> Any:
    """Every placeholder in `tokens` found in `value` (walked whole) made its string again, in place."""
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = restore(item, tokens)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            value[n] = restore(item, tokens)
    elif isinstance(value, str) and value in tokens:
        with _lock:
            spilled = _pending.pop(value, None)
        if spilled is not None:
            text = spilled.whole()
            spilled.discard()
            return text
    return value


def forget(tokens: Iterable[str]) -> None:
    """Drop these placeholders' values (their line did not parse after all)."""
    with _lock:
        gone = [s for t in tokens if (s := _pending.pop(t, None)) is not None]
    for spilled in gone:
        spilled.discard()


def _drop_stale() -> None:
    now = time.monotonic()
    with _lock:
        stale = [t for t, s in _pending.items() if now - s.made > STALE_S]
        gone = [_pending.pop(t) for t in stale]
    for spilled in gone:
        spilled.discard()
