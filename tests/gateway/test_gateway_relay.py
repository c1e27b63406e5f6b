"""Upstream-to-host traffic through `coffer serve`: sampling, elicitation, roots, logs and completions.

A real host session (with or without each capability) drives `coffer serve` as a subprocess; the
fixture upstream turns to its client in the middle of a tool call, as servers that sample do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from tests.fixtures.gateway_harness import add_fixture, read_events, serve, text, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.serve_modes]  # through the engine and --standalone


async def test_a_host_with_the_capabilities_answers_upstream_requests(coffer_home: Path, tmp_path: Path) -> None:
    events = tmp_path / "alpha.events"
    add_fixture(coffer_home, "alpha", "relay", events=events)
    asked: list[str] = []
    logs: list[types.LoggingMessageNotificationParams] = []

    async def sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        asked.append(params.messages[0].content.text)  # type: ignore[union-attr]
        reply = types.TextContent(type="text", text="four, from the host's model")
        return types.CreateMessageResult(role="assistant", model="host-model", content=reply)

    async def elicitation(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(ctx: ClientRequestContext) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    async def logging(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    callbacks = {"elicitation_callback": elicitation, "list_roots_callback": roots, "logging_callback": logging}
    async with serve(coffer_home, sampling=sampling, **callbacks) as s:
        assert text(await s.call("alpha__caps")) == "sampling,elicitation,roots"  # told what the host can take
        answer = await s.call("alpha__ask_model", {"prompt": "What is 2 + 2?"})
        assert not answer.is_error and text(answer) == "model said: four, from the host's model"
        assert asked == ["What is 2 + 2?"]
        assert text(await s.call("alpha__ask_user")) == "accept: Ada"
        assert text(await s.call("alpha__roots")) == "file:///work/project"
        await s.session.send_notification(types.RootsListChangedNotification())  # passed on to every upstream
        await wait_for(lambda: "roots:changed" in read_events(events), what="roots/list_changed at the upstream")

        assert text(await s.call("alpha__log")) == "logged"
        await wait_for(lambda: bool(logs), what="the upstream's log line at the host")
        assert (logs[0].level, logs[0].logger, logs[0].data) == ("warning", "alpha/fixture", "alpha says hi")

        prompt = types.PromptReference(name="alpha__greet")  # the exposed name, routed to alpha's `greet`
        done = await s.session.complete(prompt, {"name": "name", "value": "A"})
        assert done.completion.values == ["Ada", "Alan"]
        template = types.ResourceTemplateReference(uri="fixture://alpha/item/{id}")
        done = await s.session.complete(template, {"name": "id", "value": "4"})
        assert done.completion.values == ["40", "41", "42"]


async def test_a_relayed_request_ends_with_the_call_that_caused_it(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha", "relay")
    asked, gave_up = anyio.Event(), anyio.Event()

    async def sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        asked.set()
        try:
            await anyio.sleep_forever()  # a user who never answers
        finally:
            gave_up.set()

    async with serve(coffer_home, sampling=sampling) as s:
        with anyio.move_on_after(30):  # bounded; the host gives up as soon as the question arrives
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.call, "alpha__ask_model")
                await asked.wait()
                tg.cancel_scope.cancel()
        with anyio.fail_after(10):
            await gave_up.wait()  # the host was told the question is moot
        assert text(await s.call("alpha__echo", {"text": "after"})) == "after"


@pytest.mark.one_mode("in-process")  # the engine's counterpart: tests/engine
async def test_a_host_without_them_gets_clear_errors(coffer_home: Path) -> None:
    """Standalone, the upstream is told only what its one host can take (so it falls back itself)."""
    add_fixture(coffer_home, "alpha", "relay")
    async with serve(coffer_home, args=("--standalone",)) as s:
        assert text(await s.call("alpha__caps")) == ""  # nothing the host cannot take is promised upstream
        for tool, what in (("alpha__ask_model", "Sampling"), ("alpha__ask_user", "Elicitation")):
            refused = await s.call(tool)
            assert refused.is_error and f"{what} not supported" in text(refused), text(refused)
        assert text(await s.call("alpha__echo", {"text": "still here"})) == "still here"


@pytest.mark.one_mode("engine")
async def test_through_the_engine_a_host_without_them_is_refused_per_request(coffer_home: Path) -> None:
    """The engine's upstream serves every session, so it is told everything; a request for a host that
    cannot take it is refused by Coffer, with the reason, and the next call goes on."""
    add_fixture(coffer_home, "alpha", "relay")
    async with serve(coffer_home) as s:
        assert text(await s.call("alpha__caps")) == "sampling,elicitation,roots"
        for tool, what in (("alpha__ask_model", "sampling"), ("alpha__ask_user", "elicitation")):
            refused = await s.call(tool)
            assert refused.is_error and f"the client did not declare {what}" in text(refused), text(refused)
        assert text(await s.call("alpha__echo", {"text": "still here"})) == "still here"
