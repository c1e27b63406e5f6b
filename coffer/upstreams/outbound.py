"""One request to an upstream under an id Coffer chose, so Coffer itself can cancel it.

The SDK sends a courtesy `notifications/cancelled` when a request times out or its caller is
cancelled, but that write is best effort (bounded, skipped when the clock runs out under load) and
happens after the caller has moved on. A gateway that gives up on a call (timeout, the host's
cancellation, shutdown) must tell the upstream before it answers the host, so the upstream stops
working on a call nobody waits for. So each request is sent under a string id of our own
(`coffer-N`, which never collides with the SDK's integer ids), the SDK's courtesy cancel is turned
off, and `send()` writes `notifications/cancelled` for that id itself, on both protocol eras (on a
2026-07-28 streamable HTTP connection the SDK's transport turns it into closing the request's POST,
which is that era's cancellation), before it raises.

Results come back raw (wire-format dicts): the gateway passes them through, and a result the SDK's
models would reject (a tool with a broken schema) is the gateway's to judge, not a reason to fail.
"""

from __future__ import annotations

import contextlib
import itertools
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value

from coffer.upstreams import sdk
from coffer.upstreams.direct import Lane

CANCEL_WRITE_S = 2.0  # bound on writing our cancel; a wedged pipe must not hold the host's answer longer
_ids = itertools.count(1)
# Each session's era stamp (coffer.upstreams.sdk), resolved once per session rather than once per request.
_stamps: weakref.WeakKeyDictionary[ClientSession, sdk.Stamp] = weakref.WeakKeyDictionary()


def next_id() -> str:
    return f"coffer-{next(_ids)}"


async def send(
    session: ClientSession,
    request: Any,
    *,
    timeout: float | None,
    progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None,
    on_id: Callable[[str], None] | None = None,
    lane: Lane | None = None,
) -> dict[str, Any]:
    """Send `request`, wait at most `timeout` s; on timeout or cancellation cancel it upstream first.

    Raises MCPError (REQUEST_TIMEOUT when `timeout` passed) like `ClientSession.send_request`.
    `on_id` learns the request id before it is written (tests and the relay use it). `lane`: the
    session's stdio pipe takes the answer itself (coffer.upstreams.direct), unless progress is wanted.
    """
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    method: str = data["method"]
    request_id = next_id()
    opts: dict[str, Any] = {}
    stamp = _stamps.get(session)
    if stamp is None:
        stamp = _stamps[session] = sdk.stamper(session)
    stamp(data, opts)  # era-specific _meta and headers, as the SDK does
    opts |= {"request_id": request_id, "cancel_on_abandon": False}
    headers = opts.setdefault("headers", {})
    key = getattr(type(request), "name_param", None)
    name = (data.get("params") or {}).get(key) if key else None
    if isinstance(name, str) and MCP_NAME_HEADER not in headers:
        headers[MCP_NAME_HEADER] = encode_header_value(name)
    if timeout is not None:
        opts["timeout"] = timeout
    if progress is not None:
        opts["on_progress"] = progress
    if on_id is not None:
        on_id(request_id)
    try:
        if lane is not None and progress is None:
            return await lane.request(method, data.get("params"), request_id, timeout)
        result: dict[str, Any] = await sdk.send_raw(session, method, data.get("params"), opts)
        return result
    except MCPError as exc:
        if exc.code == types.REQUEST_TIMEOUT:
            await cancel(session, request_id, f"timed out after {timeout:g}s")
        raise
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await cancel(session, request_id, "the client cancelled the call")
        raise


async def cancel(session: ClientSession, request_id: str, reason: str) -> None:
    """Write `notifications/cancelled` for `request_id`; a closed or wedged connection is given up on."""
    note = types.CancelledNotification(params=types.CancelledNotificationParams(request_id=request_id, reason=reason))
    with anyio.move_on_after(CANCEL_WRITE_S):
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError):
            await session.send_notification(note)
