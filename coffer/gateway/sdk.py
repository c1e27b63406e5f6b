"""The host half of the SDK seam: every use of the MCP SDK's internals on the host side of the wire.

Written for mcp 2.3.x (`mcp-types` alike); the client half is `coffer/upstreams/sdk.py`, which also holds the
version check both halves share.

pyproject pins `mcp>=2.3,<2.4`; `tests/gateway/test_sdk.py` fails with a clear message when the
installed SDK is outside `SUPPORTED`, or when a private named here is gone. Each private, and why:

- `mcp.server._otel.OpenTelemetryMiddleware`: the SDK's own SERVER span per inbound request (continuing
  the host's `traceparent`). `GatewayServer` drops it from `Server.middleware` (not free even without an
  exporter) and puts it back first when telemetry is on (`trace_requests`, coffer.telemetry).

- `ServerSession._connection` (set in `ServerSession.__init__`): the host connection behind the
  per-request session proxy the SDK hands each handler. Hosts are told apart by it (one per stdio
  host or HTTP session) to route logs, subscriptions, relayed requests and tasks (`host_connection`).
- `StreamableHTTPServerTransport._handle_post_request` is replaced for requests (`StreamableHTTPTransport`):
  it answers JSON or SSE as each request needs (coffer.gateway.httpshape), where the SDK runs an SSE
  event-source response for every request. It uses the transport's helpers as the original does
  (`_read_stream_writer`, `_request_streams`, `_event_store`, `_check_content_type`,
  `_validate_request_headers`, `_message_metadata`, `_create_session_message`, `_create_error_response`,
  `_create_json_response`, `_clean_up_memory_streams`), and the session manager's `_admit_session` is
  extended to make the transport it built that one. Everything else (sessions, GET streams, DELETE,
  security, idle expiry, the 2026-07-28 single-exchange path) is the SDK's.

Public API that Coffer bends, kept here too so a change of the SDK's shape is found in one place:
`Server.create_initialization_options` and `Server.get_capabilities` are overridden (`GatewayServer`)
to decide capabilities at each initialize from the live upstreams; `Server.middleware` is emptied.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.session import ServerSession
from mcp.server.streamable_http import (
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    check_accept_headers,
)
from mcp.server.streamable_http import StreamableHTTPServerTransport as _SDKTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from coffer.gateway.httpshape import Reply, lifespan_app, relay
from coffer.upstreams import sdk as client_sdk

log = logging.getLogger(__name__)

SUPPORTED, DISTRIBUTIONS = client_sdk.SUPPORTED, client_sdk.DISTRIBUTIONS
PRIVATES: dict[str, Callable[[], bool]] = {
    **client_sdk.PRIVATES,
    "ServerSession.__init__ sets self._connection": lambda: "_connection" in ServerSession.__init__.__code__.co_names,
    "mcp.server._otel.OpenTelemetryMiddleware": lambda: _otel_middleware() is not None,
    **{
        f"StreamableHTTPServerTransport.{name}": client_sdk.has(_SDKTransport, name)
        for name in (
            "_handle_post_request",
            "_check_content_type",
            "_validate_request_headers",
            "_message_metadata",
            "_create_session_message",
            "_create_error_response",
            "_create_json_response",
            "_clean_up_memory_streams",
        )
    },
    "StreamableHTTPSessionManager._admit_session": client_sdk.has(StreamableHTTPSessionManager, "_admit_session"),
    "StreamableHTTPServerTransport.__init__ sets _request_streams and _event_store": lambda: (
        {"_request_streams", "_event_store"} <= set(_SDKTransport.__init__.__code__.co_names)
    ),
}


def _otel_middleware() -> Any:
    try:
        from mcp.server._otel import OpenTelemetryMiddleware
    except ImportError:
        return None
    return OpenTelemetryMiddleware


def version_problems() -> list[str]:
    """What is wrong with the installed SDK for either half of the seam (coffer.upstreams.sdk)."""
    return client_sdk.version_problems(PRIVATES)


def host_connection(session: Any) -> Any:
    """The host connection behind a per-request `ServerSession` (the session itself for other objects)."""
    return getattr(session, "_connection", session)


def http_speaker(ctx: Any) -> Any:
    """The team member (coffer.trust.team.Member) an HTTP request came from, as the team guard put it in
    the request's ASGI scope; None on stdio and for one user."""
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    return state.get("team_member") if isinstance(state, dict) else None


