"""The naming rules server, profile and prefix names share, and how an exposed name splits."""

from __future__ import annotations

import re

from coffer.errors import UsageError

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,19}$")
SEP = "__"
RESERVED_NAMES = frozenset({"coffer"})


def validate_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise UsageError(
            f"invalid server name '{name}': use 1-20 lowercase letters, digits or '-', starting with a letter or digit"
        )
    if name in RESERVED_NAMES:
        raise UsageError(f"server name '{name}' is reserved for Coffer's own tools (coffer__search_tools, ...)")
    return name


def validate_prefix(prefix: str) -> str:
    """A prefix is "" (bare names) or spelled like a server name, so `__` stays the only separator."""
    if prefix and not NAME_RE.match(prefix):
        raise UsageError(
            f"invalid prefix '{prefix}': use '' or 1-20 lowercase letters, digits or '-' (first a letter or digit)"
        )
    if prefix in RESERVED_NAMES:
        raise UsageError(f"prefix '{prefix}' is reserved for Coffer's own tools (coffer__search_tools, ...)")
    return prefix


def split_target(target: str) -> tuple[str, str | None]:
    """`github` -> ("github", None); `github__delete_repository` -> ("github", "delete_repository").

    Server names cannot contain '_', so the first '__' is always the boundary.
    """
    server, sep, tool = target.partition(SEP)
    if sep and not tool:
        raise UsageError(f"invalid target '{target}': expected SERVER or SERVER__TOOL")
    return server, (tool if sep else None)
