"""Output: the one module that imports rich. Every reading command renders for humans or as `--json`.

JSON output is a stable contract for scripts, so it goes to stdout unstyled; human messages and
errors go to stderr so they never corrupt piped data.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

JSON_VERSION = 1


def _console(stderr: bool = False) -> Any:
    import os

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped or captured output has no terminal width; rich would fold tables at 80 columns.
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 160
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def _clean(value: Any) -> str:
    """Every string Coffer prints passes through redaction of resolved secret values."""
    from coffer.trust.redact import scrub

    return scrub("" if value is None else str(value))


def print_json(data: Any) -> None:
    sys.stdout.write(_clean(json.dumps(data, indent=2, ensure_ascii=False, default=str)) + "\n")


def print_json_line(data: Any) -> None:
    sys.stdout.write(_clean(json.dumps(data, ensure_ascii=False, default=str)) + "\n")
    sys.stdout.flush()


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    title: str | None = None,
    caption: str | None = None,
    whole: Sequence[str] = (),
) -> None:
    """`whole`: columns never wrapped (what a user copies into a command); the others fold to fit."""
    from rich.table import Table
    from rich.text import Text

    # at least as wide as its title, which rich would otherwise wrap to a narrow table's width; titles and
    # captions as Text, never markup (a path may hold "[x]")
    heading = None if title is None else Text(_clean(title))
    tbl = Table(
        title=heading,
        caption=None if caption is None else Text(_clean(caption)),
        show_lines=False,
        min_width=None if heading is None else heading.cell_len,
    )
    for col in columns:
        tbl.add_column(col, overflow="fold", no_wrap=col in whole)
    for row in rows:
        # Text, not str: cells are data (a description may hold "[/x]", which rich would read as markup
        # and fail on, or style)
        tbl.add_row(*(Text(_clean(v)) for v in row))
    _console().print(tbl)


def kv(pairs: Iterable[tuple[str, Any]], title: str | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    heading = None if title is None else Text(_clean(title))
    tbl = Table(
        title=heading,
        show_header=False,
        box=None,
        padding=(0, 2),
        min_width=None if heading is None else heading.cell_len,
    )
    tbl.add_column(style="bold")
    tbl.add_column(overflow="fold")
    for key, value in pairs:
        shown = shlex.join(value) if key == "args" and isinstance(value, list) else human(value)  # as typed
        tbl.add_row(Text(key.replace("_", " ")), Text(_clean(shown)))
    _console().print(tbl)


def human(value: Any) -> str:
    """A value as a person reads it: yes/no, a list as words, a table as KEY=VALUE, nothing as -."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return ", ".join(human(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={human(v)}" for k, v in value.items())
    return str(value)


def say(message: str) -> None:
    """A human status line (stderr, so stdout stays clean for data)."""
    _console(stderr=True).print(_clean(message), markup=False)


def text(message: str) -> None:
    """Plain text to stdout (the command's actual output)."""
    sys.stdout.write(_clean(message) + "\n")


def error(message: str) -> None:
    sys.stderr.write(f"coffer: error: {_clean(message)}\n")


def warn(message: str) -> None:
    """One unwrapped warning line on stderr (a command that succeeded with a caveat)."""
    sys.stderr.write(f"coffer: warning: {_clean(message)}\n")


@contextlib.contextmanager
def progress(total: int, label: str) -> Iterator[Callable[[str], None]]:
    """A transient progress bar on stderr while slow work runs (drawn only on a terminal); yields `advance(text)`."""
    console = _console(stderr=True)
    if not console.is_terminal:  # nothing to draw: rich.progress (40 ms to import) is not needed
        yield lambda _text: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(_clean(label), total=total)

        def advance(text_value: str) -> None:
            bar.update(task, advance=1, description=_clean(f"{label}: {text_value}"))

        yield advance


@contextlib.contextmanager
def counting(label: str) -> Iterator[Callable[[int], None]]:
    """A transient spinner on stderr for work of unknown size (drawn only on a terminal); yields
    `add(n)`, which counts n more done: "reading the registry: 12,400 servers"."""
    console = _console(stderr=True)
    if not console.is_terminal:  # nothing to draw: rich.progress (40 ms to import) is not needed
        yield lambda _n: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as bar:
        task = bar.add_task(_clean(label), total=None)
        done = [0]

        def add(n: int) -> None:
            done[0] += n
            bar.update(task, description=_clean(f"{label}: {done[0]:,}"))

        yield add


class Working:
    """What `working` yields: `update(text)` redraws its line, `say(message)` prints a status line above it."""

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self._bar, self._task = bar, task

    def update(self, text_value: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=_clean(text_value))

    def say(self, message: str) -> None:
        if self._bar is None:
            say(message)
        else:
            self._bar.console.print(_clean(message), markup=False)


@contextlib.contextmanager
def working(label: str) -> Iterator[Working]:
    """A transient spinner with the time elapsed on stderr for slow steps whose line changes (drawn only
    on a terminal; status lines are printed either way)."""
    console = _console(stderr=True)
    if not console.is_terminal:
        yield Working()
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as bar:
        yield Working(bar, bar.add_task(_clean(label), total=None))


def plural(n: int, word: str) -> str:
    """`1 tool`, `2 tools`, `0 resources`."""
    return f"{n} {word if n == 1 else word + 's'}"


def when(ts: float, seconds: bool = True) -> str:
    """An epoch time as local date and time (to the second, or the minute)."""
    from datetime import datetime

    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def first_line(text_value: str, width: int = 80) -> str:
    line = (text_value or "").strip().splitlines()[0] if (text_value or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"
