"""The line of a failed server's stderr that says why, rather than the last one.

Runtimes end a failure with lines that point elsewhere: npm with where its log is, Node with its version
banner, uv with a hint, Python with a traceback whose cause is last but whose frames come first. Each
line is scored on what any error statement has (an error word, an errno or HTTP status, an exception
name) against what a pointer has (a stack frame, a log's location, a hint, a version banner, a caret);
the best line is shown with up to two lines after it that say more, or, where a chain of causes follows
it (`Caused by:`), with the last of them: the root. No list of known tools: the same
rules read npm, uv, Node, Python and Go alike.
"""

from __future__ import annotations

import re

_ERROR_WORDS = re.compile(
    r"\b(errors?|err!?|exception|fatal|failed|failure|denied|refused|unauthori[sz]ed|forbidden|invalid|cannot|"
    r"can't|could not|couldn't|unable|not found|no such|missing|timed out|timeout|panic|unsatisfiable|"
    r"unreachable|expired|rejected|aborted)\b",
    re.I,
)
_CODE = re.compile(r"\b(E[A-Z0-9]{3,}|[45]\d\d)\b")  # E404, EACCES, ENOENT; an HTTP status
_EXCEPTION = re.compile(r"^([\w.]*(Error|Exception|Exit|Failure)|error|fatal|panic)\b[^:]{0,40}:", re.I)
_FRAME = re.compile(r"^(at\s|File \"|Traceback \(|\^+$|~+$|[\s^~]+$|\.\.\. \d+ more|goroutine \d+)")
_POINTER = re.compile(
    r"(complete log|debug log|see (the )?log|for more (details|information)|^hint:|^note:|^help:|"
    r"^node\.js v\d|^python \d|^npm (notice|warn)|^warn(ing)?\b|^\s*run with|--verbose|stack trace)",
    re.I,
)


_LINK = re.compile(r"^(caused by|cause)\b|^[├╰└│]", re.I)


def score(line: str) -> int:
    points = 0
    if _ERROR_WORDS.search(line):
        points += 2
    if _CODE.search(line):
        points += 1
    if _EXCEPTION.match(line):
        points += 2
    if _FRAME.match(line):
        points -= 4
    if _POINTER.search(line):
        points -= 3
    return points


def cause(tail: str, width: int = 300) -> str:
    """The stderr line that says why (and up to two that say more), within `width`; "" for none."""
    lines = [ln.strip() for ln in tail.replace("\r", "\n").splitlines() if ln.strip()]
    if not lines:
        return ""
    scores = [score(ln) for ln in lines]
    best = max(scores)
    if best <= 0:
        return _cut(lines[-1], width)
    at = len(scores) - 1 - scores[::-1].index(best)  # the last of the best: the outermost statement
    at = _first_of_run(lines, scores, at)
    links = []  # a chain of causes after it (`Caused by:`, uv's `cause:` and arrows): the last is the root
    for line, points in zip(lines[at + 1 :], scores[at + 1 :], strict=False):
        if points < 0 or not _LINK.match(line):
            break
        links.append(line)
    if links:
        return _cut(" | ".join([lines[at], links[-1]]), width)
    shown = [lines[at]]
    for line, points in zip(lines[at + 1 : at + 5], scores[at + 1 : at + 5], strict=False):
        if points < 0 or len(shown) == 3:
            break
        if not set(line.split()) <= {w for s in shown for w in s.split()}:  # only what it adds
            shown.append(line)
    return _cut(" | ".join(shown), width)


def _first_of_run(lines: list[str], scores: list[int], at: int) -> int:
    """Where a block of equally good lines starts (npm prints one error over several `npm error` lines)."""
    while at > 0 and scores[at - 1] >= scores[at] and _prefix(lines[at - 1]) == _prefix(lines[at]):
        at -= 1
    return at


def _prefix(line: str) -> str:
    return " ".join(line.split()[:2])


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
