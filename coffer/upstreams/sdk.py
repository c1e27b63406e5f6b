"""The client half of the SDK seam: every use of the MCP SDK's internals on the upstream side of the wire.

Written for mcp 2.3.x (`mcp-types` alike); pyproject pins `mcp>=2.3,<2.4`, and `tests/gateway/test_sdk.py`
fails with a clear message when the installed SDK is outside `SUPPORTED` or a private named here (or in
the host half, `coffer/gateway/sdk.py`) is gone. Each private, and why:

- `ClientSession._stamp(data, opts)` (set in `ClientSession.__init__`): adds the negotiated era's
  request `_meta` and HTTP headers to an outgoing request. Coffer sends upstream requests itself
  (`send_raw`) so it can pick their ids and cancel them before answering the host
  (`coffer.upstreams.outbound`), and the SDK's `subscriptions.py` stamps the same way.
- `ClientSession._dispatcher.send_raw_request(method, params, opts)`: sends a request with
  caller-chosen options (`request_id`, `cancel_on_abandon=False`) and returns the raw result dict, so
  a result the SDK's models would reject (a tool with a broken schema) reaches the gateway to judge.
- `OAuthClientProvider._initialize()` and `._auth_flow(request)`: the provider's load step and its
  httpx auth generator. `OAuthProvider` below keeps a stored token's expiry on load (the SDK drops it,
  so an expired token was sent once before being refreshed) and answers a 401 on a request carrying a
  refreshable token with one refresh and a retry, before asking for a new authorisation.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.exceptions import OAuthFlowError

SUPPORTED = ((2, 3), (2, 4))  # [low, high) by (major, minor): the releases both halves were written against
DISTRIBUTIONS = ("mcp", "mcp-types")


def has(cls: type, name: str) -> Callable[[], bool]:
    return lambda: callable(getattr(cls, name, None))


PRIVATES: dict[str, Callable[[], bool]] = {
    "ClientSession.__init__ sets self._stamp": lambda: "_stamp" in ClientSession.__init__.__code__.co_names,
    "ClientSession.__init__ sets self._dispatcher": lambda: "_dispatcher" in ClientSession.__init__.__code__.co_names,
    "OAuthClientProvider._initialize": has(OAuthClientProvider, "_initialize"),
    "OAuthClientProvider._auth_flow": has(OAuthClientProvider, "_auth_flow"),
}


def version_problems(privates: Mapping[str, Callable[[], bool]]) -> list[str]:
    """What is wrong with the installed SDK for the seam: versions outside `SUPPORTED`, `privates` gone."""
    problems = []
    low, high = SUPPORTED
    for dist in DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{dist} is not installed")
            continue
        release = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
        if not low <= release < high:
            problems.append(
                f"{dist} {version} is installed, but coffer/gateway/sdk.py was written for "
                f"{low[0]}.{low[1]}.x (pyproject pins >={low[0]}.{low[1]},<{high[0]}.{high[1]}): "
                "re-check each private it names before widening the pin"
            )
    problems += [
        f"the SDK no longer has {name} (the SDK seam, coffer/*/sdk.py, relies on it)"
        for name, ok in privates.items()
        if not ok()
    ]
    return problems


Stamp = Callable[[dict[str, Any], dict[str, Any]], None]


def stamper(session: ClientSession) -> Stamp:
    """What adds the negotiated era's `_meta` and headers to an outgoing request, as the SDK itself does."""
    stamp: Stamp = session._stamp  # type: ignore[assignment]
    return stamp


async def send_raw(session: ClientSession, method: str, params: dict[str, Any] | None, opts: dict[str, Any]) -> Any:
    """Send one request with our own options; the result comes back as the wire-format dict."""
    return await session._dispatcher.send_raw_request(method, params, opts)  # type: ignore[arg-type]


class OAuthProvider(OAuthClientProvider):
    """The SDK's provider with two gaps filled (see the module docstring). `flow_errors` are recorded in
    `failure` (why the last flow failed, for the upstream's one-line error) and re-raised."""

    flow_errors: tuple[type[BaseException], ...] = (OAuthFlowError,)
    failure: BaseException | None = None

    async def _initialize(self) -> None:
        await super()._initialize()
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        for attempt in range(2):
            inner = super()._auth_flow(request)
            retry = False
            try:
                outgoing = await inner.__anext__()
                while True:
                    response = yield outgoing
                    if (
                        attempt == 0
                        and outgoing is request
                        and response.status_code == 401
                        and self.context.can_refresh_token()
                    ):
                        retry = True
                        break
                    outgoing = await inner.asend(response)
            except StopAsyncIteration:
                return
            except self.flow_errors as exc:
                self.failure = exc
                raise
            finally:
                await inner.aclose()
            if not retry:
                return
            self.context.token_expiry_time = time.time() - 1  # the server says it is spent: refresh first
