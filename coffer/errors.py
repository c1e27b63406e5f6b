"""Errors that reach the user as one line and a non-zero exit code.

Every part raises a subclass of `CofferError`; the CLI is the only place that turns them into exits.
Exit codes are stable so scripts can branch on them.
"""

from __future__ import annotations

from collections.abc import Iterable

INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it


class CofferError(Exception):
    """Base error: `str(err)` is the one-line message shown to the user."""

    exit_code = 1
    code = "error"


class UsageError(CofferError):
    """The user asked for something malformed (bad name, bad flag value)."""

    exit_code = 2
    code = "usage"


class NotFoundError(CofferError):
    """A server, tool, note or file the user named does not exist."""

    exit_code = 3
    code = "not_found"


class ConflictError(CofferError):
    """The thing already exists, or the state changed under us."""

    exit_code = 4
    code = "conflict"


class RegistryError(CofferError):
    """coffer.toml cannot be read or parsed; the message names file and line."""

    exit_code = 5
    code = "registry"


class UpstreamError(CofferError):
    """An upstream server could not be started, reached or used."""

    exit_code = 6
    code = "upstream"


class SecretError(CofferError):
    """A `${VAR}` or `${secret:NAME}` reference could not be resolved."""

    exit_code = 7
    code = "secret"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """The one of `choices` closest to a mistyped `word`, as `; did you mean 'x'?` (empty when none is
    near): a typo'd name gets the name meant, not just a pointer to the list."""
    import difflib

    guess = difflib.get_close_matches(word, sorted(set(choices) - {word}), n=1, cutoff=0.6)
    return f"; did you mean '{guess[0]}'?" if guess else ""
