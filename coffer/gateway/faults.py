"""How an upstream's failures are read and paced: restart backoff, the real error inside task-group
wrappers, an HTTP status, and which listed tools can be advertised at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

BACKOFF_BASE_S = 1.0
BACKOFF_FACTOR = 3.0
BACKOFF_CAP_S = 300.0


def backoff(failures: int) -> float:
    """Seconds before restart n+1: the first retry is immediate, then 1, 3, 9 ... capped at 5 minutes.

    Tripling keeps a server that dies on every start (and is asked for on every call) under 20 spawns
    in its first hour and 12 an hour after that.
    """
    if failures <= 1:
        return 0.0
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * BACKOFF_FACTOR ** (failures - 2))


def leaf(exc: BaseException) -> BaseException:
    """The real error inside the ExceptionGroups that task groups wrap around it."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def checked_tools(tools: list[dict[str, Any]], note: Callable[[str], None]) -> list[dict[str, Any]]:
    """Tools that can be advertised: a missing schema is repaired to an empty object schema, a tool
    without a name or with a schema that is not an object schema is dropped; each noted for doctor."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            note("a tool without a name was dropped")
            continue
        schema = tool.get("inputSchema")
        if schema is None:
            note(f"tool '{name[:60]}' had no inputSchema: advertised with an empty object schema")
            tool = {**tool, "inputSchema": {"type": "object"}}
        elif not isinstance(schema, dict) or schema.get("type", "object") != "object":
            note(f"tool '{name[:60]}' was dropped: its inputSchema is not an object schema")
            continue
        out.append(tool)
    return out
