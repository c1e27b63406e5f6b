"""Splitting text into passages: the unit that `coffer__ask` ranks and returns.

A passage is one Markdown section, or part of one: paragraphs are packed up to a size bound, an
over-long paragraph is cut at sentences, and each passage after the first in a section starts with the
tail of the one before, so a fact that straddles a cut is still found whole in one of them.
"""

from __future__ import annotations

import re

MAX_PASSAGE_CHARS = 1200
OVERLAP_CHARS = 160
_HEADING_RE = re.compile(r"^#{1,6}\s+(\S.*?)\s*#*\s*$")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading, blocks) per Markdown section; blank lines split blocks except inside code fences."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    block: list[str] = []
    fenced = False

    def flush() -> None:
        if any(line.strip() for line in block):
            sections[-1][1].append("\n".join(block).strip("\n"))
        block.clear()

    for line in text.splitlines():
        if _FENCE_RE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING_RE.match(line)
        if heading:
            flush()
            sections.append((heading.group(1), []))
            block.append(line)
        elif not fenced and not line.strip():
            if block and not (len(block) == 1 and _HEADING_RE.match(block[0])):
                flush()  # a heading stays with the paragraph under it
        else:
            block.append(line.rstrip())
    flush()
    return [s for s in sections if s[1]]


def _fit(block: str, limit: int) -> list[str]:
    """Cut an over-long block at sentences, then words, then characters."""
    if len(block) <= limit:
        return [block]
    units: list[str] = []
    for sentence in _SENTENCE_RE.split(block):
        if len(sentence) <= limit:
            units.append(sentence)
            continue
        for word in sentence.split():
            units.extend(word[i : i + limit] for i in range(0, len(word), limit))
    out: list[str] = []
    for unit in units:
        if out and len(out[-1]) + 1 + len(unit) <= limit:
            out[-1] += " " + unit
        else:
            out.append(unit)
    return out


def _tail(chunk: str, size: int) -> str:
    """The last `size` characters of a chunk, started at a sentence (else word) boundary."""
    if len(chunk) <= size:
        return ""
    tail = chunk[-size:]
    cut = _SENTENCE_RE.search(tail)
    if cut is None:
        cut = re.search(r"\s+", tail)
    return tail[cut.end() :].strip() if cut else ""


def split_passages(
    text: str, max_chars: int = MAX_PASSAGE_CHARS, overlap: int = OVERLAP_CHARS
) -> list[tuple[str, str]]:
    """(heading, text) passages of at most `max_chars`: by section and paragraph, a little overlap."""
    out: list[tuple[str, str]] = []
    for heading, blocks in _sections(text.replace("\r\n", "\n").replace("\r", "\n")):
        chunk = ""
        for piece in (p for b in blocks for p in _fit(b, max_chars - overlap - 2)):
            if chunk and len(chunk) + 2 + len(piece) > max_chars:
                out.append((heading, chunk))
                tail = _tail(chunk, overlap)
                chunk = f"{tail}\n\n{piece}" if tail and len(tail) + 2 + len(piece) <= max_chars else piece
            else:
                chunk = f"{chunk}\n\n{piece}" if chunk else piece
        if chunk:
            out.append((heading, chunk))
    return out
