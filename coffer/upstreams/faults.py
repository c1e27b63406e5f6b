"""How an upstream's failures are read and paced: restart backoff, the real error inside task-group
wrappers, an HTTP status, what a failure is called (and whether a retry can fix it), and which listed
tools can be advertised at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.client.auth.exceptions import OAuthFlowError

from coffer.errors import SecretError
from coffer.upstreams import oauth
from coffer.upstreams.transport import StreamStats
from coffer.vault.registry import ServerConfig

BACKOFF_BASE_S = 1.0
BACKOFF_FACTOR = 3.0
BACKOFF_CAP_S = 300.0


class Exited(Exception):
    """The upstream's process or connection went away (a lost session, not a stop)."""


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


def describe(exc: BaseException, cfg: ServerConfig, stats: StreamStats) -> tuple[str, str, bool]:
    """(message, error class, permanent?) for a failed start or a lost session of the server `cfg`."""
    tail = stats.last_stderr_line()
    with_tail = f"; stderr: {tail}" if tail else ""
    if isinstance(exc, SecretError):
        return str(exc), "missing_secret", True
    if isinstance(exc, oauth.AuthorizationNeeded):
        return str(exc), "auth_needed", True
    if isinstance(exc, OAuthFlowError | oauth.FlowFailed):  # discovery, registration, the page or the exchange
        return f"server '{cfg.name}': authorisation failed: {exc}", "auth_failed", True
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return f"command not found: {cfg.command}", "spawn_enoent", True
    if isinstance(exc, PermissionError):
        return f"permission denied running {cfg.command}", "spawn_eacces", True
    status = http_status(exc) or stats.http_status  # the SDK folds HTTP errors into JSON-RPC ones
    if status in (401, 403) and cfg.oauth:
        why = f"its authorisation expired or was revoked (HTTP {status}): run `coffer auth {cfg.name}`"
        return f"server '{cfg.name}' cannot be used: {why}", "auth_needed", True
    if status in (401, 403):
        return f"HTTP {status} from {cfg.url} (check its headers/token)", "http_auth", True
    if status is not None:
        return f"HTTP {status} from {cfg.url}", "http_error", False
    if isinstance(exc, Exited) or (isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED):
        reason = stats.broken or "exited"
        code = stats.returncode
        return f"{reason}{f' with code {code}' if code is not None else ''}{with_tail}", "exited", False
    if isinstance(exc, MCPError) and exc.code == types.REQUEST_TIMEOUT:
        garbage = stats.garbage_lines
        noise = f"; {garbage} non-JSON stdout line(s), e.g. {stats.garbage_sample!r}" if garbage else ""
        return f"no answer within {cfg.timeout:g}s{noise}{with_tail}", "start_timeout", False
    if isinstance(exc, MCPError):
        return f"{exc.message}{with_tail}", "handshake_error", False
    return f"{type(exc).__name__}: {exc}{with_tail}", type(exc).__name__, False
