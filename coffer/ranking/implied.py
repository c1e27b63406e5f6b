"""Needs a tool-search query implies without naming them, as short extra queries.

"Write a report on X and save it to /root/out/report.md" needs a tool that writes files, but no word of
it says "file", and a whole-task query ranks a file writer in the hundreds behind tools that match
"report" or "markdown". A few rules, each plain coding-agent vocabulary, turn such implications into
short queries ("write file"); the ranker then makes sure the best tool for each is in the results.

The rules, and why each is general rather than fitted to one benchmark:
- A file path with an extension in a clause that writes ("save", "write", "export", "create", ...)
  and does not read from it first ("read", "open", "load", "from", ...) is an output, and needs a
  writer for that kind of file. Plain-text formats (code, markdown, csv, json, html, logs) are written
  by any file tool, so the query is "write file"; document, sheet, slide, image and media formats need
  a tool for that format, so the kind is named ("write word document file").
- A date relative to today ("tomorrow", "next Wednesday", "the last 24 hours") needs the current date.
URLs are not file paths, and "Node.js" is not a file: only a path with a slash, or a bare name with a
known file extension, counts. Paths that are read from add nothing: a reading query names its reader
well enough ("read the data in x.xlsx"), and a "read file" rule measured no better than none.
"""

from __future__ import annotations

import re

# Extension -> the words a tool for that format uses. None: plain text, any file tool handles it.
_TEXT_EXTS = (
    "md markdown txt text log csv tsv json jsonl yaml yml toml ini cfg xml py ts tsx js jsx rs go java "
    "c h cpp hpp rb php sh sql css html htm bib tex"
)
_FORMATS = {
    "pdf": "pdf",
    "doc docx": "word document",
    "xls xlsx": "excel spreadsheet",
    "ppt pptx": "powerpoint presentation",
    "png jpg jpeg gif webp bmp": "image",
    "svg": "svg image",
    "wav mp3 flac ogg m4a": "audio",
    "mp4 mov avi mkv webm": "video",
}
KINDS: dict[str, str | None] = {ext: None for ext in _TEXT_EXTS.split()}
KINDS.update({ext: kind for exts, kind in _FORMATS.items() for ext in exts.split()})
# Short extensions that are also words or names ("Node.js", "let's go"): counted only inside a path.
_PATH_ONLY = {"js", "ts", "c", "h", "go", "sh", "text"}
_BARE_EXTS = "|".join(sorted((e for e in KINDS if e not in _PATH_ONLY), key=len, reverse=True))
# Not preceded by a word, slash, colon, dot or @: so never the tail of a URL or an e-mail address.
_PATH = re.compile(
    r"(?<![\w/:.@-])(?:(?:~|\.{1,2})?/)?(?:[\w.-]+/)+[\w.-]+\.([A-Za-z][A-Za-z0-9]{0,4})\b"
    rf"|(?<![\w/:.@-])[\w-]+\.({_BARE_EXTS})\b"
)
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|,\s+|\s+and\s+|\n+")
_WRITE = re.compile(
    r"\b(save[ds]?|saving|write|writes|writing|written|store[ds]?|export(?:s|ed)?|output|"
    r"generate[ds]?|create[ds]?|draft|make|produce|put)\b",
    re.IGNORECASE,
)
_READ = re.compile(r"\b(read|reads|open|load|parse|view|show|get|analy[sz]e|extract|from|under)\b", re.IGNORECASE)
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_RELATIVE_DATE = re.compile(
    rf"\b(tomorrow|yesterday|(?:next|last|this coming) (?:{_DAYS})|(?:last|past) \d+\s*(?:h|hours?|days?))\b",
    re.IGNORECASE,
)
CURRENT_DATE_QUERY = "get the current date and time"


def implied_queries(query: str) -> list[str]:
    """Short queries for needs `query` implies but may not name, in order, without repeats."""
    out: list[str] = []
    for clause in _CLAUSE.split(query):
        for match in _PATH.finditer(clause):
            ext = (match.group(1) or match.group(2) or "").lower()
            if ext not in KINDS:
                continue
            kind = KINDS[ext]
            before = clause[: match.start()]
            if _WRITE.search(before) or (_WRITE.search(clause) and not _READ.search(before)):
                out.append(f"write {kind} file" if kind else "write file")
    if _RELATIVE_DATE.search(query):
        out.append(CURRENT_DATE_QUERY)
    return list(dict.fromkeys(out))