async def member_middleware(ctx: Any, call_next: Any) -> Any:
    """`Server.middleware`: the request's team member (if any) is current while it is handled, in every
    task and thread the handler starts (coffer.trust.team.speaking)."""
    from coffer.trust.team import speaking

    member = http_speaker(ctx)
    if member is None:
        return await call_next(ctx)
    with speaking(member):
        return await call_next(ctx)


def http_member(ctx: Any) -> str | None:
    """The team member an HTTP request came from: what the team guard (coffer.gateway.http) put in the
    request's ASGI scope, reached through the SDK's per-request context; None on stdio and for one user."""
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    member = state.get("member") if isinstance(state, dict) else None
    return member if isinstance(member, str) else None


def host_client(session: Any) -> tuple[str | None, str | None]:
    """The host's name and version from its `initialize` (None, None for a 2026-07-28 host without them)."""
    info = getattr(getattr(session, "client_params", None), "client_info", None)
    return getattr(info, "name", None), getattr(info, "version", None)


LEGACY_CHANGED = NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True)


class GatewayServer(Server[Any]):
    """The SDK's server, with capabilities decided when each host initializes: list_changed on,
    `logging` always (Coffer filters and forwards levels), the rest as `adjust` makes them from the
    upstreams (`View.adjust_capabilities`). Its middleware: the default OpenTelemetry span is dropped
    (a no-op without an exporter, but not free), and `extensions`, which the 2025-11-25 surface has no
    field for and the SDK's sieve removes, is put back into the initialize result (MCP Apps hosts of
    that revision read it there)."""

    def __init__(
        self, *args: Any, adjust: Callable[[types.ServerCapabilities], types.ServerCapabilities], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._adjust = adjust
        self.middleware = [self._extensions_on_initialize]

    def trace_requests(self) -> None:
        """Telemetry is on: the SDK's span per inbound request goes back in, outermost (once)."""
        middleware = _otel_middleware()
        if middleware is not None and not any(isinstance(m, middleware) for m in self.middleware):
            self.middleware.insert(0, middleware())

    async def _extensions_on_initialize(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict) and isinstance(result.get("capabilities"), dict):
            extensions = self._adjust(types.ServerCapabilities()).extensions
            if extensions and "extensions" not in result["capabilities"]:
                result["capabilities"]["extensions"] = extensions
        return result

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        return super().create_initialization_options(notification_options or LEGACY_CHANGED, *args, **kwargs)

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        return self._adjust(super().get_capabilities(*args, **kwargs))


class StreamableHTTPTransport(_SDKTransport):
    """The SDK's streamable HTTP transport, but a POSTed request is answered JSON or SSE as it needs
    (coffer.gateway.httpshape); with an event store (resumable streams, which Coffer does not use) or
    in JSON-only mode the SDK's own handler runs."""

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        writer = self._read_stream_writer
        if self.is_json_response_enabled or self._event_store is not None or writer is None:
            await super()._handle_post_request(scope, request, receive, send)
            return
        reply = Reply(
            send, [(MCP_SESSION_ID_HEADER.encode(), self.mcp_session_id.encode())] if self.mcp_session_id else []
        )
        try:
            refusal = await self._refusal(request)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            body = await request.body()
            try:
                message = types.jsonrpc_message_adapter.validate_json(body, by_name=False)
            except ValidationError as e:
                parse = any(err["type"] == "json_invalid" for err in e.errors())
                what, code = ("Parse error", types.PARSE_ERROR) if parse else ("Validation error", types.INVALID_PARAMS)
                await self._create_error_response(f"{what}: {e}", HTTPStatus.BAD_REQUEST, code)(scope, receive, send)
                return
            initialize = isinstance(message, types.JSONRPCRequest) and message.method == "initialize"
            if initialize:
                claimed = request.headers.get(MCP_SESSION_ID_HEADER)
                if self.mcp_session_id and claimed and claimed != self.mcp_session_id:
                    response = self._create_error_response(
                        "Not Found: Invalid or expired session ID", HTTPStatus.NOT_FOUND
                    )
                    await response(scope, receive, send)
                    return
            elif not await self._validate_request_headers(request, send):
                return
            if not isinstance(message, types.JSONRPCRequest):  # a notification or a response: 202, then passed on
                await self._create_json_response(None, HTTPStatus.ACCEPTED)(scope, receive, send)
                await writer.send(SessionMessage(message, metadata=self._message_metadata(request)))
                return
            version = (
                str(message.params.get("protocolVersion", types.DEFAULT_NEGOTIATED_VERSION))
                if initialize and message.params
                else request.headers.get(MCP_PROTOCOL_VERSION_HEADER, types.DEFAULT_NEGOTIATED_VERSION)
            )
            request_id = str(message.id)
            streams = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
            self._request_streams[request_id] = streams
            try:
                await writer.send(self._create_session_message(message, request, request_id, version))
                if not await relay(streams, reply):
                    response = self._create_error_response(
                        "Session terminated before the request completed",
                        HTTPStatus.INTERNAL_SERVER_ERROR,
                        types.INTERNAL_ERROR,
                    )
                    await response(scope, receive, send)
            finally:
                await self._clean_up_memory_streams(request_id)
        except Exception as err:
            log.exception("Error handling POST request")
            if not reply.started:
                response = self._create_error_response(
                    "Error handling POST request", HTTPStatus.INTERNAL_SERVER_ERROR, types.INTERNAL_ERROR
                )
                await response(scope, receive, send)
            else:
                with contextlib.suppress(Exception):  # the client may be gone: that is what failed
                    await reply.end()
            await writer.send(err)

    async def _refusal(self, request: Request) -> Any:
        """The error response for a POST whose headers are wrong, else None."""
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            return self._create_error_response(
                "Not Acceptable: Client must accept both application/json and text/event-stream",
                HTTPStatus.NOT_ACCEPTABLE,
            )
        if not self._check_content_type(request):
            return self._create_error_response(
                "Unsupported Media Type: Content-Type must be application/json", HTTPStatus.UNSUPPORTED_MEDIA_TYPE
            )
        return None


class _SessionManager(StreamableHTTPSessionManager):
    def _admit_session(self, requestor: Any) -> Any:
        """The SDK's admission (session limit, owner, registration) and its transport, made ours: the
        subclass adds no state, so the object the SDK built and registered is changed in place rather
        than built again from a copy of its arguments."""
        transport = super()._admit_session(requestor)
        if transport is not None:
            transport.__class__ = StreamableHTTPTransport
        return transport


def streamable_http_app(server: Server[Any], path: str = "/mcp", public: str | None = None) -> Any:
    """The server's streamable HTTP app on 127.0.0.1 as `Server.streamable_http_app(host="127.0.0.1")`
    builds it (Host and Origin checks on, the SDK's limits), with `StreamableHTTPTransport` per session,
    served at `path` by a bare ASGI app (Starlette's router and its two middlewares wrapped every request
    and every message sent, for one route). `public`: the `host[:port]` a team gateway is reached by
    (its resource URL's), accepted beside loopback."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if public:
        hosts += [public, *([f"{public}:*"] if ":" not in public else [])]
        origins += [f"https://{public}", f"http://{public}"]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    manager = _SessionManager(app=server, security_settings=security)
    return lifespan_app(manager.run, path, StreamableHTTPASGIApp(manager))
