"""The members' console of a team gateway, in Chromium (Playwright): a person signs in at the real OpenID
provider's own login and consent pages (authorization code with PKCE), sees who they are and what they
reach, and sets a secret their per-member server then runs with; a non-member is refused; the console's
API is closed to a request without the session, or from another origin."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from coffer.trust import member_secrets
from tests.console.test_console_browser import CHROMIUM_ARGS, require_chromium
from tests.fixtures.gateway_harness import text
from tests.gateway.test_team_gateway import Gateway, pytestmark, served
from tests.gateway.test_team_member_servers import setup
from tests.gateway.test_team_members import member

__all__ = ["pytestmark"]


@pytest.fixture
def team(coffer_home: Path) -> Iterator[Gateway]:
    with served(coffer_home, members='members = ["group:eng"]', setup=setup, console=True) as gateway:
        yield gateway


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """The system's Chromium through Playwright's async API (these tests run in an event loop)."""
    path = require_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def sign_in(browser: Any, g: Gateway, login: str) -> Any:
    """Open the console, and sign in at the provider's pages as `login` (its dev login takes any password)."""
    page = await (await browser.new_context()).new_page()
    await page.goto(g.url.removesuffix("/mcp") + "/console")
    assert page.url.startswith(g.idp.url), page.url  # sent to the provider: not signed in here
    await page.fill("input[name=login]", login)
    await page.fill("input[name=password]", "any")
    await page.click("button[type=submit]")
    await page.wait_for_load_state()
    if page.url.startswith(g.idp.url):  # the consent page: this gateway asks for mcp:tools
        await page.click("button[type=submit]")
        await page.wait_for_load_state()
    return page


async def test_a_member_signs_in_at_the_provider_and_sets_its_own_secret(team: Gateway) -> None:
    g = team
    async with chromium() as browser:
        page = await sign_in(browser, g, "agent-alice")
        await page.wait_for_selector("#sub:has-text('agent-alice')")
        assert page.url.endswith("/console/")
        assert await page.text_content("#via") == "group:eng"
        assert await page.text_content("#profile") == "the whole vault"
        await page.wait_for_selector("#tools li:has-text('alpha__echo')")
        cookie = next(c for c in await page.context.cookies() if c["name"] == "coffer-team-session")
        assert cookie["httpOnly"] and cookie["path"] == "/console"

        await page.fill("#name", "TOKEN")
        await page.fill("#value", "alice-from-console-5e1")
        await page.click("#set button[type=submit]")
        await page.wait_for_selector("#secrets code:has-text('TOKEN')")
        assert "alice-from-console-5e1" not in await page.content()
        assert member_secrets.names("agent-alice") == ["TOKEN"]
        async with member(g, "agent-alice") as session:  # the agent's own token, the console's secret
            assert text(await session.call_tool("gh__env", {"name": "TOKEN"})) == "alice-from-console-5e1"

        # the API is the page's: no session, or another origin, gets nothing
        api = g.url.removesuffix("/mcp") + "/console/api"
        assert httpx2.get(api + "/me", timeout=10).status_code == 401
        held = {"coffer-team-session": cookie["value"]}
        evil = {"Origin": "http://evil.test"}
        put = httpx2.put(api + "/secrets/TOKEN", json={"value": "evil"}, cookies=held, headers=evil, timeout=10)
        assert put.status_code == 403
        assert member_secrets.resolve("agent-alice", "TOKEN", "t") == "alice-from-console-5e1"

        await page.click("#secrets button")  # remove it
        await page.wait_for_selector("#secrets li:has-text('none yet')")
        assert member_secrets.names("agent-alice") == []
        await page.click("#signout")
        await page.wait_for_load_state()
        assert httpx2.get(api + "/me", cookies=held, timeout=10).status_code == 401


async def test_a_person_who_is_no_member_is_refused(team: Gateway) -> None:
    async with chromium() as browser:
        page = await sign_in(browser, team, "stranger")
        assert "is not a member" in await page.content()
        assert not [c for c in await page.context.cookies() if c["name"] == "coffer-team-session"]
