"""The bridge from server-to-client requests to 2026-07-28's multi-round-trip results (MRTR).

A 2026-07-28 host takes no requests from servers: a server that needs input (an elicitation, a
sampling request, the roots) answers the host's `tools/call` with an `InputRequiredResult`, and the
host retries the call with its answers (`inputResponses`) and the echoed `requestState`. Upstreams
of the older revisions still *ask*, in the middle of the call. So for such a host a call runs in the
pool's task group, where it can outlive the host's request (a `Round`): each time the upstream asks,
the host's request is answered with an `InputRequiredResult` carrying that ask, and the host's retry
delivers the answer to the waiting upstream and waits again, for the call's result or its next ask.

A round is found again only by its `requestState`, an unguessable token given to the one host that
made the call (2026-07-28 has no connection to tie it to: each request stands alone), and only for
the same request; one that is not collected is forgotten `FORGET_S` after it ends. A host that never
answers lets the upstream's own call timeout end the round.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError

FORGET_S = 60.0
UNKNOWN_STATE = "unknown or expired requestState: call again without it"
_keys = itertools.count(1)


@dataclass(eq=False)
class _Ask:
    request: dict[str, Any]  # the wire request, as InputRequiredResult.inputRequests carries it
    result_type: Any
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None


@dataclass(eq=False)
class Round:
    """One host call to a 2026-07-28 host that an upstream may ask things in the middle of."""

    token: str
    key: tuple[str, str]  # (method, name or URI): a retry must be of the same request
    timeout: float = 60.0  # how long an ask waits for the host's retry (the upstream's call timeout)
    asks: dict[str, _Ask] = field(default_factory=dict)
    unsent: list[str] = field(default_factory=list)
    outcome: list[Any] = field(default_factory=list)  # [result] or [exception], once the call ended
    done: anyio.Event = field(default_factory=anyio.Event)
    changed: anyio.Event = field(default_factory=anyio.Event)

    def _touch(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def ask(self, request: Any, result_type: Any) -> Any:
        """What the upstream asks: given to the host with the next answer, and waited for."""
        key = f"coffer-input-{next(_keys)}"
        pending = _Ask(request.model_dump(by_alias=True, mode="json", exclude_none=True), result_type)
        self.asks[key] = pending
        self.unsent.append(key)
        self._touch()
        with anyio.move_on_after(self.timeout):
            await pending.answered.wait()
        self.asks.pop(key, None)
        if not pending.answered.is_set():
            return types.ErrorData(code=types.REQUEST_TIMEOUT, message="the client did not answer in time")
        try:
            return result_type.model_validate(pending.answer, by_name=False)
        except Exception:  # a malformed answer is the upstream's to see as an error, not the gateway's crash
            return types.ErrorData(code=types.INVALID_PARAMS, message="the client's answer did not parse")


class UnknownRound(MCPError):
    """A retry whose `requestState` names no round of this host (forged, another host's, or forgotten)."""


class Rounds:
    """The rounds of one gateway, by their `requestState`."""

    def __init__(self, spawn: Callable[..., None]) -> None:
        self._spawn = spawn
        self._rounds: dict[str, Round] = {}

    async def run(
        self,
        ctx: Any,
        key: tuple[str, str],
        params: Any,
        start: Callable[[Round], Awaitable[dict[str, Any]]],
        timeout: float,
    ) -> dict[str, Any]:
        """The call's result, or an InputRequiredResult (as a wire dict) while the upstream waits on input.

        Raises what the call raised; UnknownRound (INVALID_PARAMS) for a `requestState` this host did not get.
        """
        state = getattr(params, "request_state", None)
        if state is None:
            round_ = Round(token=secrets.token_urlsafe(16), key=key, timeout=timeout)
            self._rounds[round_.token] = round_
            self._spawn(self._drive, round_, start)
        else:
            round_ = self._resume(self._find(key, state), getattr(params, "input_responses", None) or {})
        return await self._wait(round_)

    def check(self, key: tuple[str, str], params: Any) -> None:
        """Raises UnknownRound when `params` carries a `requestState` of no round of this request."""
        state = getattr(params, "request_state", None)
        if state is not None:
            self._find(key, state)

    def _find(self, key: tuple[str, str], state: str) -> Round:
        round_ = self._rounds.get(state)
        if round_ is None or round_.key != key:
            raise UnknownRound(code=types.INVALID_PARAMS, message=UNKNOWN_STATE)
        return round_

    def _resume(self, round_: Round, answers: dict[str, Any]) -> Round:
        for name, answer in answers.items():
            pending = round_.asks.get(name)
            if pending is not None and not pending.answered.is_set():
                pending.answer = (
                    answer.model_dump(by_alias=True, mode="json", exclude_none=True)
                    if hasattr(answer, "model_dump")
                    else answer
                )
                pending.answered.set()
        return round_

    async def _drive(self, round_: Round, start: Callable[[Round], Awaitable[dict[str, Any]]]) -> None:
        try:
            round_.outcome.append(await start(round_))
        except Exception as exc:
            round_.outcome.append(exc)
        finally:
            round_.done.set()
            round_._touch()
        await anyio.sleep(FORGET_S)
        self._rounds.pop(round_.token, None)

    async def _wait(self, round_: Round) -> dict[str, Any]:
        while True:
            if round_.done.is_set():
                self._rounds.pop(round_.token, None)
                outcome = round_.outcome[0]
                if isinstance(outcome, BaseException):
                    raise outcome
                result: dict[str, Any] = outcome
                return result
            if round_.unsent:
                asks = {k: round_.asks[k].request for k in round_.unsent if k in round_.asks}
                round_.unsent.clear()
                if asks:
                    return {"resultType": "input_required", "inputRequests": asks, "requestState": round_.token}
            changed = round_.changed
            await changed.wait()


def interim(result: dict[str, Any]) -> bool:
    """An InputRequiredResult: the call is not over (its log row comes with the final answer)."""
    return result.get("resultType") == "input_required"
